"""`diff --junit`: a comparison of two runs as JUnit test suites, one per bank of the head.

A case per test of the head fails when the diff gate counts it as a regression, is an `<error>`
when the head could not score it. Tests and banks no longer run fail by id (skipped, still named,
under --allow-removed). A last suite, `gate`, holds the diff gate, which can fail for reasons no
test carries (another project, a significant decline).
"""

from __future__ import annotations

from collections.abc import Mapping

from eval_pipeline.core.diff.model import DeltaKind, PerTestDelta, RunDiff
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.report.diff_text import detail_lines, headline, points
from eval_pipeline.core.report.junit import GATE_SUITE, Case, Suite, Verdict, gate_case, render_junit
from eval_pipeline.core.verdicts.coverage import ALLOW_FLAG
from eval_pipeline.core.verdicts.regression_gate import DiffGate, counted_regressions

COVERAGE = "coverage"


def _scores(d: PerTestDelta) -> str:
    before, after = (points(s.score if s else None) for s in (d.base, d.head))
    return f"{before} → {after}"


def _classname(d: PerTestDelta, categories: Mapping[str, str]) -> str:
    category = categories.get(d.test_id)
    return f"{d.mechanism}.{category}" if category else d.mechanism


def _head_case(d: PerTestDelta, counted: Mapping[str, str], categories: Mapping[str, str]) -> Case:
    name, classname, why = d.test_id, _classname(d, categories), counted.get(d.test_id)
    detail = "\n".join([headline(d), *detail_lines(d)])
    if d.head is not None and d.head.score is None:  # errored in the head
        message = f"{why or 'errored in the head'}: {_scores(d)}"
        return Case(name, classname, Verdict.ERROR, message, why or "errored", detail)
    if why:
        return Case(name, classname, Verdict.FAILURE, f"{why}: {_scores(d)}", why, detail)
    return Case(name, classname)


def _coverage_case(name: str, classname: str, message: str, allow_removed: bool) -> Case:
    """Coverage lost (a test or a bank no longer run): a failure, unless --allow-removed accepts it."""
    if allow_removed:
        return Case(name, classname, Verdict.SKIPPED, f"{message}; accepted by {ALLOW_FLAG}")
    return Case(name, classname, Verdict.FAILURE, message, "coverage lost")


def _properties(diff: RunDiff, gate: DiffGate) -> dict[str, str]:
    return {
        "base": diff.base.label,
        "head": diff.head.label,
        "base_kb_hash": diff.base.kb_hash,
        "head_kb_hash": diff.head.kb_hash,
        "health": f"{diff.base_health} → {diff.head_health}",
        "pass_threshold": str(diff.pass_threshold),
        "gate": gate.status.value,
    }


def render_diff_junit(
    diff: RunDiff, gate: DiffGate, allow_removed: bool, categories: Mapping[str, str] | None = None
) -> str:
    """`categories`: the head's semantic test id -> category, for classnames."""
    categories = categories or {}
    counted = counted_regressions(diff, gate.strict)
    by_bank: dict[str, list[Case]] = {}
    for d in diff.deltas:
        if d.kind is not DeltaKind.REMOVED:
            case = _head_case(d, counted, categories)
        else:
            critical = "critical test " if d.critical else ""
            message = f"removed: {critical}no longer run (was {d.base.label if d.base else '—'})"
            case = _coverage_case(d.test_id, _classname(d, categories), message, allow_removed)
        by_bank.setdefault(d.mechanism, []).append(case)
    properties = _properties(diff, gate)
    order = [m.value for m in Mechanism]
    banks = sorted(by_bank, key=lambda b: order.index(b) if b in order else len(order))
    suites = [Suite(bank, by_bank[bank], properties) for bank in banks]
    if diff.removed_banks:
        lost = [
            _coverage_case(b, COVERAGE, f"bank {b} no longer run", allow_removed) for b in diff.removed_banks
        ]
        suites.append(Suite(COVERAGE, lost, properties))
    name = "diff gate (strict)" if gate.strict else "diff gate"
    notes = "\n".join(f"note: {n}" for n in gate.notes)
    verdict = gate_case(name, gate.status, gate.reasons, "diff gate", notes)
    suites.append(Suite(GATE_SUITE, [verdict], properties))
    return render_junit(f"eval-pipeline diff {diff.base.label} → {diff.head.label}", suites)
