"""`run`: evaluate models on a date through the Dagster graph, print each verdict, gate the exit code."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from datetime import date as date_type
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.arguments import allow_removed_arg, data_args, results_args
from eval_pipeline.cli.arguments import results_dir as local_results_dir
from eval_pipeline.cli.errors import (
    EXIT_ERROR,
    EXIT_OK,
    UsageError,
    exit_for_gate,
    print_warnings,
)
from eval_pipeline.cli.folders import check_evaluation_folders
from eval_pipeline.cli.junit import check_junit, junit_arg, write_junit
from eval_pipeline.cli.numbers import check_number
from eval_pipeline.core.dates import now_utc, today_utc
from eval_pipeline.core.verdicts.gate_defaults import DEFAULT_MAX_ERRORED
from eval_pipeline.location import START_DATE_ENV, start_date

# Parsing and `--help` import this module: the models, providers and Dagster are imported only
# by the functions that use them (tests/test_import_sets.py).
if TYPE_CHECKING:
    from dagster import DagsterInstance
    from upath import UPath

    from eval_pipeline.core.diff.baseline import RegressionDiff
    from eval_pipeline.core.inputs.kb import KnowledgeBase
    from eval_pipeline.core.inputs.loading import Banks, Problem
    from eval_pipeline.core.report.pipeline import Evaluation
    from eval_pipeline.core.report.up_to_date import EvaluationInputs
    from eval_pipeline.core.scoring.evaluation import Scope
    from eval_pipeline.location import LocationPaths
    from eval_pipeline.providers.models import ModelConfig
    from eval_pipeline.providers.target import PrepareReport


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
    p.add_argument("--fail-under", type=float, help="exit 1 when a combined score is below this")
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when the comparison with the model's previous evaluation fails `diff`'s gate",
    )
    p.add_argument(
        "--max-errored",
        type=int,
        default=DEFAULT_MAX_ERRORED,
        help="exit 1 when more tests than this errored (default 0: an unknown outcome is no pass)",
    )
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
    p.add_argument("--cache-dir", type=Path, default=Path(".cache"), help="cache folder [.cache]")
    p.add_argument(
        "--storage-dir", type=Path, default=Path("storage"), help="folder of the asset values [storage]"
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
    if not names or any(n not in valid for n in names):
        raise UsageError(f"--banks: expected 'all' or a comma list of {', '.join(sorted(valid))}")
    return names


def parse_date(text: str | None, flag: str = "--date") -> str:
    """A date the partitions hold: the project's first date..today (UTC); None is today."""
    if text is None:
        return today_utc()
    try:
        value = date_type.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{flag}: '{text}' is not YYYY-MM-DD") from None
    first = start_date()
    if not (first <= value.isoformat() <= today_utc()):
        raise UsageError(f"{flag}: must be between {first} ({START_DATE_ENV}) and today ({today_utc()}), UTC")
    return value.isoformat()


def select_models(requested: list[str], models_file: Path) -> list[str]:
    """The requested models (default: the enabled ones), known, with their API keys set and
    their Python entry points importable."""
    from eval_pipeline.providers.models import load_models, require_keys
    from eval_pipeline.providers.python_target import require_entrypoint

    notices: list[str] = []
    models = load_models(models_file, notices=notices)
    keys = requested or [k for k, m in models.items() if m.enabled]
    unknown = [k for k in keys if k not in models]
    if unknown:
        raise UsageError(f"--model: unknown model(s) {', '.join(unknown)}; see `eval-pipeline models`")
    for key in keys:
        require_keys(models[key])
        require_entrypoint(models[key], models_file)
    for line in notices:
        print(f"notice: {line}", file=sys.stderr)
    return list(dict.fromkeys(keys))


def default_parallel(models: list[str], models_file: Path) -> int:
    """Models at once by default only where they wait on remote services: two that wait on this
    machine's CPU (local embedders, rerankers, entry points) only slow each other down, and a
    worker process costs its own start-up (measured: `python -m benchmarks parallel_models`)."""
    from eval_pipeline.providers.models import load_models

    configs = load_models(models_file)
    remote = sum(configs[m].waits_on_network for m in models)
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


def _project_locations(args: argparse.Namespace, results: str) -> list[tuple[str, UPath]]:
    """The results and storage folders this run writes into: they belong to its KB's project."""
    from eval_pipeline.providers.object_store import output_path

    return [
        ("results folder " + results, output_path(results)),
        ("storage folder " + str(args.storage_dir), output_path(args.storage_dir)),
    ]


def cmd_run(args: argparse.Namespace) -> int:
    from eval_pipeline.cli.project import refuse_other_project
    from eval_pipeline.core.inputs.validation import load_validated

    check_number("--fail-under", args.fail_under, low=0, high=100)
    check_junit(args.junit)
    warnings: list[Problem] = []
    kb, banks = load_validated(args.kb, args.banks_dir, warnings)
    scope = _scope(args, banks)
    if args.max_errored < 0:
        raise UsageError("--max-errored: must be 0 or more")
    if args.fail_on_regression and not scope.is_full:
        raise UsageError("--fail-on-regression: a narrowed run is never compared; run every bank and test")
    models = select_models(args.model, args.models_file)
    date = parse_date(args.date)
    if args.parallel is not None and args.parallel < 1:
        raise UsageError("--parallel: must be 1 or more")
    parallel = min(args.parallel or default_parallel(models, args.models_file), len(models))
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
    print(
        f"eval-pipeline: KB {kb.kb_version} ({kb.content_hash[:12]}), date {date}, models {', '.join(models)}"
    )
    if not scope.is_full:
        return _adhoc(args, kb, banks, scope, models, date, parallel, locations)

    from eval_pipeline.cli.project import record_project
    from eval_pipeline.cli.up_to_date import evaluation_inputs, record_standing, stands, stands_as_recorded
    from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD
    from eval_pipeline.core.verdicts.run_gate import Gates
    from eval_pipeline.providers.object_store import output_path

    gate_settings = Gates(fail_under=args.fail_under, max_errored=args.max_errored)
    inputs = evaluation_inputs(
        args, kb, banks, models, date, gate_settings, DEFAULT_PASS_THRESHOLD, results, paths
    )
    record_project(kb, locations)
    # Decided from what was recorded when it last stood: no Dagster, no code location loaded.
    if not args.retry_errored and stands_as_recorded(args, inputs, output_path(results)):
        return _report(
            models,
            date,
            output_path(results),
            scope,
            [],
            args.fail_on_regression,
            args.allow_removed,
            args.junit,
        )
    from eval_pipeline.orchestration.execution import project_instance
    from eval_pipeline.orchestration.up_to_date import history_in_home, stored_evaluation

    errors: list[str] = []
    # One progress bar per terminal: models running at once would draw over each other.
    with project_instance() as instance, progress_terminal(parallel == 1) as progress_fd:
        standing = None if args.retry_errored else stands(args, inputs, instance, output_path(results))
        if standing is None:
            errors = _evaluate_date(
                args, kb, banks, date, models, parallel, results, paths, instance, inputs, progress_fd
            )
            if not errors:  # recorded only if the instance says it stands (never with an errored test)
                standing = stored_evaluation(instance, date, models, inputs.fingerprint())
        recordable = standing is not None and history_in_home(instance)
    if recordable and standing is not None:
        record_standing(inputs, standing)  # after the instance is closed: closing may write its files
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    return _report(
        models,
        date,
        output_path(results),
        scope,
        errors,
        args.fail_on_regression,
        args.allow_removed,
        args.junit,
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
    inputs: EvaluationInputs,
    progress_fd: int | None,
) -> list[str]:
    """The full evaluation through the graph (or a retry of its errored tests); the errors."""
    # Only an evaluation needs the whole code location: a rerun that stands has answered.
    from eval_pipeline.definitions import build_resources
    from eval_pipeline.defs.resources import (
        InputsResource,
        ProvidersResource,
        RunScopeResource,
        StorageResource,
    )
    from eval_pipeline.defs.run_monitor import end_orphaned_runs
    from eval_pipeline.orchestration.reevaluate import Evaluation, confirm_noise, retry_errored
    from eval_pipeline.providers.object_store import output_path

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
    again = Evaluation(args, kb, banks, date, output_path(results), instance, resources)
    if args.retry_errored:
        return retry_errored(again, models)
    errors = _evaluate(date, models, resources, instance, parallel, inputs.fingerprint())
    return errors + (confirm_noise(again, models) if not errors else [])


@contextlib.contextmanager
def progress_terminal(wanted: bool) -> Iterator[int | None]:
    """A duplicate of stderr for the progress bar while stderr is a terminal, else None: inside
    a Dagster step fds 1 and 2 go to the compute log, so the step's own stderr never is one."""
    if not (wanted and sys.stderr.isatty()):
        yield None
        return
    fd = os.dup(sys.stderr.fileno())
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: an evaluation allocates hundreds of thousands of small
    objects and keeps nearly all of them to the end, so the collector's passes over them found
    nothing and took ~40% of a warm 10,000-test run (reference counting still frees the rest)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _evaluate(
    date: str,
    models: list[str],
    resources: dict[str, object],
    instance: DagsterInstance,
    parallel: int,
    fingerprint: str,
) -> list[str]:
    """The date's evaluation through the asset graph; the failures of its runs."""
    from eval_pipeline.orchestration.execution import run_all
    from eval_pipeline.orchestration.up_to_date import FINGERPRINT_TAG

    outcomes = run_all(
        date,
        models,
        resources,
        instance,
        lambda stage: print(f"  running {stage} …", flush=True),
        parallel=parallel,
        on_model_done=lambda o: print(f"  {'failed' if o.failures else 'finished'} model {o.name}"),
        tags={FINGERPRINT_TAG: fingerprint},
    )
    return [f"{o.name}: {f}" for o in outcomes for f in o.failures]


def _adhoc(
    args: argparse.Namespace,
    kb: KnowledgeBase,
    banks: Banks,
    scope: Scope,
    models: list[str],
    date: str,
    parallel: int,
    locations: list[tuple[str, UPath]],
) -> int:
    """A narrowed run is an ad-hoc check: straight through the core's one route and the models'
    pipelines, no Dagster run and no partition touched, results and gate decision in a folder
    named for the scope (never a diff baseline). Up to `parallel` models at once, on threads: no
    Dagster here, and the pipelines wait on providers or in onnxruntime, both outside the GIL."""
    from concurrent.futures import ThreadPoolExecutor

    from eval_pipeline.cli.project import record_project
    from eval_pipeline.core.calibration.files import calibration_cost
    from eval_pipeline.core.scoring.run_document import SCOPED_DIR
    from eval_pipeline.location import location_paths
    from eval_pipeline.providers.models import load_models

    results_dir = local_results_dir(args) / SCOPED_DIR / scope.label
    print(f"  narrowed run ({scope.label}): ad-hoc check, not a baseline; results under {results_dir}")
    configs = load_models(args.models_file)
    cost = calibration_cost(location_paths().calibration_dir, date)
    record_project(kb, locations)
    with cyclic_gc_paused():  # the report too: it walks every result
        with (
            progress_terminal(parallel == 1) as progress_fd,
            ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="model") as pool,
        ):
            runs = [
                pool.submit(
                    _adhoc_model, args, kb, banks, scope, configs[m], date, cost, results_dir, progress_fd
                )
                for m in models
            ]
            # The first model's exception, if any, as a sequential run would raise it; what each
            # model wrote is reported from memory, not read back and validated again.
            evaluated = {m: run.result() for m, run in zip(models, runs, strict=True)}
        return _report(
            models,
            date,
            results_dir,
            scope,
            [],
            args.fail_on_regression,
            args.allow_removed,
            args.junit,
            evaluated,
        )


_SAY = threading.Lock()


def _say(line: str) -> None:
    """One whole line, even when models on other threads print too."""
    with _SAY:
        print(line, flush=True)


def _adhoc_model(
    args: argparse.Namespace,
    kb: KnowledgeBase,
    banks: Banks,
    scope: Scope,
    cfg: ModelConfig,
    date: str,
    calibration_cost_usd: float,
    results_dir: Path,
    progress_fd: int | None,
) -> Evaluation:
    from eval_pipeline.core.fileio import atomic_write_text
    from eval_pipeline.core.inputs.banks import Mechanism
    from eval_pipeline.core.report.markdown import render_markdown
    from eval_pipeline.core.report.pipeline import Observed, RunSetup, evaluate
    from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD
    from eval_pipeline.core.scoring.run_document import GATE_FILE, REPORT_FILE, RESULTS_FILE
    from eval_pipeline.core.verdicts.run_gate import Gates
    from eval_pipeline.providers.factory import rerank_mode, run_semantic
    from eval_pipeline.providers.progress_bar import semantic_bar
    from eval_pipeline.providers.system_target import run_system
    from eval_pipeline.providers.target import retrieval_items

    model = cfg.key
    tests = scope.select(Mechanism.SEMANTIC, banks.semantic_tests) if scope.runs(Mechanism.SEMANTIC) else []
    boosts = banks.rules.boosts_by_entity() if banks.rules else {}
    items = retrieval_items(tests, cfg.trials)
    _say(f"  running model {model} ({len(items)} semantic retrievals) …")
    prepared: list[PrepareReport] = []
    with semantic_bar(progress_fd if items else None, model, len(items)) as on_done:
        retrievals = (
            run_semantic(
                cfg,
                kb.entities,
                items,
                boosts,
                args.cache_dir,
                args.cache,
                on_done=on_done,
                batch=args.batch,
                on_prepared=prepared.append,
            )
            if items
            else []
        )
    cache_note = next((p.prompt_cache.note for p in prepared if p.prompt_cache is not None), None)
    if cache_note is not None:
        _say(f"  {cache_note}")
    setup = RunSetup(
        kb=kb,
        banks=banks,
        date=date,
        model=model,
        system_config=cfg.model_dump(mode="json"),
        implementations=cfg.implementations,
        pass_threshold=DEFAULT_PASS_THRESHOLD,
        generated_at=now_utc(),
        calibration_cost_usd=calibration_cost_usd,
        rerank_mode=rerank_mode(cfg, args.batch),
        prompt_cache=cache_note,
    )
    observed = Observed(retrievals, run_system(cfg, banks, scope))
    gates = Gates(fail_under=args.fail_under, max_errored=args.max_errored)
    evaluation = evaluate(setup, observed, scope, gates)
    run_dir = results_dir / model / date
    # The gate decision beside the results, as the graph's release gate writes it: `_report`
    # reads the stored decision for every kind of run, so no verdict is derived twice.
    atomic_write_text(run_dir / RESULTS_FILE, evaluation.document.model_dump_json(indent=2))
    atomic_write_text(run_dir / REPORT_FILE, render_markdown(evaluation.document))
    atomic_write_text(run_dir / GATE_FILE, evaluation.gate.model_dump_json(indent=2))
    _say(f"  finished model {model}")
    return evaluation


def _report(
    models: list[str],
    date: str,
    results_dir: Path | UPath,
    scope: Scope,
    errors: list[str],
    fail_on_regression: bool,
    allow_removed: bool,
    junit: Path | None = None,
    evaluated: Mapping[str, Evaluation] | None = None,
) -> int:
    """Each model's summary and gate; the exit code is the worst of them (3 > 1 > 0). With
    `junit`, every model's tests and gate in one JUnit file. `evaluated`: the evaluations this
    process has just written (a narrowed run), used as they are instead of read back."""
    from eval_pipeline.core.diff.baseline import RegressionDiff
    from eval_pipeline.core.report.html import REPORT_HTML_FILE
    from eval_pipeline.core.report.markdown import console_summary
    from eval_pipeline.core.report.run_junit import ModelRun, render_run_junit
    from eval_pipeline.core.report.run_output import failure_lines
    from eval_pipeline.core.scoring.run_document import (
        GATE_FILE,
        REGRESSION_DIFF_FILE,
        REPORT_FILE,
        RESULTS_FILE,
        read_document,
    )
    from eval_pipeline.core.verdicts.run_gate import read_gate

    code = EXIT_ERROR if errors else EXIT_OK
    runs: list[ModelRun] = []
    for model in models:
        run_dir = results_dir / model / date
        held = (evaluated or {}).get(model)
        if held is None and not (run_dir / RESULTS_FILE).is_file():
            code = EXIT_ERROR
            print(f"{model} @ {date}: no results were written (see the errors above)", file=sys.stderr)
            runs.append(ModelRun(model, None, None, "no results were written: " + "; ".join(errors)))
            continue
        doc = held.document if held is not None else read_document(run_dir / RESULTS_FILE)
        diff_file = run_dir / REGRESSION_DIFF_FILE
        regression = None
        if scope.is_full and diff_file.is_file():
            regression = RegressionDiff.model_validate_json(diff_file.read_text())
            for skipped in regression.passed_over:
                print(f"warning: passed over as a baseline: {skipped}", file=sys.stderr)
        print(console_summary(doc))
        code = max(code, _since(regression, run_dir, scope, fail_on_regression, allow_removed))
        print("\n".join(failure_lines(doc, str(run_dir / REPORT_FILE))))
        print(f"  report: {run_dir / REPORT_FILE}\n  results: {run_dir / RESULTS_FILE}")
        if (run_dir / REPORT_HTML_FILE).is_file():  # written with the regression diff (full runs)
            print(f"  html: {run_dir / REPORT_HTML_FILE}")
        if held is None and not (run_dir / GATE_FILE).is_file():
            code = EXIT_ERROR
            print(f"{model} @ {date}: no gate decision was written (see the errors above)", file=sys.stderr)
            runs.append(ModelRun(model, doc, None, "no gate decision was written"))
            continue
        gate = held.gate if held is not None else read_gate(run_dir / GATE_FILE)
        runs.append(ModelRun(model, doc, gate))
        if not gate.passed:
            print(f"  gate {gate.status.value}: {'; '.join(gate.reasons)}")
        code = max(code, exit_for_gate(gate.status))
    write_junit(junit, render_run_junit(runs))
    return code


def _since(
    regression: RegressionDiff | None, run_dir: Path | UPath, scope: Scope, gating: bool, allow_removed: bool
) -> int:
    """Print what changed since the previous evaluation; the exit code its verdict asks for."""
    from eval_pipeline.core.report.run_output import REGRESSION_DIFF_MD, since_lines
    from eval_pipeline.core.verdicts.since import since_verdict

    if not scope.is_full:
        print("  since: a narrowed run is not compared")
        return EXIT_OK
    verdict = since_verdict(regression, fail_on_regression=gating, allow_removed=allow_removed)
    if regression is None:
        print("  since: no regression diff was written")
    else:
        print("\n".join(since_lines(regression, str(run_dir / REGRESSION_DIFF_MD), gating, allow_removed)))
        if not gating and verdict.reasons:
            print(f"  coverage gate failed since {regression.baseline_date}: {'; '.join(verdict.reasons)}")
    return exit_for_gate(verdict.status)
