"""The one route from what the systems did to a run's document and its verdict: every evaluation
ends in `conclude`, a narrowed run through `evaluate` in one pass, the Dagster graph from its
assets (`aggregate_scope`) with the stored re-evaluations merged in. Nothing here does I/O: the
retrievals and the team's system's outputs come from the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from eval_pipeline.core.code_version import code_version
from eval_pipeline.core.dates import end_of_day
from eval_pipeline.core.expectations.resolution import ExpectationConflict, ResolvedExpectation, resolve
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.external_ids import recorded_original_ids
from eval_pipeline.core.inputs.identity import evaluation_identity
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks, history_hash
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.report.reading import Reading, reading_of
from eval_pipeline.core.scoring.aggregate import Aggregate, aggregate
from eval_pipeline.core.scoring.evaluation import MechanismOutput, Scope, score_semantic
from eval_pipeline.core.scoring.implementations import Implementations, score_system
from eval_pipeline.core.scoring.registry import DETERMINISTIC, SEMANTIC, BankResults
from eval_pipeline.core.scoring.results import AnyResult, SemanticResult
from eval_pipeline.core.scoring.run_document import Provenance, RunDocument, group_document
from eval_pipeline.core.scoring.trials import TrialResults, by_test
from eval_pipeline.core.verdicts.run_gate import GateDecision, Gates, gate_decision

if TYPE_CHECKING:  # only an evaluation re-evaluated after its run loads them
    from eval_pipeline.core.scoring.reevaluation import StoredReevaluation

ADHOC_SNAPSHOT = "current files (ad-hoc check, not snapshotted)"


@dataclass(frozen=True)
class RunSetup:
    """What one model's evaluation on one date is about, apart from what its systems did."""

    kb: KnowledgeBase
    banks: Banks
    date: str
    model: str
    system_config: dict[str, Any]
    implementations: Implementations
    pass_threshold: int
    generated_at: datetime
    calibration_cost_usd: float = 0.0
    inputs_snapshot: str = ADHOC_SNAPSHOT
    rerank_mode: Literal["online", "batch"] = "online"
    prompt_cache: str | None = None

    def provenance(self, scope: Scope, history: str) -> Provenance:
        """The provenance of a run of `scope`; `history` is the expectation history's hash."""
        return Provenance(
            generated_at=self.generated_at,
            code_version=code_version(),
            date=self.date,
            model=self.model,
            system_config=self.system_config,
            kb_version=self.kb.kb_version,
            kb_hash=self.kb.content_hash,
            bank_hashes=self.banks.file_hashes,
            history_hash=history,
            inputs_snapshot=self.inputs_snapshot,
            pass_threshold=self.pass_threshold,
            scope={
                "banks": sorted(m.value for m in scope.banks),
                "test_ids": sorted(scope.test_ids),
                "topic": scope.topic,
            },
            calibration_cost_usd=self.calibration_cost_usd,
            rerank_mode=self.rerank_mode,
            prompt_cache=self.prompt_cache,
            identity=evaluation_identity(self.kb, self.banks, history, self.implementations),
            original_ids=recorded_original_ids(self.kb.entities, self.banks.semantic_tests),
        )


@dataclass(frozen=True)
class Observed:
    """What the systems under test did: the model's semantic retrievals (every trial), and the
    outputs of the team's system for the banks the model assigns to it."""

    retrievals: Sequence[SemanticRetrieval] = ()
    system_outputs: Sequence[MechanismOutput] = ()


@dataclass(frozen=True)
class ScoredBanks:
    """Every scored test per bank (the results the model is judged on), and the expectation
    conflicts met on the way."""

    results: BankResults
    conflicts: Sequence[ExpectationConflict] = ()


@dataclass(frozen=True)
class Evaluation:
    """A run's document and the verdict on it: written side by side (results.json, gate.json).
    `reading`: the document as every report made from memory reads it (grouped once)."""

    reading: Reading
    gate: GateDecision

    @property
    def document(self) -> RunDocument:
        return self.reading.document


def score_scope(setup: RunSetup, observed: Observed, scope: Scope) -> ScoredBanks:
    """Score the scope's tests on `setup.date` (expectations as of its end); the banks the model
    gives to the team's system are scored from `observed.system_outputs`."""
    kb, banks = setup.kb, setup.banks
    resolved = resolve(banks.semantic_tests, banks.history, as_of=end_of_day(setup.date))
    results: dict[Mechanism, Sequence[AnyResult]] = {
        Mechanism.SEMANTIC: score_semantic(banks.semantic_tests, resolved, observed.retrievals)
    }
    for d in DETERMINISTIC:
        tests = d.tests(banks)
        results[d.mechanism] = d.score(tests, d.reference(kb, banks, scope.select(d.mechanism, tests)))
    system = score_system(banks, setup.implementations, observed.system_outputs)
    conflicts = [r.conflict for r in resolved.values() if r.conflict is not None]
    return ScoredBanks(system.judged(results), conflicts)


def aggregate_scope(
    scored: ScoredBanks,
    scope: Scope,
    threshold: int,
    implementations: Implementations,
    semantic_tests: Sequence[TrialResults[SemanticResult]] | None = None,
) -> Aggregate:
    """Bank scores, combined score and health over the banks the scope ran; `semantic_tests`:
    the semantic results grouped by test, when the caller has done it."""
    ran = {m: rows for m, rows in scored.results.items() if scope.runs(m)}
    return aggregate(ran, threshold, implementations, semantic_tests)


def assemble_document(provenance: Provenance, agg: Aggregate, scored: ScoredBanks) -> RunDocument:
    """Every test of the banks that ran, in full, with provenance and the derived metrics."""
    ids = provenance.original_ids
    if ids is not None:  # only the entities the document names: what its reports show
        semantic = SEMANTIC.rows(scored.results)
        named = {e for r in semantic for e in r.expectations.entity_ids()}
        named |= {c.entity_id for r in semantic for c in r.candidates}
        named |= {s.entity_id for r in semantic for s in r.selections}
        provenance = provenance.model_copy(update={"original_ids": ids.naming(named)})
    banks = {m.value: list(rows) for m, rows in scored.results.items() if m in agg.banks}
    return RunDocument.model_validate(
        {"provenance": provenance, "aggregate": agg, **banks, "expectation_conflicts": list(scored.conflicts)}
    ).with_derived()


def verdict(document: RunDocument, scope: Scope, gates: Gates) -> GateDecision:
    """The run gate's decision on `document`, recording the scope it covered."""
    return gate_decision(document, gates.fail_under, gates.max_errored, scope.label)


@dataclass(frozen=True)
class Reevaluations:
    """Tests evaluated again after the run (errored ones retried, regressions re-tried), merged
    into its document in the order they were made, against the expectations it was scored on."""

    stored: Sequence[StoredReevaluation]
    resolved: Mapping[str, ResolvedExpectation]


def conclude(
    setup: RunSetup,
    provenance: Provenance,
    scored: ScoredBanks,
    scope: Scope,
    gates: Gates,
    aggregated: Aggregate | None = None,
    reevaluations: Reevaluations | None = None,
) -> Evaluation:
    """Scored banks to the run's document and its verdict: `aggregated` when the caller has the
    aggregate already (the graph's `scored_aggregate`), re-evaluations merged in before the gate.
    The semantic results are grouped by test once, for the aggregate and every report."""
    semantic = by_test(SEMANTIC.rows(scored.results), setup.pass_threshold)
    agg = aggregated or aggregate_scope(scored, scope, setup.pass_threshold, setup.implementations, semantic)
    document = assemble_document(provenance, agg, scored)
    if reevaluations is not None and reevaluations.stored:
        from eval_pipeline.core.scoring.reevaluate import reevaluate_all

        document = reevaluate_all(document, setup.banks, reevaluations.resolved, reevaluations.stored)
        reading = reading_of(document, derived_here=True)
    else:
        grouped = group_document(document, semantic if Mechanism.SEMANTIC in agg.banks else None)
        reading = Reading(document, grouped, derived_here=True)
    return Evaluation(reading, verdict(document, scope, gates))


def evaluate(setup: RunSetup, observed: Observed, scope: Scope, gates: Gates) -> Evaluation:
    """One model's evaluation of `scope` in one pass: scored, aggregated, documented, judged."""
    provenance = setup.provenance(scope, history_hash(setup.banks.history))
    return conclude(setup, provenance, score_scope(setup, observed, scope), scope, gates)
