"""Every failing test named, worst first, and what changed since the previous evaluation:
hand-built documents for the rules and the folding; both domains' data for the story of a KB
edit that stops a state handler firing and an always entity loading."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from eval_pipeline.core.diff.baseline import RegressionDiff, against_baseline
from eval_pipeline.core.inputs.banks import Expectations, Mechanism
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.report.conclusion import Observed, RunSetup, evaluate
from eval_pipeline.core.report.failures import ERRORED, PRIMARY_MISSING, failing_tests, failure_lines, fold
from eval_pipeline.core.report.markdown import render_markdown
from eval_pipeline.core.report.run_output import since_lines, since_markdown
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.verdicts.run_gate import Gates, GateStatus
from eval_pipeline.core.verdicts.since import regression_gate
from tests.conftest import REPO, TENANT
from tests.run_docs import always, doc, negative, pattern, sem, state

# a primary; b, c, d secondary; x, y must not appear: selecting a, x, y scores 100-30-40 = 30.
WIDE = Expectations(expected_primary=["a"], expected_secondary=["b", "c", "d"], not_expected=["x", "y"])


def _mixed() -> RunDocument:
    return doc(
        [
            sem("S-OK", ["a", "b"]),
            sem("S-LOW", ["a", "x", "y"], exp=WIDE),
            sem("S-HARD", ["b"]),
            sem("S-ERR", [], error="upstream timed out\nafter 3 retries | gave up"),
        ],
        [state("ST-BAD", []), state("ST-WRONG", ["h1", "h2"])],
        [pattern("P-CRIT", False), negative("P-NEG", True), pattern("P-OK", True)],
        [always("A-BAD", []), always("A-OK", ["p"])],
    )


def test_every_failing_test_of_every_bank_is_named_worst_first_with_its_rule() -> None:
    found = {f.test_id: f for f in failing_tests(_mixed())}
    # Critical first (whatever the score), then the unknown outcome, then lowest score, bank order.
    assert list(found) == ["P-CRIT", "P-NEG", "S-ERR", "S-HARD", "ST-BAD", "A-BAD", "S-LOW"]
    assert found["P-NEG"].critical and found["P-NEG"].score == 80  # critical, though over 60
    assert (found["S-ERR"].rule, found["S-ERR"].score) == (ERRORED, None)
    assert "\n" not in found["S-ERR"].reason and "after 3 retries" in found["S-ERR"].reason
    assert (found["ST-BAD"].bank, found["ST-BAD"].rule) == (Mechanism.STATE, PRIMARY_MISSING)
    assert found["ST-BAD"].reason == "missing h1; fired nothing"
    assert found["A-BAD"].reason == "missing p; loaded nothing"
    assert found["S-HARD"].reason == "missing a; selected b"
    low = found["S-LOW"]
    assert (low.score, low.rule) == (30, "false positive, secondary missing")
    assert low.reason.startswith("-20 false positive: x; -20 false positive: y; -10 secondary missing")
    # 80 with a wrong handler passes the threshold: not a failure.
    assert "ST-WRONG" not in found and "S-OK" not in found


def test_a_test_with_trials_fails_once_on_its_worst_trial() -> None:
    rows = [sem("T", ["a", "b"], trial=0), sem("T", ["b"], trial=1), sem("T", ["a", "b"], trial=2)]
    (only,) = failing_tests(doc(rows))
    assert only.score == pytest.approx(66.67, abs=0.01)  # over 60, but a primary went missing
    assert (only.rule, only.reason) == (PRIMARY_MISSING, "worst of 3 trials: missing a; selected b")


def test_console_lists_the_failures_other_than_the_critical_ones() -> None:
    lines = failure_lines(_mixed(), "R/report.md")
    assert lines[0].startswith("  failing tests (5, worst first)")
    assert [line.split()[0] for line in lines[1:]] == ["S-ERR", "S-HARD", "ST-BAD", "A-BAD", "S-LOW"]
    assert lines[3] == "    ST-BAD [state] 0.0 primary missing: missing h1; fired nothing"
    only_critical = doc(pattern_results=[pattern("P-CRIT", False)])
    assert failure_lines(only_critical, "R") == ["  failing tests: none besides the critical failures above"]
    assert failure_lines(doc([sem("S-OK", ["a", "b"])]), "R") == ["  failing tests: none"]


def test_a_list_longer_than_40_lines_folds_with_the_count_and_the_file() -> None:
    many = doc(state_results=[state(f"ST-{i:02}", []) for i in range(45)])
    lines = failure_lines(many, "results/m/d/report.md")
    assert len(lines) == 1 + 40
    assert lines[-1] == "    … 6 more failing tests in results/m/d/report.md"
    assert fold(["x"] * 40, "tests", "f") == ["x"] * 40  # exactly 40 lines stay whole


def test_report_has_a_failure_section_per_bank() -> None:
    md = render_markdown(_mixed())
    for bank, ids in (
        ("semantic", ["S-ERR", "S-HARD", "S-LOW"]),
        ("state", ["ST-BAD"]),
        ("pattern", ["P-CRIT", "P-NEG"]),
        ("always", ["A-BAD"]),
    ):
        section = md.split(f"## Failing tests — {bank} ({len(ids)})")[1].split("\n## ")[0]
        assert all(i in section for i in ids), (bank, section)
    assert "🚨 **P-NEG** (critical)" in md
    # A pipe in a reason cannot break the table: escaped as text, then as a cell.
    assert "after 3 retries \\\\| gave up" in md
    assert "## Failing tests\n\nNone." in render_markdown(doc([sem("S-OK", ["a", "b"])]))


def _regression() -> RegressionDiff:
    base = doc([sem("S-1", ["a", "b"])], [state("ST-1", ["h1"])], date="2026-11-19")
    head = doc([sem("S-1", ["a", "b"])], [state("ST-1", [])], date="2026-11-20")
    return against_baseline(head, base)


def test_since_block_lists_what_changed_and_diffs_verdict() -> None:
    regression = _regression()
    lines = since_lines(regression, "R/regression_diff.md", gating=False)
    assert lines[0].startswith("  since 2026-11-19, 1 day earlier: health: ")
    assert "1 regressed, 0 fixed, 0 removed, 0 added" in lines[0]
    assert "    regressed: ST-1 [state] 100 → 0 (-100) · system changed" in lines
    why = lines.index("    regressed: ST-1 [state] 100 → 0 (-100) · system changed") + 1
    assert lines[why : why + 2] == [
        "      why: new penalty: hard fail: missing primary h1",
        "      why: handlers −h1",
    ]
    assert "    regression gate: FAILED (reported only: --fail-on-regression gates on it)" in lines
    assert "      - 1 deterministic regression(s): ST-1" in lines
    assert "    regression gate: FAILED (fails the run)" in since_lines(regression, "R", gating=True)
    gate = regression_gate(regression)
    assert gate is not None and gate.status is GateStatus.FAILED
    md = since_markdown(regression)
    assert md[0] == "## Since last run (2026-11-19, 1 day earlier)"
    assert "- regressed: ST-1 [state] 100 → 0 (-100) · system changed" in md
    assert "  - why: handlers −h1" in md
    assert "- 1 deterministic regression(s): ST-1" in md
    assert "[regression_diff.md](regression_diff.md)" in md[-2]


def test_no_previous_evaluation_is_one_line_and_no_gate() -> None:
    first = against_baseline(doc([sem("S-1", ["a", "b"])]), None)
    assert since_lines(first, "R", gating=True) == [
        "  since: no baseline: m has no evaluation dated before 2026-11-19"
    ]
    assert regression_gate(first) is None
    assert "no baseline" in since_markdown(first)[2]


def test_a_long_since_block_folds_into_the_regression_diff() -> None:
    base = doc(state_results=[state(f"ST-{i:02}", ["h1"]) for i in range(45)], date="2026-11-19")
    head = doc(state_results=[state(f"ST-{i:02}", []) for i in range(45)], date="2026-11-20")
    lines = since_lines(against_baseline(head, base), "R/regression_diff.md", gating=False)
    changes = [line for line in lines if line.startswith("    ") and not line.startswith("      ")]
    assert len([c for c in changes if "regressed:" in c]) == 39
    assert "    … 6 more changes in R/regression_diff.md" in lines


# --- both domains: a KB edit that stops a state handler firing and an always entity loading ----

HANDLER_ON = "is_first_conversation: {eq: true}"
HANDLER_OFF = "is_first_conversation: {eq: never}"
Edit = tuple[str, str, str]  # file, text before, text after
SAMPLE_EDITS = [
    ("entities/handler_first_conversation.yaml", HANDLER_ON, HANDLER_OFF),
    ("entities/clinician_guardrails.yaml", "[CLINICIAN, PROFESSIONAL]", "[CLINICIAN]"),
]
TENANT_EDITS = [
    ("kb.yaml", HANDLER_ON, HANDLER_OFF),
    # The tenant persona's only user type changes: the tenant's always test loses it.
    ("kb.yaml", "user_types: [TENANT]", "user_types: [CASEWORKER]"),
]


def _evaluate(kb: Path, banks: Path, date: str) -> RunDocument:
    """The deterministic banks, scored as a run would score them."""
    loaded_kb, loaded_banks = load_validated(kb, banks)
    setup = RunSetup(
        kb=loaded_kb,
        banks=loaded_banks,
        date=date,
        model="m",
        system_config={},
        implementations={},
        pass_threshold=60,
        generated_at=datetime(2026, 11, 21, tzinfo=UTC),
    )
    scope = Scope(banks=frozenset({Mechanism.STATE, Mechanism.ALWAYS}))
    return evaluate(setup, Observed(), scope, Gates()).document


def _edit(root: Path, edits: list[Edit]) -> None:
    for name, before, after in edits:
        text = (root / name).read_text()
        assert before in text, name
        (root / name).write_text(text.replace(before, after))


@pytest.mark.parametrize(
    ("domain", "kb_name", "banks_name", "edits", "broken"),
    [
        (
            REPO,
            "kb",
            "test_banks",
            SAMPLE_EDITS,
            {"STATE-001", "STATE-010", "STATE-014", "STATE-015", "ALWAYS-003", "ALWAYS-007"},
        ),
        (TENANT, "kb.yaml", "banks", TENANT_EDITS, {"T-STATE-001", "T-ALWAYS-001"}),
    ],
    ids=["sample", "tenant"],
)
def test_a_kb_edit_names_every_broken_state_and_always_test(
    tmp_path: Path,
    domain: Path,
    kb_name: str,
    banks_name: str,
    edits: list[Edit],
    broken: set[str],
) -> None:
    kb, banks = tmp_path / kb_name, tmp_path / banks_name
    (shutil.copytree if (domain / kb_name).is_dir() else shutil.copy)(domain / kb_name, kb)
    shutil.copytree(domain / banks_name, banks)
    before = _evaluate(kb, banks, "2026-11-20")
    assert not failing_tests(before)
    _edit(kb if kb.is_dir() else tmp_path, edits)
    after = _evaluate(kb, banks, "2026-11-21")
    failures = failing_tests(after)
    assert {f.test_id for f in failures} == broken
    assert {f.rule for f in failures} == {PRIMARY_MISSING}
    console = "\n".join(failure_lines(after, "report.md"))
    regression = against_baseline(after, before)
    report = render_markdown(after, since_markdown(regression))
    since = "\n".join(since_lines(regression, "regression_diff.md", gating=True))
    for test_id in broken:
        assert f"{test_id} [" in console and f"| {test_id} |" in report
        assert f"regressed: {test_id} [" in since
    assert "regression gate: FAILED (fails the run)" in since
