"""Evaluate chosen tests again into a stored evaluation, through the asset graph: the retrievals
are made here, kept beside the run (reevaluations.json), and the model's report, gate and
regression diff are rebuilt by their assets, which merge them in (core/scoring/reevaluate.py).

- `run --retry-errored`: only the errored semantic trials of the model × date evaluation.
- After a full `run` of a model that is not reproducible (declared `reproducible: false`, or
  found so: trials that saw the same candidates chose differently), its semantic regressions
  against the previous evaluation are re-tried (core/diff/noise.py) before the gate is printed.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.reevaluate import errored_tests, retry_of
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
from eval_pipeline.defs.reports import evaluation_id
from eval_pipeline.orchestration.stages import evaluation_definitions, run_stage
from eval_pipeline.providers.factory import run_semantic
from eval_pipeline.providers.models import ModelConfig, load_models
from eval_pipeline.providers.object_store import write_text
from eval_pipeline.providers.target import RetrievalItem


@dataclass(frozen=True)
class Evaluation:
    """One date's evaluations and what it takes to call their models again."""

    args: argparse.Namespace
    kb: KnowledgeBase
    banks: Banks
    date: str
    results: UPath
    instance: dg.DagsterInstance
    resources: dict[str, object]

    def model(self, key: str) -> ModelConfig:
        return load_models(self.args.models_file)[key]

    def document(self, model: str, date: str | None = None) -> RunDocument | None:
        path = self.results / model / (date or self.date) / RESULTS_FILE
        return read_document(path) if path.is_file() else None

    def retrieve(self, cfg: ModelConfig, trials: Mapping[str, Sequence[int]]) -> list[SemanticRetrieval]:
        tests = {t.test_id: t for t in self.banks.semantic_tests}
        items = [
            RetrievalItem(tid, tests[tid].prompt, k, tests[tid].user_type, tests[tid].user_state)
            for tid, ks in trials.items()
            if tid in tests
            for k in ks
        ]
        boosts = self.banks.rules.boosts_by_entity() if self.banks.rules else {}
        args = self.args
        return run_semantic(
            cfg, self.kb.entities, items, boosts, args.cache_dir, args.cache, batch=args.batch
        )

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
        outcome = run_stage(
            model, reevaluation_job.name, key, evaluation_definitions(self.resources), self.instance
        )
        return [f"{model}: {f}" for f in outcome.failures]

    def compare(self) -> list[str]:
        defs = evaluation_definitions(self.resources)
        outcome = run_stage("comparison", comparison_job.name, self.date, defs, self.instance)
        return [f"comparison: {f}" for f in outcome.failures]


def _cost(stored: StoredReevaluation) -> str:
    r = stored.record
    return f"{len(stored.retrievals)} retrievals, {r.api_calls} API calls, ${r.cost_usd:.4f}"


def retry_errored(ev: Evaluation, models: Sequence[str]) -> list[str]:
    """Each model's errored semantic trials called again and merged into its evaluation."""
    errors: list[str] = []
    for model in models:
        doc = ev.document(model)
        if doc is None:
            raise BadInput(f"--retry-errored: no evaluation of {model} on {ev.date} to retry (run it first)")
        others = [r.test_id for r in (*doc.state, *doc.pattern, *doc.always) if r.score is None]
        if others:
            # Only semantic answers are stored to re-score; the team's other answers come whole.
            print(
                f"  {model}: {len(others)} errored state/pattern/always test(s) are not retried "
                f"({', '.join(others[:5])}{', …' if len(others) > 5 else ''}): evaluate again with --force"
            )
        errored = errored_tests(doc)
        if not errored:
            print(f"  {model}: no errored semantic test to retry")
            continue
        stored = retry_of(now_utc(), ev.retrieve(ev.model(model), errored))
        still = sum(r.status == "errored" for r in stored.retrievals)
        print(f"  {model}: retried {len(errored)} errored test(s) ({_cost(stored)}); {still} still errored")
        errors += ev.merge(model, stored)
    return errors + (ev.compare() if not errors else [])


def _baseline(ev: Evaluation, model: str) -> RunDocument | None:
    path = ev.results / model / ev.date / REGRESSION_DIFF_FILE
    if not path.is_file():
        return None
    found = RegressionDiff.model_validate_json(path.read_text()).baseline_date
    return ev.document(model, found) if found is not None else None


def confirm_noise(ev: Evaluation, models: Sequence[str], retrials: int = DEFAULT_RETRIALS) -> list[str]:
    """Each not reproducible model's semantic regressions re-tried and decided (core/diff/noise.py)."""
    errors: list[str] = []
    merged = False
    for model in models:
        head, cfg = ev.document(model), ev.model(model)
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
        history = ev.banks.history
        resolved = resolve(ev.banks.semantic_tests, history, as_of=end_of_day(ev.date))
        stored = confirm_regressions(base, head, ev.banks.semantic_tests, resolved, retrievals, now_utc())
        record = stored.record
        print(
            f"  {model} ({why}): {len(regressed)} semantic regression(s) against {base.provenance.date} "
            f"re-tried {retrials} times ({_cost(stored)}): {len(record.decided(Decision.CONFIRMED))} "
            f"confirmed, {len(record.decided(Decision.DISMISSED))} dismissed as noise"
        )
        errors += ev.merge(model, stored)
        merged = True
    return errors + (ev.compare() if merged and not errors else [])
