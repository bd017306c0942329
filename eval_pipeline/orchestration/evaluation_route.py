"""One evaluation as the command line asks for it (`EvaluationRequest`, built once from the
flags) and its one entry point, `evaluate(request)`: a full run through the Dagster graph (then
the noise re-trials), a retry of errored tests, or a narrowed ad-hoc check through the core's
route, which imports no Dagster (tests/test_import_sets.py)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.core.dates import now_utc
from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD
from eval_pipeline.core.verdicts.run_gate import Gates

if TYPE_CHECKING:
    from dagster import DagsterInstance
    from upath import UPath

    from eval_pipeline.core.inputs.kb import KnowledgeBase
    from eval_pipeline.core.inputs.loading import Banks
    from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
    from eval_pipeline.core.report.conclusion import Evaluation
    from eval_pipeline.core.scoring.evaluation import Scope
    from eval_pipeline.core.verdicts.project_gates import ProjectGates
    from eval_pipeline.location import LocationPaths
    from eval_pipeline.orchestration.standing import Standing
    from eval_pipeline.providers.cache import CacheMode
    from eval_pipeline.providers.models import ModelConfig
    from eval_pipeline.providers.target import OnDone, PrepareReport, RetrievalItem


@dataclass(frozen=True)
class EvaluationRequest:
    """One evaluation as the command asked for it: inputs, scope, models (the models file read
    once), gates, location and how the models are called."""

    kb: KnowledgeBase
    banks: Banks
    scope: Scope
    configs: Mapping[str, ModelConfig]  # the models to run, in the order asked
    date: str
    gates: ProjectGates  # the project's, with the command's flags in their place
    location: LocationPaths  # resolved once by the command: its flags in the code location's place
    cache_mode: CacheMode = "use"
    batch: bool = False
    parallel: int = 1
    retry_errored: bool = False
    force: bool = False  # evaluate even where a stored evaluation stands
    calibration_cost_usd: float = 0.0  # what calibrations cost on the date, reported apart

    @property
    def models(self) -> list[str]:
        return list(self.configs)

    @property
    def run_gates(self) -> Gates:
        return Gates(fail_under=self.gates.fail_under, max_errored=self.gates.max_errored)

    def retrieve(
        self,
        cfg: ModelConfig,
        items: Sequence[RetrievalItem],
        on_done: OnDone | None = None,
        on_prepared: Callable[[PrepareReport], None] | None = None,
    ) -> list[SemanticRetrieval]:
        """`items` through the model's pipeline, with this request's cache and batching."""
        from eval_pipeline.providers.factory import run_semantic

        boosts = self.banks.rules.boosts_by_entity() if self.banks.rules else {}
        return run_semantic(
            cfg,
            self.kb.entities,
            items,
            boosts,
            self.location.cache_dir,
            self.cache_mode,
            on_done=on_done,
            batch=self.batch,
            on_prepared=on_prepared,
        )


@dataclass(frozen=True)
class Outcome:
    """Where the evaluations are, the errors, and a narrowed run's evaluations (in memory)."""

    results: Path | UPath
    errors: list[str] = field(default_factory=list)
    evaluated: Mapping[str, Evaluation] | None = None


def evaluate(request: EvaluationRequest, before_dagster: Callable[[], None] = lambda: None) -> Outcome:
    """The request's evaluation by its route. A full run's models whose stored evaluation stands
    answer from it (orchestration/standing.py); `before_dagster` is called once the others are
    to be evaluated through the graph."""
    from eval_pipeline.providers.object_store import output_location

    if not request.scope.is_full:
        return _narrowed(request)
    from eval_pipeline.orchestration.standing import standing_of

    standing = standing_of(request)
    # Decided first from what was recorded when it last stood: no Dagster, no code location loaded.
    pending = request.models if request.retry_errored else standing.as_recorded()
    errors = []
    if pending:
        before_dagster()
        errors = _through_the_graph(request, standing, pending)
    return Outcome(output_location(request.location.results_root), errors)


_SAY = threading.Lock()


@contextlib.contextmanager
def progress_terminal(wanted: bool) -> Iterator[int | None]:
    """A duplicate of stderr for the progress bar while stderr is a terminal, else None: opened
    before Dagster takes the process's output (inside a step fds 1 and 2 go to the compute log)."""
    if not (wanted and sys.stderr.isatty()):
        yield None
        return
    fd = os.dup(sys.stderr.fileno())
    try:
        yield fd
    finally:
        os.close(fd)


def _say(line: str) -> None:
    """One whole line, even when models on other threads print too."""
    with _SAY:
        print(line, flush=True)


def _narrowed(request: EvaluationRequest) -> Outcome:
    """An ad-hoc check: no Dagster run and no partition touched, results and gate decision in a
    folder named for the scope (never a baseline). Up to `parallel` models at once, on threads:
    the pipelines wait on providers or in onnxruntime, both outside the GIL."""
    from concurrent.futures import ThreadPoolExecutor

    from eval_pipeline.core.scoring.run_document import SCOPED_DIR

    results = request.location.results_dir / SCOPED_DIR / request.scope.label
    print(f"  narrowed run ({request.scope.label}): ad-hoc check, not a baseline; results under {results}")
    with (
        progress_terminal(request.parallel == 1) as progress_fd,
        ThreadPoolExecutor(max_workers=request.parallel, thread_name_prefix="model") as pool,
    ):
        runs = [
            pool.submit(_narrowed_model, request, cfg, results, progress_fd)
            for cfg in request.configs.values()
        ]
        # The first model's exception, if any, as a sequential run would raise it; what each
        # model wrote is reported from memory, not read back and validated again.
        evaluated = {m: run.result() for m, run in zip(request.configs, runs, strict=True)}
    return Outcome(results, evaluated=evaluated)


def _narrowed_model(
    request: EvaluationRequest, cfg: ModelConfig, results: Path, progress_fd: int | None
) -> Evaluation:
    from eval_pipeline.core.inputs.banks import Mechanism
    from eval_pipeline.core.report.conclusion import Observed, RunSetup
    from eval_pipeline.core.report.conclusion import evaluate as conclude_observed
    from eval_pipeline.providers.evaluation_files import write_evaluation
    from eval_pipeline.providers.factory import rerank_mode, system_outputs
    from eval_pipeline.providers.target import retrieval_items, semantic_bar

    kb, banks, scope, date = request.kb, request.banks, request.scope, request.date
    tests = scope.select(Mechanism.SEMANTIC, banks.semantic_tests) if scope.runs(Mechanism.SEMANTIC) else []
    items = retrieval_items(tests, cfg.trials)
    _say(f"  running model {cfg.key} ({len(items)} semantic retrievals) …")
    prepared: list[PrepareReport] = []
    with semantic_bar(progress_fd if items else None, cfg.key, len(items)) as on_done:
        retrievals = request.retrieve(cfg, items, on_done, prepared.append) if items else []
    cache_note = next((p.prompt_cache.note for p in prepared if p.prompt_cache is not None), None)
    if cache_note is not None:
        _say(f"  {cache_note}")
    setup = RunSetup(
        kb=kb,
        banks=banks,
        date=date,
        model=cfg.key,
        system_config=cfg.model_dump(mode="json"),
        implementations=cfg.implementations,
        pass_threshold=DEFAULT_PASS_THRESHOLD,
        generated_at=now_utc(),
        calibration_cost_usd=request.calibration_cost_usd,
        rerank_mode=rerank_mode(cfg, request.batch),
        prompt_cache=cache_note,
    )
    observed = Observed(retrievals, system_outputs(cfg, banks, scope))
    evaluation = conclude_observed(setup, observed, scope, request.run_gates)
    write_evaluation(results / cfg.key / date, evaluation)
    _say(f"  finished model {cfg.key}")
    return evaluation


def _through_the_graph(request: EvaluationRequest, standing: Standing, pending: list[str]) -> list[str]:
    """The models that do not stand evaluated (or retried) on the project's instance; the errors."""
    from eval_pipeline.orchestration.execution import project_instance

    errors: list[str] = []
    # One progress bar per terminal: models running at once would draw over each other.
    with project_instance() as instance, progress_terminal(request.parallel == 1) as progress_fd:
        models = pending if request.retry_errored else standing.with_instance(instance, pending)
        if models:
            errors = _evaluate_date(request, models, instance, standing.tags(models), progress_fd)
        stood = standing.settle(instance)
    standing.record(stood)  # after the instance is closed: closing may write its files
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    return errors


def _evaluate_date(
    request: EvaluationRequest,
    models: list[str],
    instance: DagsterInstance,
    tags: Mapping[str, str],
    progress_fd: int | None,
) -> list[str]:
    from eval_pipeline.definitions import build_resources
    from eval_pipeline.defs.resources import ProvidersResource, RunScopeResource
    from eval_pipeline.orchestration.execution import run_all
    from eval_pipeline.orchestration.reevaluation_runs import StoredDate, confirm_noise, retry_errored
    from eval_pipeline.runtime.run_monitor import end_orphaned_runs

    for line in end_orphaned_runs(instance):  # a killed run's slots would stall this one
        print(f"  {line}")
    where = request.location
    resources = build_resources(
        paths=where,
        providers=ProvidersResource.from_environment(
            models_file=str(where.models_file),
            cache_dir=str(where.cache_dir),
            cache_mode=request.cache_mode,
            rerank_batch=request.batch,
        ),
        scope=RunScopeResource(
            fail_under=request.gates.fail_under,
            max_errored=request.gates.max_errored,
            progress_fd=progress_fd,
        ),
    )
    again = StoredDate(request, instance, resources, tags)
    if request.retry_errored:
        return retry_errored(again, models)
    outcomes = run_all(
        request.date,
        models,
        resources,
        instance,
        lambda stage: print(f"  running {stage} …", flush=True),
        parallel=request.parallel,
        on_model_done=lambda o: print(f"  {'failed' if o.failures else 'finished'} model {o.name}"),
        tags=tags,
    )
    errors = [f"{o.name}: {f}" for o in outcomes for f in o.failures]
    return errors or confirm_noise(again, models)
