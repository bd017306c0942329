"""Does a diff fail the gate? The policy behind `eval-pipeline diff`'s exit code.

- A new critical failure fails, whatever the score: it is listed first.
- A regression in a deterministic bank (state, pattern, always) fails: those banks have no noise.
- A test that became errored fails: an unknown outcome is not a pass.
- A semantic regression fails when it is *stable* (its trials agree on each side, so it is not
  noise) or when the semantic scores fell significantly (paired test, clustered by topic).
  A regression that is flaky across trials while the paired test sees no significant decline is
  reported as within noise. With one trial flakiness cannot be seen, so every semantic
  regression counts as stable: run trials ≥ 3 to let the noise model excuse noise.
- A semantic regression the head's re-trials decided against this base (`run` re-tries the
  regressions of a model that is not reproducible: core/diff/noise.py) follows that decision:
  confirmed fails, dismissed is excused with a note.
- The head could not be evaluated (a bank with too few scored tests): the verdict is unknown.
- Two different projects are incomparable: that fails, first. A still-selected primary whose
  similarity collapsed (content collapse) fails, named right after new critical failures.
  Removed banks and tests (coverage) fail unless `allow_removed`.
`strict` restores "any regression fails".
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from eval_pipeline.core.diff.collapse import content_collapses
from eval_pipeline.core.diff.model import DeltaKind, RunDiff, TestDelta
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.scoring.reevaluation import Decision
from eval_pipeline.core.verdicts.coverage import coverage_verdict
from eval_pipeline.core.verdicts.identity import incomparable_reasons
from eval_pipeline.core.verdicts.run_gate import GateStatus


class DiffGate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    status: GateStatus
    strict: bool
    reasons: list[str]  # why it failed, most serious first
    notes: list[str]  # what was excused, and why

    @property
    def passed(self) -> bool:
        return self.status is GateStatus.PASSED


def _ids(deltas: list[TestDelta]) -> str:
    return ", ".join(d.test_id for d in deltas)


def _errored_now(d: TestDelta) -> bool:
    return d.head is not None and d.head.score is None


def _stable(d: TestDelta) -> bool:
    return not ((d.base is not None and d.base.flaky) or (d.head is not None and d.head.flaky))


def _by_retrials(
    semantic: list[TestDelta], diff: RunDiff, reasons: list[str], notes: list[str]
) -> list[TestDelta]:
    """Decide the regressions the head's re-trials decided; return the others. A dismissed one
    is noted even when its re-trials lifted the test's mean back over the threshold."""
    decided = diff.noise_decisions
    confirmed = [d for d in semantic if decided.get(d.test_id) is Decision.CONFIRMED]
    dismissed = sorted(t for t, d in decided.items() if d is Decision.DISMISSED)
    if confirmed:
        reasons.append(f"{len(confirmed)} semantic regression(s) confirmed by re-trials: {_ids(confirmed)}")
    if dismissed:
        notes.append(
            f"{len(dismissed)} semantic regression(s) dismissed by re-trials as noise: {', '.join(dismissed)}"
        )
    return [d for d in semantic if d.test_id not in decided]


def diff_gate(diff: RunDiff, strict: bool = False, allow_removed: bool = False) -> DiffGate:
    reasons = incomparable_reasons(diff)
    critical = diff.of_kind(DeltaKind.CRITICAL)
    if critical:
        reasons.append(f"{len(critical)} new critical failure(s): {_ids(critical)}")
    collapsed = content_collapses(diff)
    if collapsed:
        reasons.append(f"content collapse in {len(collapsed)} test(s): {_ids(collapsed)}")
    lost, notes = coverage_verdict(diff, allow_removed)
    reasons += lost
    regressed = diff.of_kind(DeltaKind.REGRESSED)
    errored = [d for d in regressed if _errored_now(d)]
    scored = [d for d in regressed if not _errored_now(d)]
    deterministic = [d for d in scored if d.mechanism != Mechanism.SEMANTIC.value]
    semantic = [d for d in scored if d.mechanism == Mechanism.SEMANTIC.value]
    if errored:
        reasons.append(f"{len(errored)} test(s) errored that passed before: {_ids(errored)}")
    if deterministic:
        reasons.append(f"{len(deterministic)} deterministic regression(s): {_ids(deterministic)}")
    stats = diff.statistics
    declined = stats.significant and stats.mean_difference < 0
    if not strict:
        semantic = _by_retrials(semantic, diff, reasons, notes)
    if strict and semantic:
        reasons.append(f"{len(semantic)} semantic regression(s) (--strict): {_ids(semantic)}")
    elif semantic:
        stable = [d for d in semantic if _stable(d)]
        if stable:
            reasons.append(f"{len(stable)} stable semantic regression(s): {_ids(stable)}")
        if declined:
            reasons.append(
                f"semantic scores fell significantly ({stats.mean_difference:+.1f} points per test)"
            )
        excused = [d for d in semantic if not _stable(d)]
        if excused and not declined:
            notes.append(
                f"{len(excused)} semantic regression(s) flaky across trials and no significant decline: "
                f"within noise ({_ids(excused)})"
            )
    elif declined:
        notes.append(f"semantic scores fell significantly ({stats.mean_difference:+.1f} points per test)")
    if diff.head_unevaluable:
        status = GateStatus.UNEVALUABLE
        reasons.insert(0, "head could not be evaluated: " + "; ".join(diff.head_unevaluable))
    else:
        status = GateStatus.FAILED if reasons else GateStatus.PASSED
    return DiffGate(status=status, strict=strict, reasons=reasons, notes=notes)
