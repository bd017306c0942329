"""A run document in one pass: what the asset graph computes stage by stage (expectation
snapshot, deterministic mechanisms, scoring, aggregate), for an ad-hoc check that needs no
Dagster. The semantic retrievals come from the caller (the model's pipeline), and so do the
outputs of the team's system for the banks the model assigns to it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from eval_pipeline.core.code_version import code_version
from eval_pipeline.core.dates import end_of_day
from eval_pipeline.core.expectations.resolution import ExpectationConflict, resolve
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.identity import evaluation_identity
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks, history_hash
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.report.run_document import Provenance, RunDocument
from eval_pipeline.core.scoring.aggregate import Aggregate, aggregate
from eval_pipeline.core.scoring.evaluation import (
    MechanismOutput,
    Scope,
    always_outputs,
    pattern_outputs,
    score_always,
    score_pattern,
    score_semantic,
    score_state,
    state_outputs,
)
from eval_pipeline.core.scoring.implementations import Implementations, score_system
from eval_pipeline.core.scoring.results import AlwaysResult, PatternResult, SemanticResult, StateResult


def scope_record(scope: Scope) -> dict[str, Any]:
    """How a run's scope is recorded in its provenance."""
    return {
        "banks": sorted(m.value for m in scope.banks),
        "test_ids": sorted(scope.test_ids),
        "topic": scope.topic,
    }


def build_document(
    *,
    kb: KnowledgeBase,
    banks: Banks,
    scope: Scope,
    date: str,
    model: str,
    system_config: dict[str, Any],
    pass_threshold: int,
    retrievals: Sequence[SemanticRetrieval],
    calibration_cost_usd: float,
    generated_at: datetime,
    implementations: Implementations,
    system_outputs: Sequence[MechanismOutput] = (),
    rerank_mode: Literal["online", "batch"] = "online",
    prompt_cache: str | None = None,
) -> RunDocument:
    """Score the scope's tests of `banks` on `date` (expectations as of its end); the banks
    `implementations` gives to the team's system are scored from `system_outputs`."""
    resolved = resolve(banks.semantic_tests, banks.history, as_of=end_of_day(date))
    semantic = score_semantic(banks.semantic_tests, resolved, retrievals)
    state = score_state(
        banks.state_tests, state_outputs(kb, scope.select(Mechanism.STATE, banks.state_tests))
    )
    pattern_tests = scope.select(Mechanism.PATTERN, banks.pattern_tests)
    matches = pattern_outputs(banks.rules, pattern_tests) if banks.rules is not None else []
    pattern = score_pattern(banks.pattern_tests, matches)
    always = score_always(
        banks.always_tests, always_outputs(kb, scope.select(Mechanism.ALWAYS, banks.always_tests))
    )
    state, pattern, always = score_system(banks, implementations, system_outputs).judged(
        state, pattern, always
    )
    agg = aggregate(
        semantic=semantic if scope.runs(Mechanism.SEMANTIC) else None,
        state=state if scope.runs(Mechanism.STATE) else None,
        pattern=pattern if scope.runs(Mechanism.PATTERN) else None,
        always=always if scope.runs(Mechanism.ALWAYS) else None,
        threshold=pass_threshold,
        implementations=implementations,
    )
    return assemble_document(
        Provenance(
            generated_at=generated_at,
            code_version=code_version(),
            date=date,
            model=model,
            system_config=system_config,
            kb_version=kb.kb_version,
            kb_hash=kb.content_hash,
            bank_hashes=banks.file_hashes,
            history_hash=history_hash(banks.history),
            inputs_snapshot="current files (ad-hoc check, not snapshotted)",
            pass_threshold=pass_threshold,
            scope=scope_record(scope),
            calibration_cost_usd=calibration_cost_usd,
            rerank_mode=rerank_mode,
            prompt_cache=prompt_cache,
            identity=evaluation_identity(kb, banks, history_hash(banks.history), implementations),
        ),
        agg,
        semantic=semantic,
        state=state,
        pattern=pattern,
        always=always,
        conflicts=[r.conflict for r in resolved.values() if r.conflict is not None],
    )


def assemble_document(
    provenance: Provenance,
    agg: Aggregate,
    *,
    semantic: Sequence[SemanticResult],
    state: Sequence[StateResult],
    pattern: Sequence[PatternResult],
    always: Sequence[AlwaysResult],
    conflicts: Sequence[ExpectationConflict],
) -> RunDocument:
    """Every test of the banks that ran, in full, with provenance and the derived metrics (the
    graph's `run_report` and the ad-hoc path both end here)."""
    ran = set(agg.banks)
    return RunDocument(
        provenance=provenance,
        aggregate=agg,
        semantic=list(semantic) if Mechanism.SEMANTIC in ran else [],
        state=list(state) if Mechanism.STATE in ran else [],
        pattern=list(pattern) if Mechanism.PATTERN in ran else [],
        always=list(always) if Mechanism.ALWAYS in ran else [],
        expectation_conflicts=list(conflicts),
    ).with_derived()
