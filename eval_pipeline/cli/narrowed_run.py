"""A narrowed run (`run --test/--topic/--banks`): an ad-hoc check through the core's one route and
the models' pipelines, without Dagster; its results and gate go to a folder named for its scope."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.cli.arguments import results_dir as local_results_dir
from eval_pipeline.cli.run_verdict import report_runs
from eval_pipeline.cli.terminal import progress_terminal
from eval_pipeline.core.dates import now_utc

if TYPE_CHECKING:
    from upath import UPath

    from eval_pipeline.core.inputs.kb import KnowledgeBase
    from eval_pipeline.core.inputs.loading import Banks
    from eval_pipeline.core.report.conclusion import Evaluation
    from eval_pipeline.core.scoring.evaluation import Scope
    from eval_pipeline.providers.models import ModelConfig
    from eval_pipeline.providers.target import PrepareReport


def narrowed_run(
    args: argparse.Namespace,
    kb: KnowledgeBase,
    banks: Banks,
    scope: Scope,
    configs: dict[str, ModelConfig],
    date: str,
    parallel: int,
    locations: list[tuple[str, Path | UPath]],
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

    models = list(configs)
    results_dir = local_results_dir(args) / SCOPED_DIR / scope.label
    print(f"  narrowed run ({scope.label}): ad-hoc check, not a baseline; results under {results_dir}")
    cost = calibration_cost(location_paths().calibration_dir, date)
    record_project(kb, locations)
    # The collector is paused here: `run` pauses it until an evaluation through Dagster
    # (cli/run.py), and an evaluation keeps nearly everything it builds to the end.
    with (
        progress_terminal(parallel == 1) as progress_fd,
        ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="model") as pool,
    ):
        runs = [
            pool.submit(
                _evaluate_model, args, kb, banks, scope, configs[m], date, cost, results_dir, progress_fd
            )
            for m in models
        ]
        # The first model's exception, if any, as a sequential run would raise it; what each
        # model wrote is reported from memory, not read back and validated again.
        evaluated = {m: run.result() for m, run in zip(models, runs, strict=True)}
    code = report_runs(
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
    # Freed before `run` resumes the collector: its first pass would walk every result of the run
    # only to find them all still referenced here.
    del evaluated, runs
    return code


_SAY = threading.Lock()


def _say(line: str) -> None:
    """One whole line, even when models on other threads print too."""
    with _SAY:
        print(line, flush=True)


def _evaluate_model(
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
    from eval_pipeline.core.report.conclusion import Observed, RunSetup, evaluate
    from eval_pipeline.core.report.markdown import render_markdown
    from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD
    from eval_pipeline.core.scoring.run_document import GATE_FILE, REPORT_FILE, RESULTS_FILE
    from eval_pipeline.core.verdicts.run_gate import Gates
    from eval_pipeline.providers.factory import rerank_mode, run_semantic, system_outputs
    from eval_pipeline.providers.progress_bar import semantic_bar
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
    observed = Observed(retrievals, system_outputs(cfg, banks, scope))
    gates = Gates(fail_under=args.fail_under, max_errored=args.max_errored)
    evaluation = evaluate(setup, observed, scope, gates)
    run_dir = results_dir / model / date
    # The gate decision beside the results, as the graph's release gate writes it: `_report`
    # reads the stored decision for every kind of run, so no verdict is derived twice.
    atomic_write_text(run_dir / RESULTS_FILE, evaluation.document.model_dump_json(indent=2))
    atomic_write_text(run_dir / REPORT_FILE, render_markdown(evaluation.document, reading=evaluation.reading))
    atomic_write_text(run_dir / GATE_FILE, evaluation.gate.model_dump_json(indent=2))
    _say(f"  finished model {model}")
    return evaluation
