"""JUnit XML, the test-report format CI servers read: suites of test cases, each passed, failed,
errored or skipped. Built with ElementTree, which escapes every attribute and text. The controls
XML 1.0 cannot carry even escaped (a provider's error text may hold them) and those a terminal
would act on (CR, C1 controls, bidirectional overrides) are written as visible `\\uXXXX`: only
tabs and newlines stay raw.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from eval_pipeline.core.verdicts.run_gate import GateStatus

# Everything outside XML 1.0's Char production, and the controls a terminal would act on.
_ESCAPED = re.compile(
    "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|[\r\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
GATE_SUITE = "gate"


def xml_safe(text: str) -> str:
    return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class Verdict(StrEnum):
    PASSED = "passed"
    FAILURE = "failure"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Case:
    name: str
    classname: str
    verdict: Verdict = Verdict.PASSED
    message: str = ""  # one line: the rule and reason (failure, error) or why skipped
    kind: str = ""  # the failure's type attribute: the rule, or what kind of regression
    detail: str = ""  # the element's text: what a reader needs beyond the message
    time: float | None = None  # seconds, when known


@dataclass(frozen=True)
class Suite:
    name: str
    cases: Sequence[Case]
    properties: Mapping[str, str] = field(default_factory=dict)
    timestamp: str | None = None

    def count(self, verdict: Verdict) -> int:
        return sum(c.verdict is verdict for c in self.cases)

    @property
    def time(self) -> float:
        return sum(c.time or 0.0 for c in self.cases)


def gate_case(name: str, status: GateStatus, reasons: Sequence[str], kind: str, detail: str = "") -> Case:
    """A gate as a case of the `gate` suite: an error when it could not judge."""
    if status is GateStatus.PASSED:
        return Case(name, GATE_SUITE)
    verdict = Verdict.ERROR if status is GateStatus.UNEVALUABLE else Verdict.FAILURE
    message = f"gate {status.value}: {'; '.join(reasons) or status.value}"
    return Case(name, GATE_SUITE, verdict, message, kind, detail)


def _totals(element: ET.Element, suites: Sequence[Suite]) -> None:
    element.set("tests", str(sum(len(s.cases) for s in suites)))
    element.set("failures", str(sum(s.count(Verdict.FAILURE) for s in suites)))
    element.set("errors", str(sum(s.count(Verdict.ERROR) for s in suites)))


def _case(parent: ET.Element, case: Case) -> None:
    element = ET.SubElement(parent, "testcase", name=xml_safe(case.name), classname=xml_safe(case.classname))
    if case.time is not None:
        element.set("time", f"{case.time:.3f}")
    if case.verdict is Verdict.PASSED:
        return
    outcome = ET.SubElement(element, case.verdict.value, message=xml_safe(case.message))
    if case.kind:
        outcome.set("type", xml_safe(case.kind))
    if case.detail:
        outcome.text = xml_safe(case.detail)


def _suite(parent: ET.Element, suite: Suite) -> None:
    element = ET.SubElement(parent, "testsuite", name=xml_safe(suite.name))
    _totals(element, [suite])
    element.set("skipped", str(suite.count(Verdict.SKIPPED)))
    element.set("time", f"{suite.time:.3f}")
    if suite.timestamp:
        element.set("timestamp", suite.timestamp)
    if suite.properties:
        properties = ET.SubElement(element, "properties")
        for name, value in suite.properties.items():
            ET.SubElement(properties, "property", name=xml_safe(name), value=xml_safe(value))
    for case in suite.cases:
        _case(element, case)


def render_junit(name: str, suites: Sequence[Suite]) -> str:
    """One `<testsuites>` document holding every suite, UTF-8, with its XML declaration."""
    root = ET.Element("testsuites", name=xml_safe(name))
    _totals(root, suites)
    root.set("time", f"{sum(s.time for s in suites):.3f}")
    for suite in suites:
        _suite(root, suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
