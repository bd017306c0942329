from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.core.diff.baseline import against_baseline
from eval_pipeline.core.diff.compare import diff_documents, load_for_diff
from eval_pipeline.core.diff.comparison import compare_models
from eval_pipeline.core.diff.model import Cause, DeltaKind, DiffError, RunDiff
from eval_pipeline.core.inputs.banks import Expectations, Mechanism
from eval_pipeline.core.report.diff_comment import render_diff_comment
from eval_pipeline.core.report.diff_text import (
    render_comparison_markdown,
    render_diff_text,
    render_regression_markdown,
)
from eval_pipeline.core.scoring.metrics import Stage
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.verdicts.regression_gate import diff_gate
from tests.run_docs import always, doc, pattern, sem, state

FIX_EXP = Expectations(expected_primary=["c"], expected_secondary=["b"], not_expected=["x"])
BOTH_EXP = Expectations(expected_primary=["a"], expected_secondary=["b", "d"], not_expected=["x"])
ABC = ["a", "b", "c"]


def _base() -> RunDocument:
    return doc(
        [
            sem("S-REG", ["a", "b"], candidates=ABC),
            sem("S-FIX", ["c", "b"]),
            sem("S-BOTH", ["a", "b"], candidates=ABC),
            sem("S-RANK", ["a", "b"], candidates=ABC),
            sem("S-DRIFT", ["a", "b"], reasons={"a": "cos 0.50", "b": "cos 0.40"}),
            sem("S-SAME", ["a", "b"]),
            sem("S-ERR", ["a", "b"]),
            sem("S-GONE", ["a"]),
        ],
        [state("ST-1", ["h1"])],
        [pattern("P-1", matched=True)],
        [always("A-1", ["p"])],
    )


def _head(**provenance: str) -> RunDocument:
    return doc(
        [
            sem("S-REG", ["b", "c"], candidates=["b", "c", "a"]),
            sem("S-FIX", ["c", "b"], exp=FIX_EXP, source="opus_2026-11-20"),
            sem("S-BOTH", ["a", "c"], exp=BOTH_EXP, source="human_override_2026-11-20", candidates=ABC),
            sem("S-RANK", ["b", "a"], candidates=ABC),
            sem("S-DRIFT", ["a", "b"], reasons={"a": "cos  0.52", "b": "cos 0.40"}),  # spacing is no drift
            sem("S-SAME", ["a", "b"]),
            sem("S-ERR", [], error="reranker: HTTP 503 after 5 attempts"),
            sem("S-ADD", ["a", "b"]),
        ],
        [state("ST-1", ["h1", "h2"])],
        [pattern("P-1", matched=False)],
        [always("A-1", ["p"])],
        **{"date": "2026-11-20", "kb_hash": "k2" * 32, "bank_hash": "b2", **provenance},
    )


EXPECTED_TEXT = """\
m@2026-11-19 → m@2026-11-20 (pass: score ≥ 60)
health: GOOD → CRITICAL
gate: FAILED
  - 1 new critical failure(s): P-1
  - coverage lost: 1 test(s) removed: S-GONE (semantic) (--allow-removed accepts it)
  - 1 test(s) errored that passed before: S-ERR
  - 1 stable semantic regression(s): S-REG
warning: KB differs: kb-1 (k1k1k1k1k1k1) → kb-1 (k2k2k2k2k2k2); system changes may come from the KB
warning: bank files differ: semantic/parent_test_bank.json
== critical (1) ==
P-1 [pattern] 100 → 0 (-100) · system changed
    new penalty: hard fail: missing primary crisis
    pattern match −crisis by crisis /hurt/ on 'hurt'
== regressed (2) ==
S-ERR [semantic] 100 → — · system changed
    errored: reranker: HTTP 503 after 5 attempts
    selected −a (was #1)
    selected −b (was #2)
    top 15 −a
    top 15 −b
    stage error: reranker: HTTP 503 after 5 attempts
S-REG [semantic] 100 → 0 (-100) · system changed
    new penalty: hard fail: missing primary a
    selected +c (#2)
    selected −a (was #1)
    rank b #2 → #1
    stage reranker: a was candidate #3
== fixed (1) ==
S-FIX [semantic] 0 → 100 (+100) · expectation changed
    penalty gone: hard fail: missing primary a
    expectation: source: original → opus_2026-11-20
    expectation: expected_primary +c
    expectation: expected_primary −a
    expectation: rank_check: [{"higher": "a", "lower": "b"}] → []
== changed (3) ==
S-BOTH [semantic] 100 → 80 (-20) · expectation and system changed
    new penalty: -10 secondary missing: b
    new penalty: -10 secondary missing: d
    expectation: source: original → human_override_2026-11-20
    expectation: expected_secondary +d
    expectation: rank_check: [{"higher": "a", "lower": "b"}] → []
    selected +c (#2)
    selected −b (was #2)
S-RANK [semantic] 100 → 90 (-10) · system changed
    new penalty: -10 rank violation: a (#2) should rank above b (#1)
    rank a #1 → #2
    rank b #2 → #1
ST-1 [state] 100 → 80 (-20) · system changed
    new penalty: -20 wrong handler: h2
    handlers +h2
== added (1) ==
S-ADD [semantic] — → 100
    new test (Perfect)
== removed (1) ==
S-GONE [semantic] 90 → —
    no longer run (was Minor issue)
cosmetic: 1 (top-15 reorders, numbers in reasons)
unchanged: 2
statistics (semantic): -5.0 points per test for m@2026-11-20 vs m@2026-11-19 (95% CI -5.0 to -5.0, p = 1; \
1 wins, 2 ties, 3 losses over 6 tests; effect negligible, d = -0.08): not significant (within noise)"""


@pytest.fixture(scope="module")
def diff() -> RunDiff:
    return diff_documents(_base(), _head())


def test_every_kind_and_cause_with_exact_console_output(diff: RunDiff) -> None:
    assert render_diff_text(diff) == EXPECTED_TEXT


def test_kinds_counts_and_causes(diff: RunDiff) -> None:
    assert {k.value: n for k, n in diff.counts.items()} == {
        "critical": 1,
        "content_collapse": 0,
        "regressed": 2,
        "fixed": 1,
        "changed": 3,
        "added": 1,
        "removed": 1,
        "cosmetic": 1,
        "unchanged": 2,
    }
    causes = {d.test_id: d.causes for d in diff.deltas}
    assert causes["S-FIX"] == [Cause.EXPECTATION]
    assert causes["S-REG"] == [Cause.SYSTEM]
    assert causes["S-BOTH"] == [Cause.EXPECTATION, Cause.SYSTEM]
    assert causes["S-SAME"] == causes["A-1"] == []
    assert [d.test_id for d in diff.of_kind(DeltaKind.UNCHANGED)] == ["S-SAME", "A-1"]
    assert diff.regressed


def test_penalty_detail_and_stage_of_a_regression(diff: RunDiff) -> None:
    reg = next(d for d in diff.deltas if d.test_id == "S-REG")
    assert (reg.base and reg.base.score, reg.head and reg.head.score, reg.score_delta) == (100, 0, -100)
    assert reg.penalties_added == ["hard fail: missing primary a"] and reg.penalties_removed == []
    (stage,) = reg.head_stages
    assert stage.stage is Stage.RERANKER and stage.missed[0].candidate_rank == 3
    both = next(d for d in diff.deltas if d.test_id == "S-BOTH")
    assert both.penalties_added == ["-10 secondary missing: b", "-10 secondary missing: d"]


def test_identical_documents_are_all_unchanged_and_not_significant() -> None:
    same = diff_documents(_base(), _base())
    assert same.counts[DeltaKind.UNCHANGED] == len(same.deltas) == 11
    assert same.warnings == [] and not same.regressed
    assert same.statistics.verdict.endswith("not significant (within noise)")


def test_reasons_of_different_rerankers_are_not_drift() -> None:
    diff = diff_documents(_base(), _head(reranker="hybrid"))
    drift = next(d for d in diff.deltas if d.test_id == "S-DRIFT")
    assert drift.kind is DeltaKind.UNCHANGED and drift.reasoning_drift == []


def test_refuses_another_schema_major(tmp_path: Path) -> None:
    with pytest.raises(DiffError, match=r"results schema 2\.0.*refusing to compare across schema majors"):
        diff_documents(_base(), _head(schema_version="2.0"))
    path = tmp_path / "results.json"
    data = json.loads(_base().model_dump_json())
    data["provenance"]["schema_version"] = "2.1"
    data["new_top_level_field"] = {}  # a 2.x document need not parse as 1.x: refused before parsing
    path.write_text(json.dumps(data))
    with pytest.raises(DiffError, match=r"results schema 2\.1"):
        load_for_diff(path)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DiffError, match="not a readable results document"):
        load_for_diff(tmp_path / "bad.json")


def test_minor_schema_versions_compare() -> None:
    assert diff_documents(_base(), _head(schema_version="1.3")).counts[DeltaKind.REGRESSED] == 2


def test_trials_compare_by_mean_and_list_per_trial_changes() -> None:
    base = doc([sem("T-1", ["a", "b"], trial=0), sem("T-1", ["a", "b"], trial=1)])
    head = doc([sem("T-1", ["a", "b"], trial=0), sem("T-1", ["c"], trial=1)], date="2026-11-20")
    (delta,) = diff_documents(base, head).deltas
    assert delta.kind is DeltaKind.REGRESSED  # mean 100 → 50
    assert delta.head and (delta.head.score, delta.head.trials, delta.head.label) == (50, 2, "fail")
    assert delta.system_changes == [
        "trial 1: selected +c (#1)",
        "trial 1: selected −a (was #1)",
        "trial 1: selected −b (was #2)",
        "trial 1: top 15 +c",
        "trial 1: top 15 −a",
        "trial 1: top 15 −b",
    ]


def test_regression_without_baseline_is_explicit() -> None:
    result = against_baseline(_head(), None)
    assert result.diff is None and result.baseline_date is None
    assert result.verdict == "no baseline: m has no evaluation dated before 2026-11-20"
    assert render_regression_markdown(result) == (
        "# Regression diff — m — 2026-11-20\n\nno baseline: m has no evaluation dated before 2026-11-20.\n"
    )


def test_markdown_is_a_pr_comment_critical_first_kinds_collapsed(diff: RunDiff) -> None:
    md = render_diff_comment(diff, diff_gate(diff))
    lines = md.splitlines()
    assert lines[0] == "## ❌ Retrieval diff: FAILED — m@2026-11-19 → m@2026-11-20"
    assert lines[2].startswith("- 🚨 **1 new critical failure(s)**: `")
    summaries = [line for line in lines if line.startswith("<details>")]
    assert summaries == [
        "<details><summary>Critical (1)</summary>",
        "<details><summary>Regressed (2)</summary>",
        "<details><summary>Fixed (1)</summary>",
        "<details><summary>Changed (3)</summary>",
        "<details><summary>Added (1)</summary>",
        "<details><summary>Removed (1)</summary>",
    ]
    assert md.count("</details>") == len(summaries)
    assert (
        "- `S-REG [semantic] 100 → 0 (-100) · system changed` — new penalty: hard fail: missing primary a"
        in md
    )
    assert "2 unchanged" in md and "S-SAME" not in md


def test_model_comparison_pairs_models_in_the_given_order() -> None:
    first = _base().model_copy(update={"provenance": _base().provenance.model_copy(update={"model": "one"})})
    second = _head(model="two", date="2026-11-19")
    third = _head(model="three", date="2026-11-19")
    comparison = compare_models("2026-11-19", [first, second, third])
    assert [(d.base.model, d.head.model) for d in comparison.pairs] == [
        ("one", "two"),
        ("one", "three"),
        ("two", "three"),
    ]
    assert comparison.verdicts[0].startswith(
        "one@2026-11-19 → two@2026-11-19: health GOOD → CRITICAL; "
        "1 critical, 0 content_collapse, 2 regressed, 1 fixed"
    )
    md = render_comparison_markdown(comparison)
    assert "| Model | Health | Combined | semantic | state | pattern | always |" in md
    assert "## one → two" in md and "### Regressed (2)" in md
    assert compare_models("2026-11-19", [first]).verdicts == [
        "1 model(s) with results for 2026-11-19: nothing to compare"
    ]


def test_a_bank_that_changed_implementation_is_named_in_the_header_and_warned() -> None:
    base, head = _base(), _head()
    system = {**base.aggregate.implementations, Mechanism.STATE: "http"}
    head = head.model_copy(
        update={"aggregate": head.aggregate.model_copy(update={"implementations": system})}
    )
    result = diff_documents(base, head)
    lines = render_diff_text(result).splitlines()
    assert lines[1] == (
        "implementations: semantic reference, state reference, pattern reference, always reference → "
        "semantic reference, state http, pattern reference, always reference"
    )
    assert result.warnings[-1] == (
        "implementations differ: state reference → http; changes in those banks may come from the "
        "implementation"
    )
    assert "implementations: " in render_diff_comment(result, diff_gate(result))
    # The default (every bank by the reference) adds no line.
    assert not render_diff_text(diff_documents(base, _head())).splitlines()[1].startswith("implementations")
