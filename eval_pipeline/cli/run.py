"""`run`: evaluate models on a date through the Dagster graph, print each verdict, gate the exit code."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Mapping
from datetime import date as date_type
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.arguments import data_args, results_args
from eval_pipeline.cli.arguments import results_dir as local_results_dir
from eval_pipeline.cli.exit_status import (
    UsageError,
    print_warnings,
)
from eval_pipeline.cli.folders import check_evaluation_folders
from eval_pipeline.cli.gates import allow_removed_arg, project_gates, release_gate_args
from eval_pipeline.cli.gc_pause import cyclic_gc_paused
from eval_pipeline.cli.junit_flag import check_junit, junit_arg
from eval_pipeline.cli.numbers import check_number
from eval_pipeline.cli.paths import path_arg
from eval_pipeline.cli.run_verdict import report_runs
from eval_pipeline.cli.terminal import progress_terminal
from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.dates import first_evaluation_date, today_utc

# Parsing and `--help` import this module: the models, providers and Dagster are imported only
# by the functions that use them (tests/test_import_sets.py).
if TYPE_CHECKING:
    from dagster import DagsterInstance
    from upath import UPath

    from eval_pipeline.core.inputs.kb import KnowledgeBase
    from eval_pipeline.core.inputs.loading import Banks, Problem
    from eval_pipeline.core.scoring.evaluation import Scope
    from eval_pipeline.location import LocationPaths
    from eval_pipeline.providers.models import ModelConfig


def add_run_commands(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate through the Dagster graph and write reports",
        description="Evaluate models on a date: validate the inputs, materialise the asset graph on "
        "the project's Dagster instance, write each model's results, report and gate, and print "
        "the verdicts. --banks/--test/--topic make a narrowed ad-hoc check instead. Exit 0 gates "
        "met, 1 a gate failed, 2 bad input, 3 could not evaluate.",
    )
    p.add_argument("--model", action="append", default=[], help="model key (repeat); default: enabled")
    p.add_argument("--date", help="evaluation date YYYY-MM-DD (UTC); default: today")
    p.add_argument("--banks", default="all", help="all, or a comma list of semantic,state,pattern,always")
    p.add_argument("--test", action="append", default=[], dest="tests", help="only this test id (repeat)")
    p.add_argument("--topic", help="only semantic tests with this topic")
    data_args(p)
    release_gate_args(p)
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
    results_args(p)
    allow_removed_arg(p)
    junit_arg(p, "every model's tests (narrowed runs too)")
    p.set_defaults(func=cmd_run)


def _parse_banks(text: str) -> list[str]:
    from eval_pipeline.core.inputs.banks import Mechanism

    if text == "all":
        return [m.value for m in Mechanism]
    names = [b.strip() for b in text.split(",") if b.strip()]
    valid = {m.value for m in Mechanism}
    wrong = [n for n in names if n not in valid]
    if not names or wrong:
        from eval_pipeline.core.suggest import did_you_mean

        hint = did_you_mean(wrong[0], valid) if wrong else ""
        raise UsageError(f"--banks: expected 'all' or a comma list of {', '.join(sorted(valid))}{hint}")
    return names


def parse_date(text: str | None, flag: str = "--date") -> str:
    """A date to evaluate, today (UTC) when None: up to MAX_DAYS_BACK days before today."""
    today = today_utc()
    if text is None:
        return today
    try:
        value = date_type.fromisoformat(text).isoformat()
    except ValueError:
        raise UsageError(f"{flag}: '{text}' is not YYYY-MM-DD") from None
    earliest = first_evaluation_date(today)
    if not (earliest <= value <= today):
        raise UsageError(f"{flag}: must be between {earliest} and today ({today}), UTC")
    return value


def select_models(requested: list[str], models_file: Path, need_keys: bool = True) -> dict[str, ModelConfig]:
    """The requested models (default: the enabled ones), known, with their API keys set (unless
    `need_keys` is false: a dry run prices a model before it has keys) and their Python entry
    points importable: each key's configuration, in the order asked, from one read of the models
    file."""
    from eval_pipeline.providers.models import load_models, require_keys

    notices: list[str] = []
    models = load_models(models_file, notices=notices)
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
    return {key: models[key] for key in dict.fromkeys(keys)}


def default_parallel(configs: Mapping[str, ModelConfig]) -> int:
    """Models at once by default only where they wait on remote services: two that wait on this
    machine's CPU (local embedders, rerankers, entry points) only slow each other down, and a
    worker process costs its own start-up (measured: `python -m benchmarks parallel_models`)."""
    remote = sum(cfg.waits_on_network for cfg in configs.values())
    return remote if remote > 1 else 1


def _scope(args: argparse.Namespace, banks: Banks) -> Scope:
    from eval_pipeline.core.inputs.banks import Mechanism
    from eval_pipeline.core.scoring.evaluation import Scope, scope_problems

    scope = Scope(
        banks=frozenset(Mechanism(b) for b in _parse_banks(args.banks)),
        test_ids=frozenset(args.tests),
        topic=args.topic,
    )
    problems = scope_problems(scope, banks)
    if problems:
        raise UsageError("; ".join(problems))
    return scope


def _results_location(args: argparse.Namespace, paths: LocationPaths) -> str:
    """--results-dir, else where the code location sends reports (an object store's URI included)."""
    return str(args.results_dir) if args.results_dir is not None else paths.results_root


def _check_folders(args: argparse.Namespace, scope: Scope, paths: LocationPaths, results: str) -> None:
    """Every folder the run writes into, before it evaluates or calls an API: a narrowed run
    writes only its ad-hoc results and the caches."""
    from eval_pipeline.core.scoring.run_document import SCOPED_DIR
    from eval_pipeline.core.writable import require_writable

    if not scope.is_full:
        scoped = local_results_dir(args) / SCOPED_DIR / scope.label
        require_writable([("results folder", scoped), ("cache folder", args.cache_dir)])
        return
    check_evaluation_folders(results, args.storage_dir, args.cache_dir, paths.outputs_uri)


def _project_locations(args: argparse.Namespace, results: str) -> list[tuple[str, Path | UPath]]:
    """The results and storage folders this run writes into: they belong to its KB's project."""
    from eval_pipeline.providers.object_store import output_location

    return [
        ("results folder " + results, output_location(results)),
        ("storage folder " + str(args.storage_dir), output_location(args.storage_dir)),
    ]


def cmd_run(args: argparse.Namespace) -> int:
    # Up to an evaluation through Dagster (imports, loading, a narrowed run, a rerun that stands)
    # the process builds what it keeps to the end: the collector's passes would free next to
    # nothing. It resumes for Dagster's run.
    with contextlib.ExitStack() as start_up:
        start_up.enter_context(cyclic_gc_paused())
        return _cmd_run(args, start_up.close)


def _cmd_run(args: argparse.Namespace, resume_gc: Callable[[], None]) -> int:
    from eval_pipeline.cli.project import refuse_other_project
    from eval_pipeline.core.inputs.kb_cache import KbCache
    from eval_pipeline.core.inputs.validation import load_validated

    check_number("--fail-under", args.fail_under, low=0, high=100)
    check_junit(args.junit)
    warnings: list[Problem] = []
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
    # From here on the flags hold the gates this run applies: the project's, each flag in its place
    # (a narrowed run is never compared, so a kept regression gate does not apply to it).
    gates = project_gates(args)
    args.gates = gates
    args.fail_under, args.max_errored, args.allow_removed = (
        gates.fail_under,
        gates.max_errored,
        gates.allow_removed,
    )
    args.fail_on_regression = gates.fail_on_regression and scope.is_full
    configs = select_models(args.model, args.models_file, need_keys=not args.dry_run)
    models = list(configs)
    date = parse_date(args.date)
    if args.parallel is not None and args.parallel < 1:
        raise UsageError("--parallel: must be 1 or more")
    parallel = min(args.parallel or default_parallel(configs), len(models))
    if args.retry_errored and not scope.is_full:
        raise UsageError(
            "--retry-errored: retries the full evaluation's errored tests; drop --banks/--test/--topic"
        )
    if args.dry_run:
        if args.retry_errored:
            raise UsageError("--dry-run: estimates a whole evaluation; drop --retry-errored")
        from eval_pipeline.cli.dry_run import dry_run

        return dry_run(args, kb, banks, scope, models)
    from eval_pipeline.location import location_paths

    # Reports and asset values go where the code location sends them (an object store's URI
    # included), unless --results-dir says otherwise: one place for the UI's runs and the CLI's.
    paths = location_paths()
    results = _results_location(args, paths)
    _check_folders(args, scope, paths, results)
    locations = _project_locations(args, results)
    refuse_other_project(kb, locations)
    print_warnings(warnings)  # only once the run will happen: a usage error stays one line
    kb_label = f"{one_line(kb.kb_version)} ({kb.content_hash[:12]})"
    print(f"eval-pipeline: KB {kb_label}, date {date}, models {', '.join(models)}")
    if not scope.is_full:
        from eval_pipeline.cli.narrowed_run import narrowed_run

        return narrowed_run(args, kb, banks, scope, configs, date, parallel, locations)

    from eval_pipeline.cli.project import record_project
    from eval_pipeline.core.verdicts.run_gate import Gates
    from eval_pipeline.orchestration.standing import standing_of
    from eval_pipeline.providers.object_store import output_location

    applied = Gates(fail_under=args.fail_under, max_errored=args.max_errored)
    fresh = args.force or args.cache != "use"  # asks for answers computed afresh
    standing = standing_of(kb, banks, configs, date, applied, results, args.storage_dir, paths, fresh)
    record_project(kb, locations)
    # Decided first from what was recorded when it last stood: no Dagster, no code location loaded.
    pending = models if args.retry_errored else standing.as_recorded()
    errors: list[str] = []
    if pending:
        from eval_pipeline.orchestration.execution import project_instance

        resume_gc()
        # One progress bar per terminal: models running at once would draw over each other.
        with project_instance() as instance, progress_terminal(parallel == 1) as progress_fd:
            evaluate = pending if args.retry_errored else standing.with_instance(instance, pending)
            if evaluate:
                tags = standing.tags(evaluate)
                errors = _evaluate_date(
                    args, kb, banks, date, evaluate, parallel, results, paths, instance, tags, progress_fd
                )
            stood = standing.settle(instance)
        standing.record(stood)  # after the instance is closed: closing may write its files
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    return report_runs(
        models,
        date,
        output_location(results),
        scope,
        errors,
        args.fail_on_regression,
        args.allow_removed,
        args.junit,
        max_baseline_age_days=args.gates.max_baseline_age_days,
    )


def _evaluate_date(
    args: argparse.Namespace,
    kb: KnowledgeBase,
    banks: Banks,
    date: str,
    models: list[str],
    parallel: int,
    results: str,
    paths: LocationPaths,
    instance: DagsterInstance,
    tags: Mapping[str, str],
    progress_fd: int | None,
) -> list[str]:
    """The full evaluation through the graph (or a retry of its errored tests); the errors."""
    # Only an evaluation needs the whole code location: a rerun that stands has answered. Its
    # modules live to the end: no collector pass over them while they load.
    with cyclic_gc_paused():
        from eval_pipeline.definitions import build_resources
        from eval_pipeline.defs.resources import (
            InputsResource,
            ProvidersResource,
            RunScopeResource,
            StorageResource,
        )
        from eval_pipeline.orchestration.reevaluation_runs import (
            CallSettings,
            Evaluation,
            confirm_noise,
            retry_errored,
        )
        from eval_pipeline.providers.object_store import output_path
        from eval_pipeline.runtime.run_monitor import end_orphaned_runs

    for line in end_orphaned_runs(instance):  # a killed run's slots would stall this one
        print(f"  {line}")

    gates = RunScopeResource(
        fail_under=args.fail_under, max_errored=args.max_errored, progress_fd=progress_fd
    )
    resources = build_resources(
        InputsResource(kb_path=str(args.kb), banks_dir=str(args.banks_dir)),
        StorageResource(
            storage_dir=str(args.storage_dir), results_dir=results, outputs_uri=paths.outputs_uri
        ),
        ProvidersResource.from_environment(
            models_file=str(args.models_file),
            cache_dir=str(args.cache_dir),
            cache_mode=args.cache,
            rerank_batch=args.batch,
        ),
        gates,
    )
    calls = CallSettings(args.models_file, args.cache_dir, args.cache, args.batch)
    again = Evaluation(calls, kb, banks, date, output_path(results), instance, resources)
    if args.retry_errored:
        return retry_errored(again, models)
    errors = _evaluate(date, models, resources, instance, parallel, tags)
    return errors + (confirm_noise(again, models) if not errors else [])


def _evaluate(
    date: str,
    models: list[str],
    resources: dict[str, object],
    instance: DagsterInstance,
    parallel: int,
    tags: Mapping[str, str],
) -> list[str]:
    """The date's evaluation through the asset graph; the failures of its runs."""
    from eval_pipeline.orchestration.execution import run_all

    outcomes = run_all(
        date,
        models,
        resources,
        instance,
        lambda stage: print(f"  running {stage} …", flush=True),
        parallel=parallel,
        on_model_done=lambda o: print(f"  {'failed' if o.failures else 'finished'} model {o.name}"),
        tags=tags,
    )
    return [f"{o.name}: {f}" for o in outcomes for f in o.failures]
