"""Which tests of a run fail, and why, worst first.

A test fails when it errored (no outcome, which is no pass), hard-failed (an expected primary
missing), is a graded test that selected nothing relevant, or scored under the run's pass
threshold; a critical pattern failure fails whatever its score. Each failure names the scoring
rule that failed and a one-line reason, so a reader of `run`'s output or report.md sees what
broke in every bank without opening results.json.
"""

from __future__ import annotations

from dataclasses import dataclass

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.scoring.grouped import GroupedResults, group_document
from eval_pipeline.core.scoring.points import PenaltyKind
from eval_pipeline.core.scoring.registry import MECHANISMS
from eval_pipeline.core.scoring.results import AnyResult, PatternResult, SemanticResult, StateResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import Outcome, TrialResults

ERRORED = "errored"
PRIMARY_MISSING = "primary missing"
ANY_OF_MISSING = "any-of missing"
NO_RELEVANT = "no relevant entity selected"  # the rule, hard fail (before 1.10) or penalty


@dataclass(frozen=True)
class Failure:
    test_id: str
    bank: Mechanism
    score: float | None  # None when errored; a semantic test's mean over its trials
    rule: str
    reason: str  # one line
    critical: bool = False


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
