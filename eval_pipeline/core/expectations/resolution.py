"""Resolve each semantic test's current expectations from the bank and the history.

Precedence: a standing human override, then the most recent calibration, then the bank.
Unlike the specification's loader (newest file wins whatever it holds), a human override
stands over *later* calibrations until a human withdraws it; a later calibration that
disagrees with a standing override is recorded as a conflict for review, not applied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from eval_pipeline.core.inputs.banks import Expectations, SemanticTest
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.history_file import HistoryChange, HistoryFile, LoadedHistory, history_sort_key


class ExpectationConflict(FrozenModel):
    """A calibration proposed something other than a standing human override."""

    test_id: str
    calibration_version: datetime
    calibration_source: str
    override_source: str
    proposed: Expectations
    standing: Expectations


class ResolvedExpectation(FrozenModel):
    test_id: str
    expectations: Expectations
    source: str  # original | opus_<date> | human_override_<date>
    conflict: ExpectationConflict | None = None

    @property
    def source_kind(self) -> str:
        return source_kind(self.source)


def source_kind(source: str) -> str:
    """`original`, `opus` or `human_override` for a source such as `opus_2026-11-22`."""
    for kind in ("human_override", "opus"):
        if source.startswith(kind):
            return kind
    return "original"


@dataclass
class _TestState:
    calibration: tuple[Expectations, str] | None = None
    override: tuple[Expectations, str] | None = None
    conflict: ExpectationConflict | None = None


def _canonical(exp: Expectations) -> tuple[frozenset[str], ...]:
    ranks = frozenset(f"{rc.higher}>{rc.lower}" for rc in exp.rank_check)
    gains = frozenset(f"{e}={g}" for e, g in exp.relevant.items())
    lists = (exp.expected_primary, exp.expected_any, exp.expected_secondary, exp.not_expected)
    return (*(frozenset(ids) for ids in lists), gains, ranks)


def same_expectations(a: Expectations, b: Expectations) -> bool:
    """Scoring treats every list as a set, so a reordering is not a change (nor a conflict)."""
    return _canonical(a) == _canonical(b)


def _apply_change(state: _TestState, change: HistoryChange, entry: HistoryFile) -> None:
    if change.updated is not None:
        state.calibration = (change.updated, f"opus_{entry.date}")
    override = change.human_override
    if override is not None:
        state.conflict = None
        state.override = None
        if not override.withdraw:
            state.override = (override.expectations(), f"human_override_{override.override_date}")
    elif state.override is not None and state.calibration is not None:
        standing, standing_source = state.override
        proposed, source = state.calibration  # this change's (a change without an override has one)
        if same_expectations(standing, proposed):
            state.conflict = None  # the latest calibration now agrees with the clinician
        else:
            state.conflict = ExpectationConflict(
                test_id=change.test_id,
                calibration_version=entry.version,
                calibration_source=source,
                override_source=standing_source,
                proposed=proposed,
                standing=standing,
            )


def ordered(history: Iterable[LoadedHistory]) -> list[LoadedHistory]:
    return sorted(history, key=lambda h: history_sort_key(h.entry, h.path))


def resolve(
    tests: Sequence[SemanticTest], history: Iterable[LoadedHistory], as_of: datetime | None = None
) -> dict[str, ResolvedExpectation]:
    """Resolve every test; `as_of` ignores history written after it (dated snapshots)."""
    states: dict[str, _TestState] = {t.test_id: _TestState() for t in tests}
    for item in ordered(history):
        if as_of is not None and item.entry.version > as_of:
            continue
        for change in item.entry.changes:
            if change.test_id in states:
                _apply_change(states[change.test_id], change, item.entry)
    return {t.test_id: _resolved(t, states[t.test_id]) for t in tests}


def _resolved(test: SemanticTest, state: _TestState) -> ResolvedExpectation:
    # The module's precedence: a standing override, then the latest calibration, then the bank.
    expectations, source = state.override or state.calibration or (test.original_expectations(), "original")
    return ResolvedExpectation(
        test_id=test.test_id, expectations=expectations, source=source, conflict=state.conflict
    )


def source_summary(sources: Iterable[str]) -> dict[str, int]:
    """Counts per source kind, always with all three kinds present."""
    counts = Counter(source_kind(s) for s in sources)
    return {kind: counts.get(kind, 0) for kind in ("original", "opus", "human_override")}
