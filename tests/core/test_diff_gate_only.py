"""A gate-only diff judges as the full diff does: the same deltas of the kinds a gate reads, the
same statistics, so the same verdict, strict or not, with removals allowed or not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eval_pipeline.core.diff.compare import GATED_KINDS, diff_documents
from eval_pipeline.core.diff.model import DeltaKind
from eval_pipeline.core.diff.noise import regressions_to_confirm
from eval_pipeline.core.scoring.results import SemanticResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.verdicts.regression_gate import counted_regressions, diff_gate
from tests.run_docs import always, doc, negative, pattern, sem, state


def _collapsed(test_id: str) -> SemanticResult:
    kept = sem(test_id, ["a", "b"])
    candidates = [replace(c, score=0.2) if c.entity_id == "a" else c for c in kept.candidates]
    return kept.model_copy(update={"candidates": candidates})


def _trials(test_id: str, *selections: list[str]) -> list[SemanticResult]:
    return [sem(test_id, s, trial=i, reasons={"a": f"cos 0.{i}"}) for i, s in enumerate(selections)]


def _pair(*, bank_removed: bool = False) -> tuple[RunDocument, RunDocument]:
    base = doc(
        [
            *_trials("S-STABLE", ["a", "b"], ["a", "b"], ["a", "b"]),
            *_trials("S-FLAKY", ["a", "b"], ["a", "b"], ["a", "b"]),
            *_trials("S-NOISE", ["a", "b"], ["b", "a"], ["a", "b"]),
            sem("S-COLLAPSE", ["a", "b"]),
            sem("S-ERR", ["a", "b"]),
            sem("S-FIX", ["b"]),
            sem("S-COSMETIC", ["a", "b"], candidates=["a", "b", "c"]),
            sem("S-SAME", ["a", "b"]),
            sem("S-GONE", ["a", "b"]),
        ],
        [state("ST-REG", ["h1"]), state("ST-SAME", ["h1"])],
        [pattern("P-CRIT", matched=True), negative("N-SAME", fires=False)],
        [always("A-GONE", ["p"])],
    )
    head = doc(
        [
            *_trials("S-STABLE", ["b"], ["b"], ["b"]),
            *_trials("S-FLAKY", ["b"], ["a", "b"], ["b"]),
            *_trials("S-NOISE", ["b", "a"], ["a", "b"], ["a", "b"]),
            _collapsed("S-COLLAPSE"),
            sem("S-ERR", [], error="reranker: HTTP 503 after 5 attempts"),
            sem("S-FIX", ["a", "b"]),
            sem("S-COSMETIC", ["a", "b"], candidates=["a", "c", "b"]),
            sem("S-SAME", ["a", "b"]),
            sem("S-ADD", ["a", "b"]),
        ],
        [state("ST-REG", []), state("ST-SAME", ["h1"])],
        [pattern("P-CRIT", matched=False), negative("N-SAME", fires=False)],
        [] if bank_removed else [always("A-GONE", ["p"])],
        date="2026-11-20",
    )
    return base, head


@pytest.mark.parametrize("bank_removed", [False, True])
def test_a_gate_only_diff_gives_the_full_diffs_verdict_at_every_setting(bank_removed: bool) -> None:
    base, head = _pair(bank_removed=bank_removed)
    full, gated = diff_documents(base, head), diff_documents(base, head, gate_only=True)
    # Every kind is present, so the filter has something to leave out and something to keep.
    assert {DeltaKind.FIXED, DeltaKind.CHANGED, DeltaKind.COSMETIC, DeltaKind.UNCHANGED} <= {
        d.kind for d in full.deltas
    }
    assert {d.kind for d in full.deltas} >= GATED_KINDS
    assert gated.deltas == [d for d in full.deltas if d.kind in GATED_KINDS]
    assert gated.statistics == full.statistics and gated.statistics.tests == 7
    assert gated.removed_banks == full.removed_banks == (["always"] if bank_removed else [])
    assert gated.regressed and gated.graded_statistics is None
    for strict in (False, True):
        for allow_removed in (False, True):
            gate = diff_gate(full, strict=strict, allow_removed=allow_removed)
            assert diff_gate(gated, strict=strict, allow_removed=allow_removed) == gate
        assert counted_regressions(gated, strict) == counted_regressions(full, strict)
    assert regressions_to_confirm(gated) == regressions_to_confirm(full) == ["S-FLAKY", "S-STABLE"]
    reasons = diff_gate(gated).reasons
    assert any("P-CRIT" in r for r in reasons) and any("S-COLLAPSE" in r for r in reasons)
    assert any("ST-REG" in r for r in reasons) and any("S-ERR" in r for r in reasons)
