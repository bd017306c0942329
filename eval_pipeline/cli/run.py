"""`run`: evaluate models on a date through the Dagster graph, print each verdict, gate the exit code."""

from __future__ import annotations

import argparse
import sys
import threading
from datetime import date as date_type
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.arguments import results_args
from eval_pipeline.cli.arguments import results_dir as local_results_dir
from eval_pipeline.cli.errors import EXIT_ERROR, EXIT_FOR_GATE, EXIT_OK, UsageError, print_warnings
from eval_pipeline.cli.up_to_date import evaluation_inputs, stands
from eval_pipeline.core.dates import START_DATE, today_utc
from eval_pipeline.core.diff.baseline import RegressionDiff
from eval_pipeline.core.expectations.history import now_utc
from eval_pipeline.core.fileio import atomic_write_text
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks, Problem
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.report.markdown import console_summary, render_markdown
from eval_pipeline.core.report.run_document import (
    REGRESSION_DIFF_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    SCOPED_DIR,
    read_document,
)
from eval_pipeline.core.scoring.evaluation import Scope, scope_problems
from eval_pipeline.core.scoring.gate import DEFAULT_MAX_ERRORED, gate_decision
from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD

if TYPE_CHECKING:  # the providers are imported only by the runs that call them
    from upath import UPath

    from eval_pipeline.providers.models import ModelConfig
    from eval_pipeline.providers.target import PrepareReport


def add_run_commands(sub: Any) -> None:
    p = sub.add_parser("run", help="evaluate through the Dagster graph and write reports")
    p.add_argument("--model", action="append", default=[], help="model key (repeat); default: enabled")
    p.add_argument("--date", help="evaluation date YYYY-MM-DD (UTC); default: today")
    p.add_argument("--banks", default="all", help="all, or a comma list of semantic,state,pattern,always")
    p.add_argument("--test", action="append", default=[], dest="tests", help="only this test id (repeat)")
    p.add_argument("--topic", help="only semantic tests with this topic")
    p.add_argument("--kb", type=Path, default=Path("kb"))
    p.add_argument("--banks-dir", type=Path, default=Path("test_banks"))
    p.add_argument("--fail-under", type=float, help="exit 1 when a combined score is below this")
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
    p.add_argument("--cache", choices=("use", "refresh", "off"), default="use")
    p.add_argument("--cache-dir", type=Path, default=Path(".cache"))
    p.add_argument("--storage-dir", type=Path, default=Path("storage"))
    results_args(p)
    p.set_defaults(func=cmd_run)


def _parse_banks(text: str) -> list[str]:
    if text == "all":
        return [m.value for m in Mechanism]
    names = [b.strip() for b in text.split(",") if b.strip()]
    valid = {m.value for m in Mechanism}
    if not names or any(n not in valid for n in names):
        raise UsageError(f"--banks: expected 'all' or a comma list of {', '.join(sorted(valid))}")
    return names


def parse_date(text: str | None, flag: str = "--date") -> str:
    """A date the partitions hold: START_DATE..today (UTC); None is today."""
    if text is None:
        return today_utc()
    try:
        value = date_type.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{flag}: '{text}' is not YYYY-MM-DD") from None
    if not (START_DATE <= value.isoformat() <= today_utc()):
        raise UsageError(f"{flag}: must be between {START_DATE} and today ({today_utc()}), UTC")
    return value.isoformat()


def select_models(requested: list[str], models_file: Path) -> list[str]:
    """The requested models (default: the enabled ones), known, with their API keys set and
    their Python entry points importable."""
    from eval_pipeline.providers.models import load_models, require_keys
    from eval_pipeline.providers.python_target import require_entrypoint

    models = load_models(models_file)
    keys = requested or [k for k, m in models.items() if m.enabled]
    unknown = [k for k in keys if k not in models]
    if unknown:
        raise UsageError(f"--model: unknown model(s) {', '.join(unknown)}; see `eval-pipeline models`")
    for key in keys:
        require_keys(models[key])
        require_entrypoint(models[key], models_file)
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
    scope = Scope(
        banks=frozenset(Mechanism(b) for b in _parse_banks(args.banks)),
        test_ids=frozenset(args.tests),
        topic=args.topic,
    )
    problems = scope_problems(scope, banks)
    if problems:
        raise UsageError("; ".join(problems))
    return scope


def cmd_run(args: argparse.Namespace) -> int:
    warnings: list[Problem] = []
    kb, banks = load_validated(args.kb, args.banks_dir, warnings)
    scope = _scope(args, banks)
    if args.max_errored < 0:
        raise UsageError("--max-errored: must be 0 or more")
    models = select_models(args.model, args.models_file)
    date = parse_date(args.date)
    if args.parallel is not None and args.parallel < 1:
        raise UsageError("--parallel: must be 1 or more")
    parallel = min(args.parallel or default_parallel(models, args.models_file), len(models))
    print_warnings(warnings)  # only once the run will happen: a usage error stays one line
    print(
        f"eval-pipeline: KB {kb.kb_version} ({kb.content_hash[:12]}), date {date}, models {', '.join(models)}"
    )
    if not scope.is_full:
        return _adhoc(args, kb, banks, scope, models, date, parallel)

    from eval_pipeline.defs.execution import project_instance
    from eval_pipeline.defs.resources import RunScopeResource
    from eval_pipeline.location import location_paths
    from eval_pipeline.providers.object_store import output_path

    # Reports and asset values go where the code location sends them (an object store's URI
    # included), unless --results-dir says otherwise: one place for the UI's runs and the CLI's.
    paths = location_paths()
    results = str(args.results_dir) if args.results_dir is not None else paths.results_root
    gates = RunScopeResource(
        fail_under=args.fail_under,
        max_errored=args.max_errored,
        # One progress bar per terminal: models running at once would draw over each other.
        show_progress=sys.stderr.isatty() and parallel == 1,
    )
    inputs = evaluation_inputs(args, kb, banks, models, date, gates, results, paths)
    with project_instance() as instance:  # disposed when done: tests run several in one process
        if stands(args, inputs, instance, output_path(results)):
            return _report(models, date, output_path(results), args, scope, [])
        # Only an evaluation needs the whole code location: a rerun that stands has answered.
        from eval_pipeline.definitions import build_resources
        from eval_pipeline.defs.execution import run_all
        from eval_pipeline.defs.resources import InputsResource, ProvidersResource, StorageResource
        from eval_pipeline.defs.up_to_date import FINGERPRINT_TAG
        from eval_pipeline.orchestration.run_monitor import end_orphaned_runs

        for line in end_orphaned_runs(instance):  # a killed run's slots would stall this one
            print(f"  {line}")

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
        outcomes = run_all(
            date,
            models,
            resources,
            instance,
            lambda stage: print(f"  running {stage} …", flush=True),
            parallel=parallel,
            on_model_done=lambda o: print(f"  {'failed' if o.failures else 'finished'} model {o.name}"),
            tags={FINGERPRINT_TAG: inputs.fingerprint()},
        )
    errors = [f"{o.name}: {f}" for o in outcomes for f in o.failures]
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    return _report(models, date, output_path(results), args, scope, errors)


def _adhoc(
    args: argparse.Namespace,
    kb: KnowledgeBase,
    banks: Banks,
    scope: Scope,
    models: list[str],
    date: str,
    parallel: int,
) -> int:
    """A narrowed run is an ad-hoc check: straight through the core and the models' pipelines,
    no Dagster run, no partition and no gate touched, results in a folder named for the scope
    (never a diff baseline). Up to `parallel` models at once, on threads: no Dagster here, and
    the pipelines wait on providers or in onnxruntime, both outside the GIL."""
    from concurrent.futures import ThreadPoolExecutor

    from eval_pipeline.core.calibration.files import calibration_cost
    from eval_pipeline.location import location_paths
    from eval_pipeline.providers.models import load_models

    results_dir = local_results_dir(args) / SCOPED_DIR / scope.label
    print(f"  narrowed run ({scope.label}): ad-hoc check, not a baseline; results under {results_dir}")
    configs = load_models(args.models_file)
    cost = calibration_cost(location_paths().calibration_dir, date)
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="model") as pool:
        runs = [
            pool.submit(_adhoc_model, args, kb, banks, scope, configs[m], date, cost, results_dir)
            for m in models
        ]
        for run in runs:
            run.result()  # the first model's exception, if any, as a sequential run would raise it
    return _report(models, date, results_dir, args, scope, [])


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
) -> None:
    from eval_pipeline.core.report.build import build_document
    from eval_pipeline.providers.factory import rerank_mode, run_semantic
    from eval_pipeline.providers.system_target import run_system
    from eval_pipeline.providers.target import retrieval_items

    model = cfg.key
    tests = scope.select(Mechanism.SEMANTIC, banks.semantic_tests) if scope.runs(Mechanism.SEMANTIC) else []
    boosts = banks.rules.boosts_by_entity() if banks.rules else {}
    items = retrieval_items(tests, cfg.trials)
    _say(f"  running model {model} ({len(items)} semantic retrievals) …")
    prepared: list[PrepareReport] = []
    retrievals = (
        run_semantic(
            cfg,
            kb.entities,
            items,
            boosts,
            args.cache_dir,
            args.cache,
            batch=args.batch,
            on_prepared=prepared.append,
        )
        if items
        else []
    )
    cache_note = next((p.prompt_cache.note for p in prepared if p.prompt_cache is not None), None)
    if cache_note is not None:
        _say(f"  {cache_note}")
    system_outputs = run_system(cfg, banks, scope)
    doc = build_document(
        kb=kb,
        banks=banks,
        scope=scope,
        date=date,
        model=model,
        system_config=cfg.model_dump(mode="json"),
        pass_threshold=DEFAULT_PASS_THRESHOLD,
        retrievals=retrievals,
        calibration_cost_usd=calibration_cost_usd,
        generated_at=now_utc(),
        rerank_mode=rerank_mode(cfg, args.batch),
        prompt_cache=cache_note,
        implementations=cfg.implementations,
        system_outputs=system_outputs,
    )
    run_dir = results_dir / model / date
    atomic_write_text(run_dir / RESULTS_FILE, doc.model_dump_json(indent=2))
    atomic_write_text(run_dir / REPORT_FILE, render_markdown(doc))
    _say(f"  finished model {model}")


def _report(
    models: list[str],
    date: str,
    results_dir: Path | UPath,
    args: argparse.Namespace,
    scope: Scope,
    errors: list[str],
) -> int:
    """Each model's summary and gate; the exit code is the worst of them (3 > 1 > 0)."""
    code = EXIT_ERROR if errors else EXIT_OK
    for model in models:
        run_dir = results_dir / model / date
        if not (run_dir / RESULTS_FILE).is_file():
            code = EXIT_ERROR
            print(f"{model} @ {date}: no results were written (see the errors above)", file=sys.stderr)
            continue
        doc = read_document(run_dir / RESULTS_FILE)
        diff_file = run_dir / REGRESSION_DIFF_FILE
        if scope.is_full and diff_file.is_file():
            for skipped in RegressionDiff.model_validate_json(diff_file.read_text()).passed_over:
                print(f"warning: passed over as a baseline: {skipped}", file=sys.stderr)
        print(console_summary(doc))
        print(f"  report: {run_dir / REPORT_FILE}\n  results: {run_dir / RESULTS_FILE}")
        # The same decision `release_gate` wrote, re-derived so that a narrowed run gets one too.
        gate = gate_decision(doc, args.fail_under, args.max_errored, scope.label)
        if not gate.passed:
            print(f"  gate {gate.status.value}: {'; '.join(gate.reasons)}")
        code = max(code, EXIT_FOR_GATE[gate.status])
    return code
