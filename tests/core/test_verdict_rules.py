"""The verdict rules: errored banks, unrounded health, the gate, and the diff gate's policy."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.model import DeltaKind
from eval_pipeline.core.diff.statistics import holm, paired_comparison
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.report.diff_text import render_diff_text
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.aggregate import Health, aggregate, health_status
from eval_pipeline.core.verdicts.regression_gate import diff_gate
from eval_pipeline.core.verdicts.run_gate import GateStatus, gate_decision
from tests.run_docs import always, doc, negative, pattern, sem, state

GOOD_SEMANTIC = [sem(f"S-{i}", ["a", "b"]) for i in range(4)]
OUTAGE = [sem(f"S-{i}", [], error="reranker: HTTP 500 after 5 attempts") for i in range(4)]


def test_an_outage_never_scores_better_than_a_working_system() -> None:
    # Working deterministic banks, every semantic test errored: once this read GOOD 100.
    agg = aggregate(
        {
            Mechanism.SEMANTIC: OUTAGE,
            Mechanism.STATE: [state("ST", ["h1"])],
            Mechanism.ALWAYS: [always("A", ["p"])],
        }
    )
    assert agg.health is Health.UNKNOWN and agg.combined_score is None
    assert agg.unevaluable_banks == [Mechanism.SEMANTIC]
    assert agg.weights[Mechanism.SEMANTIC] == 0.7059  # the bank keeps its weight
    assert agg.unevaluable_reasons() == ["semantic: 0 of 4 tests scored (4 errored)"]
    gate = gate_decision(doc(OUTAGE, [state("ST", ["h1"])]), fail_under=80)
    assert gate.status is GateStatus.UNEVALUABLE and not gate.passed
    assert gate.reasons[0] == "could not evaluate semantic: 0 of 4 tests scored (4 errored)"


def test_under_half_scored_is_unevaluable_half_or_more_is_judged_but_gated() -> None:
    three_of_four = aggregate({Mechanism.SEMANTIC: [*GOOD_SEMANTIC[:3], OUTAGE[3]]})
    assert three_of_four.unevaluable_banks == [] and three_of_four.health is Health.GOOD  # never EXCELLENT
    gate = gate_decision(doc([*GOOD_SEMANTIC[:3], OUTAGE[3]]), fail_under=None)
    assert gate.status is GateStatus.FAILED
    assert gate.reasons == ["1 errored test(s), more than --max-errored 0"]
    assert gate_decision(doc([*GOOD_SEMANTIC[:3], OUTAGE[3]]), None, max_errored=1).passed
    one_of_four = aggregate({Mechanism.SEMANTIC: [GOOD_SEMANTIC[0], *OUTAGE[1:]]})
    assert one_of_four.health is Health.UNKNOWN


def test_a_known_critical_failure_stays_critical_when_another_bank_is_unknown() -> None:
    agg = aggregate({Mechanism.SEMANTIC: OUTAGE, Mechanism.PATTERN: [pattern("P", matched=False)]})
    assert agg.health is Health.CRITICAL and agg.combined_score is None
    gate = gate_decision(doc(OUTAGE, pattern_results=[pattern("P", matched=False)]), None)
    assert gate.status is GateStatus.UNEVALUABLE and "1 critical failure(s)" in gate.reasons


def test_an_empty_bank_has_no_weight_and_is_not_unknown() -> None:
    agg = aggregate({Mechanism.SEMANTIC: GOOD_SEMANTIC, Mechanism.STATE: []})
    assert agg.weights == {Mechanism.SEMANTIC: 1.0} and agg.health is Health.EXCELLENT


def test_health_and_fail_under_judge_the_unrounded_score() -> None:
    assert health_status(89.98, 0, 0, 0) is Health.GOOD
    assert health_status(90.0, 0, 0, 0) is Health.EXCELLENT
    assert fmt_score(89.98) == "89.9" and fmt_score(90.0) == "90.0" and fmt_score(None) == "—"
    agg = aggregate(
        {Mechanism.SEMANTIC: [*GOOD_SEMANTIC[:2], sem("S-9", ["a"])]}
    )  # 100, 100, 90: kept unrounded
    assert agg.combined_score == pytest.approx(96.6667, abs=1e-4) and agg.combined_score != 96.7
    gate = gate_decision(doc(GOOD_SEMANTIC), fail_under=100.0001)
    assert not gate.passed and gate.reasons == ["combined score 100.0 is under 100.0001"]


def test_a_crisis_false_alarm_at_score_80_is_a_critical_regression_named_first() -> None:
    base = doc(GOOD_SEMANTIC, pattern_results=[negative("P-NEG", fires=False), pattern("P-C", True)])
    head = doc(
        GOOD_SEMANTIC,
        pattern_results=[negative("P-NEG", fires=True), pattern("P-C", True)],
        date="2026-11-20",
    )
    diff = diff_documents(base, head)
    (delta,) = diff.of_kind(DeltaKind.CRITICAL)
    assert delta.test_id == "P-NEG" and delta.head and delta.head.score == 80  # still "passing"
    gate = diff_gate(diff)
    assert not gate.passed and gate.reasons == ["1 new critical failure(s): P-NEG"]
    text = render_diff_text(diff, gate)
    lines = text.splitlines()
    assert lines[1:4] == [
        "health: EXCELLENT → CRITICAL",
        "gate: FAILED",
        "  - 1 new critical failure(s): P-NEG",
    ]
    assert lines[4] == "== critical (1) =="
    # The semantic statistics say nothing about the crisis test: no "within noise" for it.
    assert "P-NEG" not in diff.statistics.verdict and diff.statistics.tests == 4


def test_deterministic_regressions_fail_while_flaky_semantic_ones_are_noise() -> None:
    trials = [sem("S-F", ["a", "b"], trial=0), sem("S-F", ["a", "b"], trial=1), sem("S-F", ["c"], trial=2)]
    base = doc([*GOOD_SEMANTIC, *trials], [state("ST", ["h1"])])
    flipped = [sem("S-F", ["c"], trial=0), sem("S-F", ["a", "b"], trial=1), sem("S-F", ["c"], trial=2)]
    head = doc([*GOOD_SEMANTIC, *flipped], [state("ST", ["h1"])], date="2026-11-20")
    diff = diff_documents(base, head)
    assert [d.test_id for d in diff.of_kind(DeltaKind.REGRESSED)] == ["S-F"]  # mean 66.7 → 33.3
    gate = diff_gate(diff)
    assert gate.passed and gate.notes[0].startswith("1 semantic regression(s) flaky across trials")
    strict = diff_gate(diff, strict=True)
    assert not strict.passed and strict.reasons == ["1 semantic regression(s) (--strict): S-F"]

    broken_state = doc([*GOOD_SEMANTIC, *flipped], [state("ST", [])], date="2026-11-20")
    gate = diff_gate(diff_documents(base, broken_state))
    assert gate.reasons == ["1 deterministic regression(s): ST"]


def test_a_single_trial_semantic_regression_is_stable_and_fails() -> None:
    base = doc(GOOD_SEMANTIC)
    head = doc([*GOOD_SEMANTIC[:3], sem("S-3", ["c"])], date="2026-11-20")
    gate = diff_gate(diff_documents(base, head))
    assert gate.reasons == ["1 stable semantic regression(s): S-3"]


def test_an_unevaluable_head_makes_the_diff_unevaluable() -> None:
    diff = diff_documents(doc(GOOD_SEMANTIC), doc(OUTAGE, date="2026-11-20"))
    assert diff.head_unevaluable == ["semantic: 0 of 4 tests scored (4 errored)"]
    gate = diff_gate(diff)
    assert gate.status is GateStatus.UNEVALUABLE
    assert gate.reasons[1] == "4 test(s) errored that passed before: S-0, S-1, S-2, S-3"


def test_reorders_inside_the_top_15_and_numbers_in_reasons_are_cosmetic() -> None:
    base = doc([sem("S-1", ["a", "b"], candidates=["a", "b", "c", "d"], reasons={"a": "cos 0.91"})])
    head = doc(
        [sem("S-1", ["a", "b"], candidates=["a", "b", "d", "c"], reasons={"a": "cos 0.88"})],
        date="2026-11-20",
    )
    (delta,) = diff_documents(base, head).deltas
    assert delta.kind is DeltaKind.COSMETIC and delta.causes == [] and delta.reasoning_drift == []
    assert delta.cosmetic_changes == [
        "top 15 reordered (2 places changed)",
        "reason numbers a: 'cos 0.91' → 'cos 0.88'",
    ]
    worded = doc(
        [sem("S-1", ["a", "b"], candidates=["a", "b", "c", "d"], reasons={"a": "best"})], date="2026-11-20"
    )
    (drift,) = diff_documents(doc([sem("S-1", ["a", "b"], reasons={"a": "close"})]), worded).deltas
    assert drift.kind is DeltaKind.CHANGED and drift.reasoning_drift[0].after == "best"


def test_a_primary_kept_selected_while_its_similarity_collapsed_is_flagged() -> None:
    base = doc([sem("S-1", ["a", "b"])])
    gutted = sem("S-1", ["a", "b"])
    candidates = [replace(c, score=0.2) if c.entity_id == "a" else c for c in gutted.candidates]
    head = doc([gutted.model_copy(update={"candidates": candidates})], date="2026-11-20")
    (delta,) = diff_documents(base, head).deltas
    assert delta.kind is DeltaKind.CONTENT_COLLAPSE
    assert delta.alerts == ["similarity collapse: primary a still selected, cosine 0.90 → 0.20"]
    assert "ALERT similarity collapse" in render_diff_text(diff_documents(base, head))


def test_statistics_cluster_by_topic_report_mde_and_holm() -> None:
    base = [100.0] * 8
    head = [90.0, 90.0, 90.0, 90.0, 100.0, 100.0, 100.0, 100.0]
    alone = paired_comparison(base, head)
    clustered = paired_comparison(base, head, clusters=["t1"] * 4 + ["t2"] * 4)
    assert alone.clusters == 8 and clustered.clusters == 2
    # Four tests of one topic moving together are one piece of evidence, not four.
    assert clustered.p_value > alone.p_value and clustered.standard_error > alone.standard_error
    assert alone.minimum_detectable_effect == pytest.approx(2.8 * alone.standard_error, abs=0.05)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
