"""Does a diff fail the gate? The policy behind `eval-pipeline diff`'s exit code.

- A new critical failure fails, whatever the score: it is listed first.
- A regression in a deterministic bank (state, pattern, always) fails: those banks have no noise.
- A test that became errored fails: an unknown outcome is not a pass.
- A semantic regression fails when it is *stable* (its trials agree on each side) or when the
  semantic scores fell significantly (paired test, clustered by topic); one flaky across trials
  with no significant decline is within noise. With one trial every semantic regression counts
  as stable: run trials ≥ 3 to let the noise model excuse noise.
- A semantic regression the head's re-trials decided against this base (core/diff/noise.py)
  follows that decision: confirmed fails, dismissed is excused with a note.
- The head could not be evaluated (a bank with too few scored tests): the verdict is unknown.
- Two different projects are incomparable: that fails, first. A still-selected primary whose
  similarity collapsed (content collapse) fails, named right after new critical failures.
  Removed banks and tests (coverage) fail unless `allow_removed`.
`strict` restores "any regression fails".
"""

from __future__ import annotations

from dataclasses import dataclass

from eval_pipeline.core.diff.model import DeltaKind, PerTestDelta, RunDiff
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.scoring.reevaluation import Decision
from eval_pipeline.core.verdicts.coverage import coverage_verdict
from eval_pipeline.core.verdicts.run_gate import GateStatus


class DiffGate(FrozenModel):
    status: GateStatus
    strict: bool
    reasons: list[str]  # why it failed, most serious first
    notes: list[str]  # what was excused, and why

    @property
    def passed(self) -> bool:
        return self.status is GateStatus.PASSED


def incomparable_reasons(diff: RunDiff) -> list[str]:
    return [f"incomparable: {diff.incomparable}"] if diff.incomparable else []


def _ids(deltas: list[PerTestDelta]) -> str:
    return ", ".join(d.test_id for d in deltas)


def _errored_now(d: PerTestDelta) -> bool:
    return d.head is not None and d.head.score is None


def _stable(d: PerTestDelta) -> bool:
    return not ((d.base is not None and d.base.flaky) or (d.head is not None and d.head.flaky))


@dataclass(frozen=True)
class _Regressions:
    """A diff's regressions in the groups the gate judges, each group in diff order."""

    critical: list[PerTestDelta]
    collapsed: list[PerTestDelta]
    errored: list[PerTestDelta]
    deterministic: list[PerTestDelta]
    confirmed: list[PerTestDelta]  # semantic, confirmed by the head's re-trials
    dismissed: list[str]  # semantic ids the re-trials dismissed as noise
    semantic: list[PerTestDelta]  # semantic, undecided by re-trials (every semantic one when strict)
    declined: bool  # the paired test saw semantic scores fall significantly


def _regressions(diff: RunDiff, strict: bool) -> _Regressions:
    regressed = diff.of_kind(DeltaKind.REGRESSED)
    scored = [d for d in regressed if not _errored_now(d)]
    semantic = [d for d in scored if d.mechanism == Mechanism.SEMANTIC.value]
    decided = {} if strict else diff.noise_decisions
    stats = diff.statistics
    return _Regressions(
        critical=diff.of_kind(DeltaKind.CRITICAL),
        collapsed=diff.content_collapses(),
        errored=[d for d in regressed if _errored_now(d)],
        deterministic=[d for d in scored if d.mechanism != Mechanism.SEMANTIC.value],
        confirmed=[d for d in semantic if decided.get(d.test_id) is Decision.CONFIRMED],
        dismissed=sorted(t for t, d in decided.items() if d is Decision.DISMISSED),
        semantic=[d for d in semantic if d.test_id not in decided],
        declined=stats.significant and stats.mean_difference < 0,
    )


def counted_regressions(diff: RunDiff, strict: bool = False) -> dict[str, str]:
    """Test id -> why the gate counts it against the head: the tests behind the gate's reasons
    (coverage and incomparable projects aside, which name no test of the head)."""
    r = _regressions(diff, strict)
    counted = {d.test_id: "new critical failure" for d in r.critical}
    counted |= {d.test_id: "content collapse" for d in r.collapsed if d.test_id not in counted}
    counted |= {d.test_id: "errored, passed before" for d in r.errored}
    counted |= {d.test_id: "deterministic regression" for d in r.deterministic}
    counted |= {d.test_id: "semantic regression confirmed by re-trials" for d in r.confirmed}
    for d in r.semantic:
        if strict:
            counted[d.test_id] = "semantic regression (--strict)"
        elif _stable(d):
            counted[d.test_id] = "stable semantic regression"
        elif r.declined:
            counted[d.test_id] = "semantic regression; semantic scores fell significantly"
    return counted


def diff_gate(diff: RunDiff, strict: bool = False, allow_removed: bool = False) -> DiffGate:
    reasons = incomparable_reasons(diff)
    r = _regressions(diff, strict)
    if r.critical:
        reasons.append(f"{len(r.critical)} new critical failure(s): {_ids(r.critical)}")
    if r.collapsed:
        reasons.append(f"content collapse in {len(r.collapsed)} test(s): {_ids(r.collapsed)}")
    lost, notes = coverage_verdict(diff, allow_removed)
    reasons += lost
    if r.errored:
        reasons.append(f"{len(r.errored)} test(s) errored that passed before: {_ids(r.errored)}")
    if r.deterministic:
        reasons.append(f"{len(r.deterministic)} deterministic regression(s): {_ids(r.deterministic)}")
    if r.confirmed:
        confirmed = _ids(r.confirmed)
        reasons.append(f"{len(r.confirmed)} semantic regression(s) confirmed by re-trials: {confirmed}")
    if r.dismissed:
        dismissed = f"{len(r.dismissed)} semantic regression(s) dismissed by re-trials as noise"
        notes.append(f"{dismissed}: {', '.join(r.dismissed)}")
    stable = [d for d in r.semantic if strict or _stable(d)]
    excused = [d for d in r.semantic if not (strict or _stable(d))]
    if stable:
        kind = "semantic regression(s) (--strict)" if strict else "stable semantic regression(s)"
        reasons.append(f"{len(stable)} {kind}: {_ids(stable)}")
    fell = f"semantic scores fell significantly ({diff.statistics.mean_difference:+.1f} points per test)"
    if r.declined and r.semantic and not strict:
        reasons.append(fell)
    elif r.declined and not r.semantic:
        notes.append(fell)
    elif excused:
        notes.append(
            f"{len(excused)} semantic regression(s) flaky across trials and no significant decline: "
            f"within noise ({_ids(excused)})"
        )
    if diff.head_unevaluable:
        status = GateStatus.UNEVALUABLE
        reasons.insert(0, "head could not be evaluated: " + "; ".join(diff.head_unevaluable))
    else:
        status = GateStatus.FAILED if reasons else GateStatus.PASSED
    return DiffGate(status=status, strict=strict, reasons=reasons, notes=notes)
