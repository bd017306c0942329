"""`run`: evaluate models on a date through the Dagster graph, print each verdict, gate the exit code."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError, print_warnings
from eval_pipeline.cli.flags import (
    add_flags,
    check_junit,
    check_number,
    iso_date,
    junit_arg,
    path_arg,
    project_gates,
)
from eval_pipeline.cli.gc_pause import cyclic_gc_paused
from eval_pipeline.cli.run_verdict import report_runs
from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.dates import first_evaluation_date, today_utc

if TYPE_CHECKING:  # parsing imports this module: models, providers and Dagster load with a command
    from upath import UPath

    from eval_pipeline.core.inputs.loading import Banks, Problem
    from eval_pipeline.core.scoring.evaluation import Scope
    from eval_pipeline.orchestration.evaluation_route import EvaluationRequest
    from eval_pipeline.providers.models import ModelConfig, ModelsFile


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate through the Dagster graph and write reports",
        description="Evaluate models on a date: validate the inputs, materialise the asset graph on "
        "the project's Dagster instance, write each model's results, report and gate, and print "
        "the verdicts. --banks/--test/--topic make a narrowed ad-hoc check instead. Exit 0 gates "
        "met, 1 a gate failed, 2 bad input, 3 could not evaluate.",
    )
    add_flags(p, "--model")
    p.add_argument("--date", help="evaluation date YYYY-MM-DD (UTC); default: today")
    p.add_argument("--banks", default="all", help="all, or a comma list of semantic,state,pattern,always")
    p.add_argument("--test", action="append", default=[], dest="tests", help="only this test id (repeat)")
    p.add_argument("--topic", help="only semantic tests with this topic")
    add_flags(p, "--kb", "--banks-dir", "--fail-under", "--fail-on-regression", "--max-errored")
    p.add_argument(
        "--batch",
        action="store_true",
        help="Claude rerankers answer through the Message Batches API: half price, results within 24 h",
    )
    p.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="evaluate up to N models at once (default: as many as call a remote API or service, "
        "when two or more do; else 1, one after another); a provider's pool on the Dagster "
        "instance still limits how many call it at once",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="evaluate even when today's stored evaluation has the same code, inputs, models and gates",
    )
    p.add_argument(
        "--retry-errored",
        action="store_true",
        help="call again only the errored tests of the date's evaluation (semantic trials, and the "
        "team's system's state/pattern/always answers) and merge them into it",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print per model the API calls, tokens and estimated USD the run would spend (cached "
        "answers are free) and exit 0: no call is made, nothing is written",
    )
    p.add_argument(
        "--cache",
        choices=("use", "refresh", "off"),
        default="use",
        help="response and embedding cache: use it, refresh it (call again, store the answers), "
        "or leave it off [use]",
    )
    p.add_argument("--cache-dir", type=path_arg, default=Path(".cache"), help="cache folder [.cache]")
    p.add_argument(
        "--storage-dir", type=path_arg, default=Path("storage"), help="folder of the asset values [storage]"
    )
    add_flags(p, "--models-file", "--results-dir", "--allow-removed")
    junit_arg(p, "every model's tests (narrowed runs too)")


def parse_date(text: str | None, flag: str = "--date") -> str:
    """A date to evaluate, today (UTC) when None: up to MAX_DAYS_BACK days before today."""
    today = today_utc()
    if text is None:
        return today
    value = iso_date(text, flag)
    earliest = first_evaluation_date(today)
    if not (earliest <= value <= today):
        raise UsageError(f"{flag}: must be between {earliest} and today ({today}), UTC")
    return value


def select_models(requested: list[str], models_file: Path, need_keys: bool = True) -> ModelsFile:
    """The models file, read once, holding only the requested models (default: the enabled ones) in
    the order asked: known, their entry points importable, their API keys set unless not `need_keys`."""
    from eval_pipeline.providers.models import ModelsFile, read_models_file, require_keys

    notices: list[str] = []
    file = read_models_file(models_file, notices=notices)
    models = file.models
    keys = requested or [k for k, m in models.items() if m.enabled]
    unknown = [k for k in keys if k not in models]
    if unknown:
        from eval_pipeline.core.suggest import did_you_mean

        hint = did_you_mean(unknown[0], models) or "; see `eval-pipeline models`"
        raise UsageError(f"--model: unknown model(s) {', '.join(unknown)}{hint}")
    for key in keys:
        if need_keys:
            require_keys(models[key])
        if models[key].system is not None:  # the team's system: its clients load only for it
            from eval_pipeline.providers.python_target import require_entrypoint

            require_entrypoint(models[key], models_file)
    for line in notices:
        print(f"notice: {line}", file=sys.stderr)
    return ModelsFile({key: models[key] for key in dict.fromkeys(keys)}, file.gates)


def default_parallel(configs: Mapping[str, ModelConfig]) -> int:
    """Models at once by default only where they wait on remote services: two that wait on this
    machine's CPU (local embedders, rerankers, entry points) only slow each other down, and a
    worker process costs its own start-up (measured: `python -m benchmarks parallel_models`)."""
    remote = sum(cfg.waits_on_network for cfg in configs.values())
    return remote if remote > 1 else 1


def _scope(args: argparse.Namespace, banks: Banks) -> Scope:
    """The banks, tests and topic the flags narrow the run to, checked against the banks."""
    from eval_pipeline.core.inputs.banks import Mechanism
    from eval_pipeline.core.scoring.evaluation import Scope, scope_problems

    valid = {m.value for m in Mechanism}
    names = valid if args.banks == "all" else [b.strip() for b in args.banks.split(",") if b.strip()]
    wrong = [n for n in names if n not in valid]
    if not names or wrong:
        from eval_pipeline.core.suggest import did_you_mean

        hint = did_you_mean(wrong[0], valid) if wrong else ""
        raise UsageError(f"--banks: expected 'all' or a comma list of {', '.join(sorted(valid))}{hint}")
    scope = Scope(banks=frozenset(map(Mechanism, names)), test_ids=frozenset(args.tests), topic=args.topic)
    problems = scope_problems(scope, banks)
    if problems:
        raise UsageError("; ".join(problems))
    return scope


def evaluation_request(args: argparse.Namespace, warnings: list[Problem]) -> EvaluationRequest:
    """The one evaluation the flags ask for, every flag checked: a usage error is one line."""
    from eval_pipeline.core.calibration.files import calibration_cost
    from eval_pipeline.core.inputs.kb_cache import KbCache
    from eval_pipeline.core.inputs.validation import load_validated
    from eval_pipeline.location import location_paths
    from eval_pipeline.orchestration.evaluation_route import EvaluationRequest

    check_number("--fail-under", args.fail_under, low=0, high=100)
    check_junit(args.junit)
    # The validated KB stored beside the other caches: a warm run reads one file, not every entity.
    kb_cache = (
        KbCache(args.cache_dir, read=args.cache == "use", write=not args.dry_run)
        if args.cache != "off"
        else None
    )
    kb, banks = load_validated(args.kb, args.banks_dir, warnings, kb_cache)
    scope = _scope(args, banks)
    if args.max_errored is not None and args.max_errored < 0:
        raise UsageError("--max-errored: must be 0 or more")
    if args.fail_on_regression and not scope.is_full:
        raise UsageError("--fail-on-regression: a narrowed run is never compared; run every bank and test")
    models_file = select_models(args.model, args.models_file, need_keys=not args.dry_run)
    # The project's gates, each flag in its place; a narrowed run is never compared.
    gates = project_gates(args, models_file.gates)
    gates = gates.model_copy(update={"fail_on_regression": gates.fail_on_regression and scope.is_full})
    configs = models_file.models
    date = parse_date(args.date)
    if args.parallel is not None and args.parallel < 1:
        raise UsageError("--parallel: must be 1 or more")
    if args.retry_errored and not scope.is_full:
        raise UsageError(
            "--retry-errored: retries the full evaluation's errored tests; drop --banks/--test/--topic"
        )
    if args.dry_run and args.retry_errored:
        raise UsageError("--dry-run: estimates a whole evaluation; drop --retry-errored")
    paths = location_paths()
    # Reports and asset values go where the code location sends them (an object store's URI
    # included), unless --results-dir says otherwise: one place for the UI's runs and the CLI's.
    given = args.results_dir is not None
    location = replace(
        paths,
        kb=args.kb,
        banks_dir=args.banks_dir,
        models_file=args.models_file,
        results_dir=args.results_dir if given else paths.results_dir,
        results_uri=None if given else paths.results_uri,
        storage_dir=args.storage_dir,
        cache_dir=args.cache_dir,
    )
    return EvaluationRequest(
        kb=kb,
        banks=banks,
        scope=scope,
        configs=configs,
        date=date,
        gates=gates,
        location=location,
        cache_mode=args.cache,
        batch=args.batch,
        parallel=min(args.parallel or default_parallel(configs), len(configs)),
        retry_errored=args.retry_errored,
        force=args.force,
        # Read before anything is written: a bad calibration log is bad input (not for a dry run).
        calibration_cost_usd=0.0 if args.dry_run else calibration_cost(paths.calibration_dir, date),
    )


def _project_folders(request: EvaluationRequest) -> list[tuple[str, Path | UPath]]:
    """Every folder the run writes into checked before it evaluates or calls an API (a narrowed run
    writes only its ad-hoc results and the caches); the results and storage folders it claims."""
    from eval_pipeline.cli.project import check_evaluation_folders
    from eval_pipeline.core.scoring.run_document import SCOPED_DIR
    from eval_pipeline.core.writable import require_writable
    from eval_pipeline.providers.object_store import output_location

    where = request.location
    if request.scope.is_full:
        check_evaluation_folders(where.results_root, where.storage_dir, where.cache_dir, where.outputs_uri)
    else:
        scoped = where.results_dir / SCOPED_DIR / request.scope.label
        require_writable([("results folder", scoped), ("cache folder", where.cache_dir)])
    return [
        ("results folder " + where.results_root, output_location(where.results_root)),
        ("storage folder " + str(where.storage_dir), output_location(where.storage_dir)),
    ]


def _tokens(input_tokens: int, output_tokens: int) -> str:
    output = f" + ~{output_tokens:,} output" if output_tokens else ""
    return f"{input_tokens:,} input{output} tokens"


def _dry_run(request: EvaluationRequest) -> int:
    """Per model, the API calls, tokens and USD the run would spend and what the caches hold."""
    from eval_pipeline.providers.pricing import usd
    from eval_pipeline.providers.prompt_cache import CHARS_PER_TOKEN
    from eval_pipeline.providers.spend_estimate import estimate_spend

    print(
        f"dry run: estimates only, nothing is called or written (tokens ~ characters / {CHARS_PER_TOKEN}; "
        "cached answers cost nothing)"
    )
    embedded: set[tuple[str, str, str]] = set()  # shared by models with the same embedder
    for model, cfg in request.configs.items():
        spend = estimate_spend(
            cfg,
            request.kb.entities,
            request.banks,
            request.scope,
            request.location.cache_dir,
            request.cache_mode,
            batch=request.batch,
            embedded=embedded,
        )
        if not spend.stages:
            print(f"{model}: offline: 0 API calls, {usd(0)}")
            continue
        cached = sum(s.cached for s in spend.stages)
        cost = f"~{usd(spend.cost_usd)}"
        cost += f" (at most {usd(spend.max_cost_usd)})" if spend.max_cost_usd != spend.cost_usd else ""
        cost += " + what the team's system costs" if spend.unpriced else ""
        print(
            f"{model}: {spend.calls:,} calls, {_tokens(spend.input_tokens, spend.output_tokens)}, "
            f"{cost}; {cached:,} answers cached"
        )
        for s in spend.stages:
            line = f"  {s.stage} {s.model_id}: {s.calls:,} calls"
            if s.input_tokens or s.usage.output_tokens:
                line += f", {_tokens(s.input_tokens, s.usage.output_tokens)}"
            line += f", {s.cached:,} cached"
            if s.cost_usd is not None:
                line += f", {usd(s.cost_usd)}" if s.cost_usd == s.max_cost_usd else f", ~{usd(s.cost_usd)}"
            print(line + (f" ({s.note})" if s.note else ""))
    print(
        "  not included: repair calls after an invalid answer, retried failures, and the re-trials "
        "a non-reproducible model makes of a regressed test"
    )
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    # Up to an evaluation through Dagster (imports, loading, a narrowed run, a rerun that stands)
    # the process builds what it keeps to the end: the collector's passes would free next to
    # nothing. It resumes for Dagster's run, once the stored evaluations have not answered.
    with contextlib.ExitStack() as start_up:
        start_up.enter_context(cyclic_gc_paused())
        from eval_pipeline.cli.project import claim_project
        from eval_pipeline.orchestration.evaluation_route import evaluate

        warnings: list[Problem] = []
        request = evaluation_request(args, warnings)
        if args.dry_run:
            return _dry_run(request)
        claim_project(request.kb, _project_folders(request))
        print_warnings(warnings)  # only once the run will happen: a usage error stays one line
        kb = request.kb
        kb_label = f"{one_line(kb.kb_version)} ({kb.content_hash[:12]})"
        print(f"eval-pipeline: KB {kb_label}, date {request.date}, models {', '.join(request.models)}")
        return report_runs(request, evaluate(request, start_up.close), args.junit)
