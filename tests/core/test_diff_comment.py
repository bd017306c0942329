"""`diff --format markdown` is a PR comment that fits on one screen: at most 60 lines whatever
the size of the diff, a planted critical regression in its first 5 lines, details collapsed."""

from __future__ import annotations

import pytest

from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.model import RunDiff
from eval_pipeline.core.report.diff_comment import MAX_LINES, render_diff_comment
from eval_pipeline.core.verdicts.regression_gate import diff_gate
from tests.run_docs import always, doc, negative, sem, state


def _large(regressions: int, critical: bool) -> RunDiff:
    """`regressions` semantic and as many state tests regress, a fifth fixed, some added and
    removed, a bank lost; one critical negative test may fire where it did not."""
    n = regressions
    base = doc(
        [
            *(sem(f"S-{i:04}", ["a", "b"]) for i in range(n)),
            *(sem(f"F-{i:03}", ["b"]) for i in range(n // 5)),
        ],
        [*(state(f"ST-{i:04}", ["h1"]) for i in range(n)), state("ST-GONE", ["h1"])],
        [negative(f"P-NEG-{i}", False) for i in range(3)],
        [always("A-1", ["p"])],
    )
    head = doc(
        [
            *(sem(f"S-{i:04}", ["b"]) for i in range(n)),
            *(sem(f"F-{i:03}", ["a", "b"]) for i in range(n // 5)),
            *(sem(f"NEW-{i:03}", ["a", "b"]) for i in range(40)),
        ],
        [state(f"ST-{i:04}", []) for i in range(n)],
        [negative(f"P-NEG-{i}", critical and i == 1) for i in range(3)],
        date="2026-11-20",
    )
    return diff_documents(base, head)


@pytest.mark.parametrize("regressions", [1, 30, 400])
def test_at_most_60_lines_whatever_the_size_with_balanced_details(regressions: int) -> None:
    diff = _large(regressions, critical=True)
    md = render_diff_comment(diff, diff_gate(diff))
    lines = md.splitlines()
    assert len(lines) <= MAX_LINES, len(lines)
    assert md.count("<details>") == md.count("</details>") >= 4
    assert all(len(line) <= 300 for line in lines)
    # Every kind of change is named with its full count, even when its list is cut.
    assert f"<details><summary>Regressed ({2 * regressions})</summary>" in md
    assert "<details><summary>Removed (2)</summary>" in md  # ST-GONE and A-1


def test_a_planted_critical_regression_is_in_the_first_5_lines_of_a_huge_diff() -> None:
    diff = _large(400, critical=True)
    head = render_diff_comment(diff, diff_gate(diff)).splitlines()[:5]
    assert head[0].startswith("## ❌ Retrieval diff: FAILED")
    assert any("new critical failure" in line and "P-NEG-1 [pattern] 100 → 80" in line for line in head)
    # Coverage comes right after: the removed bank and test are named before any detail block.
    first = render_diff_comment(diff, diff_gate(diff)).split("<details>")[0]
    assert "coverage lost: bank always removed" in first and "ST-GONE" in first


def test_a_cut_list_says_how_many_more_and_where_to_see_them() -> None:
    diff = _large(400, critical=False)
    md = render_diff_comment(diff, diff_gate(diff))
    regressed = md.split("<details><summary>Regressed (800)</summary>")[1].split("</details>")[0]
    shown = [line for line in regressed.splitlines() if line.startswith("- `")]
    assert shown and regressed.rstrip().endswith(
        f"- … {800 - len(shown)} more: `eval-pipeline diff` lists every test"
    )
    assert "🚨" not in md


def test_a_passing_diff_is_short_and_says_so() -> None:
    same = doc([sem("S-1", ["a", "b"])])
    diff = diff_documents(same, doc([sem("S-1", ["a", "b"])], date="2026-11-20"))
    md = render_diff_comment(diff, diff_gate(diff))
    assert md.splitlines()[0] == "## ✅ Retrieval diff: PASSED — m@2026-11-19 → m@2026-11-20"
    assert "<details>" not in md and len(md.splitlines()) < 10
