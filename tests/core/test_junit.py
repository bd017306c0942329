"""JUnit files from a run and from a diff: valid against the Jenkins JUnit schema, failing tests
named as test cases with the rule and reason, errored tests as `<error>`, removed tests named."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import xmlschema

from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.report.diff_junit import render_diff_junit
from eval_pipeline.core.report.junit import Case, Suite, Verdict, render_junit, xml_safe
from eval_pipeline.core.report.run_junit import ModelRun, render_run_junit
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.verdicts.regression_gate import counted_regressions, diff_gate
from eval_pipeline.core.verdicts.run_gate import gate_decision
from tests.conftest import REPO
from tests.run_docs import always, doc, negative, pattern, sem, state

XSD = REPO / "tests" / "fixtures" / "junit" / "junit-10.xsd"


@cache
def _schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def valid(xml: str) -> ET.Element:
    """The document, once the Jenkins schema has accepted it (raises with the reason otherwise)."""
    _schema().validate(xml)
    return ET.fromstring(xml)


def cases(root: ET.Element) -> dict[str, ET.Element]:
    return {f"{c.get('classname')}/{c.get('name')}": c for c in root.iter("testcase")}


def outcome(case: ET.Element) -> str:
    children = [c.tag for c in case]
    return children[0] if children else "passed"


def _mixed(model: str = "m") -> RunDocument:
    return doc(
        [
            sem("S-OK", ["a", "b"]),
            sem("S-HARD", ["b"], category="multi_turn"),
            sem("S-ERR", [], error="upstream \x00timed out\x1b[31m after 3 retries"),
        ],
        [state("ST-BAD", []), state("ST-OK", ["h1"])],
        [pattern("P-CRIT", False), negative("P-NEG", False)],
        [always("A-OK", ["p"])],
        model=model,
    )


def _run(document: RunDocument) -> ModelRun:
    return ModelRun(document.provenance.model, document, gate_decision(document, fail_under=None))


def test_a_run_is_a_suite_per_bank_with_failures_errors_and_properties() -> None:
    document = _mixed()
    root = valid(render_run_junit([_run(document)]))
    found = cases(root)
    assert outcome(found["semantic.one_liner/S-OK"]) == "passed"
    hard = found["semantic.multi_turn/S-HARD"].find("failure")
    assert hard is not None and hard.get("message") == "primary missing: missing a; selected b"
    assert hard.get("type") == "primary missing" and "score 0.0" in (hard.text or "")
    errored = found["semantic.one_liner/S-ERR"].find("error")
    # Control characters XML 1.0 cannot carry are written visibly, and the reason survives.
    assert errored is not None and "\\u0000timed out\\u001b[31m after 3 retries" in errored.get("message", "")
    crisis = found["pattern/P-CRIT"].find("failure")
    assert crisis is not None and (crisis.text or "").startswith("critical failure; score 0.0")
    assert outcome(found["pattern/P-NEG"]) == "passed" and outcome(found["state/ST-BAD"]) == "failure"
    gate = found["gate/m"].find("failure")
    assert gate is not None and gate.get("message", "").startswith("gate failed: 1 critical failure(s)")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["semantic", "state", "pattern", "always", "gate"]
    assert (suites["semantic"].get("tests"), suites["semantic"].get("failures")) == ("3", "1")
    assert suites["semantic"].get("errors") == "1"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("9", "4", "1")  # + the gate
    properties = {p.get("name"): p.get("value") for p in suites["state"].iter("property")}
    assert properties["model"] == "m" and properties["kb_hash"] == "k1" * 32
    assert properties["health"] == "CRITICAL" and properties["gate"] == "failed"
    assert properties["combined_score"] == fmt_score(document.aggregate.combined_score) != "—"


def test_several_models_share_one_file_and_a_model_without_results_is_an_error() -> None:
    missing = ModelRun("other", None, None, "no results were written: m2: provider down")
    root = valid(render_run_junit([_run(_mixed("m1")), _run(_mixed("m2")), missing]))
    found = cases(root)
    assert "m1.semantic.multi_turn/S-HARD" in found and "m2.semantic.multi_turn/S-HARD" in found
    assert {s.get("name") for s in root.iter("testsuite")} >= {"m1.semantic", "m2.always", "gate"}
    error = found["gate/other"].find("error")
    assert error is not None and error.get("message") == "no results were written: m2: provider down"


def test_a_passing_gate_and_no_failures() -> None:
    clean = doc([sem("S-OK", ["a", "b"])], [state("ST-OK", ["h1"])])
    root = valid(render_run_junit([_run(clean)]))
    assert root.get("failures") == root.get("errors") == "0"
    assert all(outcome(c) == "passed" for c in root.iter("testcase"))


def test_text_that_xml_cannot_carry_is_made_visible_and_markup_is_escaped() -> None:
    assert xml_safe("a\x00b\x08c\ufffed\tok\n") == "a\\u0000b\\u0008c\\ufffed\tok\n"
    # XML could carry these, a terminal showing the file would act on them: escaped too.
    assert xml_safe("cr\r csi\x9b31m rlo\u202e ls\u2028") == "cr\\u000d csi\\u009b31m rlo\\u202e ls\\u2028"
    tricky = Case('x"<&>]]>', "c", Verdict.FAILURE, 'quote " and <tag> & \x0c', "t", "]]> <!-- -->")
    root = valid(render_junit("n", [Suite("s", [tricky])]))
    case = next(root.iter("testcase"))
    failure = case.find("failure")
    assert case.get("name") == 'x"<&>]]>' and failure is not None
    assert failure.get("message") == 'quote " and <tag> & \\u000c' and failure.text == "]]> <!-- -->"


def _diff_pair() -> tuple[RunDocument, RunDocument]:
    base = doc(
        [sem("S-1", ["a", "b"]), sem("S-2", ["a", "b"]), sem("S-GONE", ["a", "b"])],
        [state("ST-1", ["h1"])],
        [negative("P-NEG", False)],
        [always("A-1", ["p"])],
    )
    head = doc(
        [sem("S-1", ["b"], category="multi_turn"), sem("S-2", ["a", "b"]), sem("S-NEW", [], error="boom")],
        [state("ST-1", [])],
        [negative("P-NEG", True)],
        date="2026-11-20",
    )
    return base, head


def test_a_diff_fails_the_regressions_the_gate_counts_and_names_removed_tests() -> None:
    base, head = _diff_pair()
    diff = diff_documents(base, head)
    gate = diff_gate(diff)
    categories = {r.test_id: r.category for r in head.semantic}
    root = valid(render_diff_junit(diff, gate, allow_removed=False, categories=categories))
    found = cases(root)
    counted = counted_regressions(diff)
    assert set(counted) == {"S-1", "ST-1", "P-NEG"}
    for test_id in counted:  # every id the gate's reasons name is a failing case
        assert any(test_id in reason for reason in gate.reasons)
    regressed = found["semantic.multi_turn/S-1"].find("failure")
    assert regressed is not None and regressed.get("message") == "stable semantic regression: 100 → 0"
    crisis = found["pattern/P-NEG"].find("failure")
    assert crisis is not None and crisis.get("message", "").startswith("new critical failure: 100 → 80")
    assert outcome(found["semantic.one_liner/S-2"]) == "passed"
    assert outcome(found["semantic.one_liner/S-NEW"]) == "error"  # a new test that errored
    gone = found["semantic/S-GONE"].find("failure")
    assert gone is not None and gone.get("message") == "removed: no longer run (was Perfect)"
    bank = found["coverage/always"].find("failure")
    assert bank is not None and bank.get("message") == "bank always no longer run"
    assert "always/A-1" in found and outcome(found["always/A-1"]) == "failure"
    diff_gate_case = found["gate/diff gate"].find("failure")
    assert diff_gate_case is not None and "coverage lost: bank always removed" in diff_gate_case.get(
        "message", ""
    )


def test_removals_accepted_by_allow_removed_are_skipped_but_still_named() -> None:
    base, head = _diff_pair()
    diff = diff_documents(base, head)
    root = valid(render_diff_junit(diff, diff_gate(diff, allow_removed=True), allow_removed=True))
    found = cases(root)
    for name in ("semantic/S-GONE", "coverage/always", "always/A-1"):
        assert outcome(found[name]) == "skipped", name
    assert outcome(found["semantic/S-1"]) == "failure"  # no categories given: classname is the bank


def test_a_flaky_semantic_regression_within_noise_passes_and_fails_under_strict() -> None:
    good = [sem(f"S-{i}", ["a", "b"]) for i in range(4)]
    trials = [sem("S-F", ["a", "b"], trial=0), sem("S-F", ["a", "b"], trial=1), sem("S-F", ["c"], trial=2)]
    flipped = [sem("S-F", ["c"], trial=0), sem("S-F", ["a", "b"], trial=1), sem("S-F", ["c"], trial=2)]
    diff = diff_documents(doc([*good, *trials]), doc([*good, *flipped], date="2026-11-20"))
    lenient = cases(valid(render_diff_junit(diff, diff_gate(diff), allow_removed=False)))
    assert outcome(lenient["semantic/S-F"]) == "passed" and outcome(lenient["gate/diff gate"]) == "passed"
    strict = cases(valid(render_diff_junit(diff, diff_gate(diff, strict=True), allow_removed=False)))
    assert outcome(strict["semantic/S-F"]) == "failure"
    assert outcome(strict["gate/diff gate (strict)"]) == "failure"


def test_the_vendored_schema_rejects_what_jenkins_would() -> None:
    # The schema is no rubber stamp: a testsuite without its counts does not validate.
    assert not _schema().is_valid('<testsuites><testsuite name="s"/></testsuites>')
    assert Path(XSD.parent / "NOTICE").read_text().count("github.com/jenkinsci/xunit-plugin") == 1
