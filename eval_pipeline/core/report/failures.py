"""Which tests of a run fail, and why, worst first.

A test fails when it errored (no outcome is no pass), hard-failed, is a graded test that selected
nothing relevant, or scored under the pass threshold; a critical pattern failure fails whatever
its score. Each failure names the rule that failed and a one-line reason, so `run`'s output and
report.md show what broke in every bank without opening results.json. Apart from the "since"
block (run_output.py): a narrowed run, never compared, does not import the diff models. Long
lists fold so that a terminal or CI log stays readable; the file named holds them in full.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.points import PenaltyKind
from eval_pipeline.core.scoring.registry import MECHANISMS
from eval_pipeline.core.scoring.results import AnyResult, PatternResult, SemanticResult, StateResult
from eval_pipeline.core.scoring.run_document import GroupedResults, RunDocument, group_document
from eval_pipeline.core.scoring.trials import Outcome, TrialResults

ERRORED = "errored"
PRIMARY_MISSING = "primary missing"
ANY_OF_MISSING = "any-of missing"
NO_RELEVANT = "no relevant entity selected"  # the rule, hard fail (before 1.10) or penalty
FOLD_AFTER = 40


@dataclass(frozen=True)
class Failure:
    test_id: str
    bank: Mechanism
    score: float | None  # None when errored; a semantic test's mean over its trials
    rule: str
    reason: str  # one line
    critical: bool = False

    @property
    def errored(self) -> bool:
        return self.rule == ERRORED


def _produced(r: AnyResult) -> list[str]:
    if isinstance(r, SemanticResult):
        return [s.entity_id for s in r.selections]
    if isinstance(r, StateResult):
        return r.triggered_handlers
    if isinstance(r, PatternResult):
        return r.matched_entities
    return r.loaded_entities


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _rule_and_reason(r: AnyResult, bank: Mechanism) -> tuple[str, str]:
    if r.outcome is None:
        return ERRORED, _one_line(r.error or "no reason recorded")
    out = r.outcome
    got = f"{MECHANISMS[bank].produced} {', '.join(_produced(r)) or 'nothing'}"
    if out.hard_fail:
        rules = [PRIMARY_MISSING] if out.missing_primary else []
        rules += [ANY_OF_MISSING] if out.missing_any else []
        rules += [NO_RELEVANT] if out.no_relevant_selected else []
        return ", ".join(rules), f"{out.hard_fail_text}; {got}"
    # The costliest rule first; nothing relevant selected, which fails the test whatever its
    # points, leads, followed by what was selected instead.
    penalties = sorted(
        out.penalties, key=lambda p: (p.kind is not PenaltyKind.NO_RELEVANT_SELECTED, p.points)
    )
    reasons = [p.text for p in penalties] + ([got] if out.no_relevant_selected else [])
    return ", ".join(dict.fromkeys(p.rule for p in penalties)), "; ".join(reasons)


def _worst_row(t: TrialResults[AnyResult]) -> AnyResult:
    scored = [r for r in t.rows if r.score is not None]
    return min(scored, key=lambda r: r.score or 0) if scored else t.first


def _failure(bank: Mechanism, t: TrialResults[AnyResult], critical: bool) -> Failure:
    rule, reason = _rule_and_reason(_worst_row(t), bank)
    if t.trials > 1:
        reason = f"worst of {t.trials} trials: {reason}"
    return Failure(t.test_id, bank, t.score, rule, reason, critical)


def _fails(t: TrialResults[AnyResult], critical: bool) -> bool:
    return critical or t.hard_fail or t.outcome is not Outcome.PASS


def _severity(f: Failure) -> tuple[bool, float, int, str]:
    # Critical first, then an unknown outcome, then the lowest score.
    return (not f.critical, -1.0 if f.score is None else f.score, list(Mechanism).index(f.bank), f.test_id)


def failing_tests(doc: RunDocument, grouped: GroupedResults | None = None) -> list[Failure]:
    """Every failing test of every bank, worst first (a semantic test once, over its trials).
    `grouped`: `doc`'s results by test, when the caller has grouped them already."""
    tests = group_document(doc) if grouped is None else grouped
    found = []
    for bank in Mechanism:
        for t in tests.of(bank):
            critical = bank is Mechanism.PATTERN and any(
                isinstance(r, PatternResult) and r.critical_failure for r in t.rows
            )
            if _fails(t, critical):
                found.append(_failure(bank, t, critical))
    return sorted(found, key=_severity)


def fold(lines: Sequence[str], what: str, where: str, limit: int = FOLD_AFTER) -> list[str]:
    """At most `limit` lines: a longer list keeps its first `limit - 1` and says how many more
    there are, and which file holds them."""
    if len(lines) <= limit:
        return list(lines)
    kept = limit - 1
    return [*lines[:kept], f"… {len(lines) - kept} more {what} in {where}"]


def _failure_line(f: Failure, shared: set[str]) -> str:
    # An errored test whose reason many share (an outage, a KB that could not be indexed) points
    # at the summary's ERRORED line instead of repeating one cause per test.
    reason = (
        "(the reason is in the ERRORED line above)" if f.score is None and f.reason in shared else f.reason
    )
    return one_line(f"{f.test_id} [{f.bank.value}] {fmt_score(f.score)} {f.rule}: {reason}")


def failure_lines(doc: RunDocument, details: str, failures: Sequence[Failure] | None = None) -> list[str]:
    """Every failing test that is not a critical failure (those are listed above), worst first.
    `failures`: `doc`'s failing tests, when the caller has found them already."""
    failures = failing_tests(doc) if failures is None else failures
    others = [f for f in failures if not f.critical]
    if not others:
        return ["  failing tests: none" + (" besides the critical failures above" if failures else "")]
    head = f"  failing tests ({len(others)}, worst first): test [bank] score rule: reason"
    errored = Counter(f.reason for f in others if f.score is None)
    shared = {reason for reason, n in errored.items() if n > 1}
    lines = [_failure_line(f, shared) for f in others]
    return [head, *(f"    {line}" for line in fold(lines, "failing tests", details))]
