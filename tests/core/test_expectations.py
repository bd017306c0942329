from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

from eval_pipeline.core.expectations.resolution import resolve, source_summary
from eval_pipeline.core.inputs.banks import Expectations, SemanticTest
from eval_pipeline.core.inputs.history_file import (
    HistoryChange,
    HistoryFile,
    HumanOverride,
    LoadedHistory,
    append_history,
)
from eval_pipeline.core.inputs.loading import Problem, load_history

ORIGINAL = {
    "expected_primary": ["a"],
    "expected_secondary": ["b"],
    "not_expected": [],
    "rank_check": [],
}
TEST = SemanticTest(test_id="T-1", category="one_liner", prompt="p", **ORIGINAL)
OTHER = SemanticTest(test_id="T-2", category="one_liner", prompt="q", expected_primary=["z"])


def exp(primary: str, secondary: tuple[str, ...] = ()) -> Expectations:
    return Expectations(expected_primary=[primary], expected_secondary=list(secondary))


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def calibration(day: int, primary: str, test_id: str = "T-1") -> HistoryFile:
    return HistoryFile(
        version=at(day),
        calibration_trigger="manual",
        model="claude-opus-test",
        prompt_version="v1",
        changes=[HistoryChange(test_id=test_id, updated=exp(primary), opus_reasoning="because")],
        changed_count=1,
    )


def override(day: int, primary: str, withdraw: bool = False) -> HistoryFile:
    ov = HumanOverride(
        expected_primary=[] if withdraw else [primary],
        override_date=at(day).date().isoformat(),
        by="dr. lee",
        reason="clinical judgment",
        withdraw=withdraw,
    )
    trigger = "human_override_withdrawn" if withdraw else "human_override"
    return HistoryFile(
        version=at(day),
        calibration_trigger=trigger,
        changes=[HistoryChange(test_id="T-1", human_override=ov)],
    )


def loaded(*entries: HistoryFile) -> list[LoadedHistory]:
    return [LoadedHistory(path=Path(f"expectations_{i}.json"), entry=e) for i, e in enumerate(entries)]


def test_original_when_no_history() -> None:
    r = resolve([TEST], [])["T-1"]
    assert r.source == "original" and r.expectations.expected_primary == ["a"]


def test_latest_calibration_wins_over_original_and_earlier_calibration() -> None:
    r = resolve([TEST], loaded(calibration(3, "c"), calibration(1, "b")))["T-1"]
    assert r.source == "opus_2026-11-03" and r.expectations.expected_primary == ["c"]


def test_override_beats_earlier_calibration() -> None:
    r = resolve([TEST], loaded(calibration(1, "c"), override(2, "h")))["T-1"]
    assert r.source == "human_override_2026-11-02" and r.expectations.expected_primary == ["h"]
    assert r.conflict is None


def test_override_older_than_later_calibration_still_wins_and_flags_conflict() -> None:
    r = resolve([TEST], loaded(override(1, "h"), calibration(5, "c")))["T-1"]
    assert r.source == "human_override_2026-11-01"
    assert r.expectations.expected_primary == ["h"]
    assert r.conflict is not None
    assert r.conflict.calibration_source == "opus_2026-11-05"
    assert r.conflict.proposed.expected_primary == ["c"]


def test_later_calibration_agreeing_with_override_is_no_conflict() -> None:
    r = resolve([TEST], loaded(override(1, "h"), calibration(5, "h")))["T-1"]
    assert r.conflict is None and r.source.startswith("human_override")


def test_conflict_is_flagged_then_cleared_by_a_later_agreeing_calibration() -> None:
    flagged = resolve([TEST], loaded(override(1, "h"), calibration(5, "c")))["T-1"]
    assert flagged.conflict is not None and flagged.conflict.proposed.expected_primary == ["c"]
    cleared = resolve([TEST], loaded(override(1, "h"), calibration(5, "c"), calibration(7, "h")))["T-1"]
    assert cleared.conflict is None and cleared.source == "human_override_2026-11-01"


def test_conflicts_compare_expectations_as_sets() -> None:
    standing = Expectations(expected_primary=["h", "k"], expected_secondary=["s", "t"])
    ov = HumanOverride(
        expected_primary=["h", "k"],
        expected_secondary=["s", "t"],
        override_date="2026-11-01",
        by="dr. lee",
        reason="clinical judgment",
    )
    entry = HistoryFile(
        version=at(1),
        calibration_trigger="human_override",
        changes=[HistoryChange(test_id="T-1", human_override=ov)],
    )
    reordered = Expectations(expected_primary=["k", "h"], expected_secondary=["t", "s"])
    later = calibration(5, "x").model_copy(
        update={
            "changes": [HistoryChange(test_id="T-1", updated=reordered, opus_reasoning="same, reordered")]
        }
    )
    r = resolve([TEST], loaded(entry, later))["T-1"]
    assert r.conflict is None and r.expectations == standing


def test_withdrawn_override_lets_latest_calibration_apply() -> None:
    r = resolve([TEST], loaded(override(1, "h"), calibration(5, "c"), override(6, "", withdraw=True)))["T-1"]
    assert r.source == "opus_2026-11-05" and r.expectations.expected_primary == ["c"]
    assert r.conflict is None


def test_as_of_ignores_later_history() -> None:
    history = loaded(calibration(1, "b"), calibration(9, "c"))
    assert resolve([TEST], history, as_of=at(5))["T-1"].source == "opus_2026-11-01"


def test_source_summary_counts_each_kind() -> None:
    history = loaded(calibration(1, "c"), calibration(1, "y", test_id="T-2"), override(2, "h"))
    summary = source_summary(r.source for r in resolve([TEST, OTHER], history).values())
    assert summary == {"original": 0, "opus": 1, "human_override": 1}


def test_append_never_overwrites_and_round_trips(tmp_path: Path) -> None:
    first = append_history(tmp_path, calibration(1, "b"))
    second = append_history(tmp_path, calibration(1, "c"))
    assert first.name == "expectations_2026-11-01.json"
    assert second.name == "expectations_2026-11-01_2.json"
    problems: list[Problem] = []
    history = load_history(tmp_path, problems)
    assert problems == []
    assert resolve([TEST], history)["T-1"].expectations.expected_primary == ["c"]
    assert not list(tmp_path.glob(".tmp-*"))


def _append_many(directory: str, primary: str, n: int) -> None:
    for _ in range(n):
        append_history(Path(directory), calibration(1, primary))


def test_two_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), p, 10)) for p in ("b", "c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    problems: list[Problem] = []
    history = load_history(tmp_path, problems)
    assert problems == []
    assert len(history) == 20
    primaries = sorted(
        h.entry.changes[0].updated.expected_primary[0] for h in history if h.entry.changes[0].updated
    )
    assert primaries == ["b"] * 10 + ["c"] * 10
