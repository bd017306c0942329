"""Small constructors for hand-built results and run documents (diff, metrics, trials, CLI tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from eval_pipeline.core.expectations.resolution import ResolvedExpectation
from eval_pipeline.core.inputs.banks import (
    AlwaysTest,
    Expectations,
    Mechanism,
    PatternTest,
    PatternType,
    RankCheck,
    SemanticTest,
    StateTest,
)
from eval_pipeline.core.mechanisms.pattern import PatternMatch
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, SemanticRetrieval
from eval_pipeline.core.scoring.aggregate import aggregate
from eval_pipeline.core.scoring.registry import (
    evaluate_always_test,
    evaluate_pattern_test,
    evaluate_state_test,
)
from eval_pipeline.core.scoring.results import AlwaysResult, PatternResult, SemanticResult, StateResult
from eval_pipeline.core.scoring.run_document import Provenance, RunDocument
from eval_pipeline.core.scoring.semantic import evaluate_semantic_test

# Primary a, secondary b, a must rank above b, x must not appear.
EXP = Expectations(
    expected_primary=["a"],
    expected_secondary=["b"],
    not_expected=["x"],
    rank_check=[RankCheck(higher="a", lower="b")],
)


def sem(
    test_id: str,
    selected: Sequence[str],
    *,
    exp: Expectations = EXP,
    source: str = "original",
    candidates: Sequence[str] | None = None,
    reasons: Mapping[str, str] | None = None,
    trial: int = 0,
    error: str | None = None,
    category: str = "one_liner",
) -> SemanticResult:
    """A scored (or errored) semantic trial; candidates default to the selection itself."""
    test = SemanticTest(
        test_id=test_id, category=category, topics=["t"], prompt="p", **exp.model_dump(mode="json")
    )
    resolved = ResolvedExpectation(test_id=test_id, expectations=exp, source=source)
    pool = list(selected) if candidates is None else list(candidates)
    retrieval = SemanticRetrieval(
        test_id=test_id,
        model="m",
        trial=trial,
        status="errored" if error else "ok",
        candidates=[Candidate(entity_id=e, score=0.9 - i / 100) for i, e in enumerate(pool)]
        if not error
        else [],
        selections=[
            Selection(entity_id=e, rank=i, reason=(reasons or {}).get(e)) for i, e in enumerate(selected, 1)
        ]
        if not error
        else [],
        error=error,
    )
    return evaluate_semantic_test(test, resolved, retrieval)


def state(test_id: str, triggered: Sequence[str]) -> StateResult:
    test = StateTest(
        test_id=test_id, user_state={"days": 3}, expected_handlers=["h1"], not_expected_handlers=["h2"]
    )
    return evaluate_state_test(test, triggered)


def _crisis(test: PatternTest, pattern: str, matched: bool) -> PatternResult:
    match = PatternMatch(kind="crisis", entities=["crisis"], pattern=pattern, matched_text=pattern)
    return evaluate_pattern_test(test, [match] if matched else [])


def pattern(test_id: str, matched: bool) -> PatternResult:
    """A critical crisis test: the crisis entity must fire."""
    test = PatternTest(
        test_id=test_id,
        prompt="i want to hurt myself",
        expected_matches=["crisis"],
        pattern_type=PatternType.CRISIS,
        is_critical=True,
    )
    return _crisis(test, "hurt", matched)


def negative(test_id: str, fires: bool) -> PatternResult:
    """A critical negative test: an idiom on which the crisis entity must not fire."""
    test = PatternTest(
        test_id=test_id,
        prompt="this commute is killing me",
        not_expected_matches=["crisis"],
        pattern_type=PatternType.NEGATIVE,
        is_critical=True,
    )
    return _crisis(test, "killing me", fires)


def always(test_id: str, loaded: Sequence[str]) -> AlwaysResult:
    return evaluate_always_test(
        AlwaysTest(test_id=test_id, user_type="PARENT", expected_always=["p"]), loaded
    )


def doc(
    semantic: Sequence[SemanticResult] = (),
    state_results: Sequence[StateResult] = (),
    pattern_results: Sequence[PatternResult] = (),
    always_results: Sequence[AlwaysResult] = (),
    *,
    model: str = "m",
    date: str = "2026-11-19",
    kb_hash: str = "k1" * 32,
    bank_hash: str = "b1",
    reranker: str = "cosine",
    schema_version: str = "1.0",
) -> RunDocument:
    return RunDocument(
        provenance=Provenance(
            schema_version=schema_version,
            generated_at=datetime(2026, 11, 20, 6, tzinfo=UTC),
            date=date,
            model=model,
            system_config={"reranker": {"kind": reranker}},
            kb_version="kb-1",
            kb_hash=kb_hash,
            bank_hashes={"semantic/parent_test_bank.json": bank_hash, "state/state_handler_tests.json": "s1"},
            history_hash="h",
            pass_threshold=60,
        ),
        aggregate=aggregate(
            {
                Mechanism.SEMANTIC: semantic,
                Mechanism.STATE: state_results,
                Mechanism.PATTERN: pattern_results,
                Mechanism.ALWAYS: always_results,
            }
        ),
        semantic=list(semantic),
        state=list(state_results),
        pattern=list(pattern_results),
        always=list(always_results),
    )
