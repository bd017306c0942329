"""Evaluate chosen tests again into a stored evaluation: the retrievals are made here, kept
beside the run (reevaluations.json), and the report, gate and regression diff assets rebuild
with them merged in (core/scoring/reevaluate.py). Used by `run --retry-errored` (the errored
semantic trials and team-system answers) and, after a full `run` of a model that is not
reproducible (declared, or trials that saw the same candidates chose differently), to re-try its
semantic regressions (core/diff/noise.py) before the gate is printed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg
from upath import UPath

from eval_pipeline.core.dates import end_of_day, now_utc
from eval_pipeline.core.diff.baseline import RegressionDiff
from eval_pipeline.core.diff.noise import (
    DEFAULT_RETRIALS,
    confirm_regressions,
    disagreeing_tests,
    next_trials,
    regressed_against,
)
from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.expectations.resolution import resolve
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.evaluation import MechanismOutput, Scope
from eval_pipeline.core.scoring.reevaluate import errored_answers, errored_tests, retry_of
from eval_pipeline.core.scoring.reevaluation import Decision, StoredReevaluation, StoredReevaluations
from eval_pipeline.core.scoring.run_document import (
    REEVALUATIONS_FILE,
    REGRESSION_DIFF_FILE,
    RESULTS_FILE,
    RunDocument,
    read_document,
)
from eval_pipeline.defs.automation import comparison_job, reevaluation_job
from eval_pipeline.defs.partitions import model_date_key
from eval_pipeline.orchestration.stages import evaluation_definitions, run_stage
from eval_pipeline.providers.models import ModelConfig
from eval_pipeline.providers.object_store import output_path, write_text
from eval_pipeline.providers.system_target import run_system
from eval_pipeline.providers.target import retrieval_items
from eval_pipeline.runtime.instance_queries import evaluation_id

if TYPE_CHECKING:  # the route imports this module
    from eval_pipeline.orchestration.evaluation_route import EvaluationRequest


@dataclass(frozen=True)
class StoredDate:
    """The request's date as stored, and what it takes to call its models again."""

    request: EvaluationRequest
    instance: dg.DagsterInstance
    resources: dict[str, object]
    # The command's run tags: a merge made with nothing changed leaves an evaluation that stands.
    tags: Mapping[str, str]

    @property
    def date(self) -> str:
        return self.request.date

    @property
    def results(self) -> UPath:
        return output_path(self.request.location.results_root)

    def document(self, model: str, date: str | None = None) -> RunDocument | None:
        path = self.results / model / (date or self.date) / RESULTS_FILE
        return read_document(path) if path.is_file() else None

    def retrieve(self, cfg: ModelConfig, trials: Mapping[str, Sequence[int]]) -> list[SemanticRetrieval]:
        return self.request.retrieve(cfg, retrieval_items(self.request.banks.semantic_tests, trials))

    def answer(self, cfg: ModelConfig, tests: Mapping[Mechanism, Sequence[str]]) -> list[MechanismOutput]:
        """The team's system asked again for these state, pattern and always tests."""
        ids = frozenset(tid for chosen in tests.values() for tid in chosen)
        return run_system(cfg, self.request.banks, Scope(test_ids=ids)) if ids else []

    def merge(self, model: str, stored: StoredReevaluation) -> list[str]:
        """Keep `stored` beside the run and rebuild the model's report, gate and diff with it."""
        key = model_date_key(model, self.date)
        current = evaluation_id(self.instance, str(key))
        if current is None:
            raise BadInput(f"--retry-errored: {model} has no evaluation on {self.date} in this instance")
        path = self.results / model / self.date / REEVALUATIONS_FILE
        earlier = StoredReevaluations.model_validate_json(path.read_bytes()) if path.exists() else None
        kept = earlier.for_evaluation(current) if earlier is not None else []
        write_text(
            path,
            StoredReevaluations(evaluation_id=current, reevaluations=[*kept, stored]).model_dump_json(
                indent=2
            ),
        )
        defs = evaluation_definitions(self.resources)
        outcome = run_stage(model, reevaluation_job.name, key, defs, self.instance, self.tags)
        return [f"{model}: {f}" for f in outcome.failures]

    def compare(self) -> list[str]:
        defs = evaluation_definitions(self.resources)
        outcome = run_stage("comparison", comparison_job.name, self.date, defs, self.instance)
        return [f"comparison: {f}" for f in outcome.failures]


def _cost(stored: StoredReevaluation) -> str:
    r = stored.record
    answers = f", {len(stored.system_outputs)} system answers" if stored.system_outputs else ""
    return f"{len(stored.retrievals)} retrievals{answers}, {r.api_calls} API calls, ${r.cost_usd:.4f}"


def _listed(tests: Mapping[Mechanism, Sequence[str]]) -> str:
    """`state: ST-1, ST-2; pattern: P-3` (at most five ids shown per bank)."""
    return "; ".join(
        f"{m.value}: {', '.join(ids[:5])}{', …' if len(ids) > 5 else ''}" for m, ids in tests.items()
    )


def _retryable(ev: StoredDate, model: str) -> tuple[RunDocument, ModelConfig]:
    """The model's stored evaluation of the date, and its configuration, when a retry can merge
    into it: the banks must still come from the implementations that evaluated them."""
    doc = ev.document(model)
    if doc is None:
        raise BadInput(f"--retry-errored: no evaluation of {model} on {ev.date} to retry (run it first)")
    cfg = ev.request.configs[model]
    made_by = doc.aggregate.implementations
    now = {m: cfg.implementation(m) for m in made_by}
    if now != made_by:
        changed = ", ".join(f"{m.value} {made_by[m]} → {now[m]}" for m in made_by if now[m] != made_by[m])
        raise BadInput(
            f"--retry-errored: {model} on {ev.date} was evaluated with other implementations "
            f"({changed}): evaluate again with --force"
        )
    return doc, cfg


def retry_errored(ev: StoredDate, models: Sequence[str]) -> list[str]:
    """Each model's errored tests (semantic trials, the team's system's answers) evaluated again
    and merged into its evaluation."""
    retryable = {model: _retryable(ev, model) for model in models}  # every model, before any call
    errors: list[str] = []
    merged = False
    for model, (doc, cfg) in retryable.items():
        builtin = errored_answers(doc, system=False)
        if builtin:
            # Built-in mechanisms call no service, so an outage cannot be their cause.
            print(
                f"  {model}: not retried, errored in the built-in mechanisms (no service is called, so "
                f"retrying gives the same result): {_listed(builtin)}; fix the cause and evaluate again "
                "with --force"
            )
        semantic, answers = errored_tests(doc), errored_answers(doc, system=True)
        if not semantic and not answers:
            if not builtin:
                print(f"  {model}: no errored test to retry")
            continue
        retrievals = ev.retrieve(cfg, semantic) if semantic else []
        stored = retry_of(now_utc(), retrievals, ev.answer(cfg, answers))
        still = sum(r.status == "errored" for r in stored.retrievals)
        still += sum(o.error is not None for o in stored.system_outputs)
        banks = ", ".join(f"{m.value} {len(ids)}" for m, ids in stored.record.banks.items())
        print(
            f"  {model}: retried {len(stored.record.test_ids)} errored test(s) ({banks}; {_cost(stored)}); "
            f"{still} still errored"
        )
        errors += ev.merge(model, stored)
        merged = True
    return errors + (ev.compare() if merged and not errors else [])


def _baseline(ev: StoredDate, model: str) -> RunDocument | None:
    path = ev.results / model / ev.date / REGRESSION_DIFF_FILE
    if not path.is_file():
        return None
    found = RegressionDiff.model_validate_json(path.read_text()).baseline_date
    return ev.document(model, found) if found is not None else None


def confirm_noise(ev: StoredDate, models: Sequence[str], retrials: int = DEFAULT_RETRIALS) -> list[str]:
    """Each not reproducible model's semantic regressions re-tried and decided (core/diff/noise.py)."""
    errors: list[str] = []
    merged = False
    for model in models:
        head, cfg = ev.document(model), ev.request.configs[model]
        base = _baseline(ev, model) if head is not None else None
        if head is None or base is None:
            continue
        found = disagreeing_tests([base, head])
        if cfg.reproducible and not found:
            continue
        regressed = regressed_against(base, head)
        if not regressed:
            continue
        why = (
            "declared not reproducible" if not cfg.reproducible else f"trials disagree on {', '.join(found)}"
        )
        trials = next_trials(head, retrials)
        retrievals = ev.retrieve(cfg, {tid: trials for tid in regressed})
        banks = ev.request.banks
        resolved = resolve(banks.semantic_tests, banks.history, as_of=end_of_day(ev.date))
        stored = confirm_regressions(base, head, banks.semantic_tests, resolved, retrievals, now_utc())
        record = stored.record
        print(
            f"  {model} ({why}): {len(regressed)} semantic regression(s) against {base.provenance.date} "
            f"re-tried {retrials} times ({_cost(stored)}): {len(record.decided(Decision.CONFIRMED))} "
            f"confirmed, {len(record.decided(Decision.DISMISSED))} dismissed as noise"
        )
        errors += ev.merge(model, stored)
        merged = True
    return errors + (ev.compare() if merged and not errors else [])
