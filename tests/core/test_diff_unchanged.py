"""A test whose two sides are the same in everything a diff compares takes the diff's short way
(no views, no lines, one side judged): it must say exactly what the full comparison says."""

from __future__ import annotations

from typing import TypeVar

import pytest

from eval_pipeline.core.diff import compare
from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.explain import VOLATILE, same_trial
from eval_pipeline.core.diff.model import DeltaKind
from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.mechanisms.retrieval import Candidate, Usage
from eval_pipeline.core.scoring.results import AnyResult, ResultBase, SemanticResult
from eval_pipeline.core.scoring.run_document import RunDocument
from tests.run_docs import always, doc, pattern, sem, state

GRADED = Expectations(relevant={"a": 3, "b": 1})
REASONS = {"a": "cos 0.91", "b": "cos 0.40"}
R = TypeVar("R", bound=ResultBase)
MOVED = ("S-ORDER", "S-REASON", "S-COSINE", "S-SCORED")


def _semantic() -> list[SemanticResult]:
    return [
        *(
            sem("S-TRIALS", ["a", "b"], reasons=REASONS, candidates=["a", "b", "c"], trial=t)
            for t in range(3)
        ),
        sem("S-GRADED", ["b", "c"], exp=GRADED, candidates=["b", "c", "a"]),
        sem("S-ERR", [], error="reranker: HTTP 503 after 5 attempts"),
        *(sem(t, ["a", "b"], reasons=REASONS) for t in MOVED),
    ]


def _volatile(r: R) -> R:
    """The same trial, run again: other tokens, cost and latency."""
    if not isinstance(r, SemanticResult):
        return r.model_copy(deep=True)
    return r.model_copy(
        deep=True, update={"usage": Usage(input_tokens=7), "cost_usd": 0.25, "latency_ms": 812.0}
    )


def _sides() -> tuple[RunDocument, RunDocument]:
    base = doc(_semantic(), [state("ST-1", ["h1"])], [pattern("P-1", matched=False)], [always("A-1", ["p"])])
    # Moved where a field-by-field check could be too coarse: a reason's words, a cosine, the
    # score alone (the same answers scored by other rules).
    order = sem("S-ORDER", ["b", "a"], reasons=REASONS)
    reason = sem("S-REASON", ["a", "b"], reasons={**REASONS, "b": "another reason"})
    collapsed = sem("S-COSINE", ["a", "b"], reasons=REASONS)
    collapsed = collapsed.model_copy(update={"candidates": [Candidate("a", 0.6), Candidate("b", 0.89)]})
    scored = sem("S-SCORED", ["a", "b"], reasons=REASONS)
    scored = scored.model_copy(update={"outcome": order.outcome})
    head = doc(
        [*(_volatile(r) for r in base.semantic if r.test_id not in MOVED), order, reason, collapsed, scored],
        [_volatile(r) for r in base.state],
        [_volatile(r) for r in base.pattern],
        [_volatile(r) for r in base.always],
        date="2026-11-20",
    )
    return base, head


def test_the_short_way_says_what_the_full_comparison_says(monkeypatch: pytest.MonkeyPatch) -> None:
    base, head = _sides()
    same: list[bool] = []

    def spy(b: AnyResult, h: AnyResult) -> bool:
        same.append(same_trial(b, h))
        return same[-1]

    monkeypatch.setattr(compare, "same_trial", spy)
    short = diff_documents(base, head)
    assert same.count(True) == 8 and same.count(False) == len(MOVED)
    monkeypatch.setattr(compare, "same_trial", lambda b, h: False)
    full = diff_documents(base, head)
    assert short.model_dump_json() == full.model_dump_json()
    kinds = {d.test_id: d.kind for d in short.deltas}
    assert [kinds.pop(t) for t in MOVED] == [
        DeltaKind.CHANGED,
        DeltaKind.CHANGED,
        DeltaKind.CONTENT_COLLAPSE,
        DeltaKind.CHANGED,
    ]
    assert set(kinds.values()) == {DeltaKind.UNCHANGED}


def test_every_field_but_the_volatile_ones_is_compared() -> None:
    base, _ = _sides()
    rows: list[AnyResult] = [base.semantic[0], base.state[0], base.pattern[0], base.always[0]]
    assert set(SemanticResult.model_fields) >= VOLATILE
    for row in rows:
        for name in type(row).model_fields:
            other = row.model_copy(update={name: object()})
            assert same_trial(row, other) is (name in VOLATILE), f"{type(row).__name__}.{name}"
    assert not same_trial(base.semantic[0], base.semantic[1])  # another trial
    assert not same_trial(base.state[0], base.always[0])
