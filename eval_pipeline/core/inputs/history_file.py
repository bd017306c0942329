"""Expectation history files (specification §4.4 plus provenance): calibrations and human
overrides append them (`append_history`), never to be rewritten; resolution replays them in order."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, StrictBool, model_validator

from eval_pipeline.core.fileio import publish_new
from eval_pipeline.core.inputs.banks import Expectations, Gain
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.kb import Note

HISTORY_GLOB = "expectations_*.json"
# What the writer names a file: the UTC date of its version, then _2, _3 … for more that day.
HISTORY_NAME = re.compile(r"expectations_(\d{4}-\d{2}-\d{2})(?:_([2-9]|[1-9]\d+))?\.json")
HISTORY_NAME_SHAPE = "expectations_YYYY-MM-DD.json or expectations_YYYY-MM-DD_N.json"
LOCK_NAME = ".history.lock"

Trigger = Literal[
    "manual",
    "full",
    "kb_change",
    "kb_entity_added",
    "kb_entity_changed",
    "scheduled",
    "human_override",
    "human_override_withdrawn",
]


class HumanOverride(FrozenModel):
    """A clinician's decision for one test. `withdraw=True` ends the standing override."""

    expected_primary: list[str] = Field(default_factory=list)
    expected_any: list[str] = Field(default_factory=list, description="At least one must be selected")
    relevant: dict[str, Gain] = Field(default_factory=dict, description="Graded judgments: entity -> gain")
    expected_secondary: list[str] = Field(default_factory=list)
    not_expected: list[str] = Field(default_factory=list)
    rank_check: list[dict[str, str]] = Field(default_factory=list)
    override_date: str
    by: Note
    reason: Note
    withdraw: StrictBool = False

    @model_validator(mode="after")
    def _primary_unless_withdrawal(self) -> HumanOverride:
        relevant = self.expected_primary or self.expected_any or any(g > 0 for g in self.relevant.values())
        if not self.withdraw and not relevant:
            raise ValueError(
                "an override needs expected_primary, expected_any or a relevant entity with gain > 0"
            )
        return self

    def expectations(self) -> Expectations:
        return Expectations.model_validate(self.model_dump(include=set(Expectations.model_fields)))


class HistoryChange(FrozenModel):
    test_id: str
    previous: Expectations | None = None
    updated: Expectations | None = None
    opus_reasoning: str | None = None
    human_override: HumanOverride | None = None
    # Set when a reviewed dry run was applied (`calibrate --apply-from`): `edited` means `updated`
    # is the reviewer's edit of the model's proposal, and `review_note` says why.
    review_decision: Literal["accepted", "edited"] | None = None
    review_note: str | None = None

    @model_validator(mode="after")
    def _has_payload(self) -> HistoryChange:
        if self.updated is None and self.human_override is None:
            raise ValueError("a change needs `updated` or `human_override`")
        return self


class HistoryFile(FrozenModel):
    version: datetime = Field(description="UTC timestamp of the calibration or override")
    calibration_trigger: Trigger
    kb_version: str | None = None
    kb_hash: str | None = None
    model: str | None = Field(default=None, description="Calibrator model id; None for humans")
    prompt_version: str | None = None
    reviewed_by: str | None = Field(default=None, description="Who reviewed the proposals before applying")
    review_id: str | None = Field(default=None, description="The review file applied (at most once)")
    changes: list[HistoryChange]
    unchanged_count: int = 0
    changed_count: int = 0

    @property
    def date(self) -> str:
        return self.version.astimezone(UTC).date().isoformat()


class LoadedHistory(FrozenModel):
    """A history file as read from disk; the path orders same-day files and names problems."""

    path: Path
    entry: HistoryFile


def history_sort_key(entry: HistoryFile, path: Path) -> tuple[datetime, str]:
    """Replay order: by timestamp, then by file name (suffix _2, _3 … for same-day files)."""
    parts = path.stem.split("_")
    seq = int(parts[-1]) if len(parts) > 2 and parts[-1].isdigit() else 1
    return (entry.version, f"{seq:06d}")


def name_problem(name: str, entry: HistoryFile | None = None) -> str | None:
    """Why `name` cannot hold a history file (or, given its content, this one), or None. The
    replay order comes from the versions; a name that disagrees with its version means a file
    was renamed or hand-made, and its place in the history is unclear."""
    found = HISTORY_NAME.fullmatch(name)
    if found is None:
        return f"not a history file name (expected {HISTORY_NAME_SHAPE})"
    try:
        named = date.fromisoformat(found.group(1)).isoformat()
    except ValueError:
        return f"'{found.group(1)}' in the file name is not a date"
    if entry is not None and entry.date != named:
        return f"the version's UTC date is {entry.date}, the file name says {named}: out of order"
    return None


def append_history(directory: Path, entry: HistoryFile) -> Path:
    """Write `entry` as a new history file. The lock numbers same-day files in the order written;
    the publish (temp file, hard link) never shows a partial file nor replaces one, lock or not."""
    from filelock import FileLock  # here: reading expectations (every run) never loads it

    payload = entry.model_dump_json(indent=2, exclude_none=False)
    directory.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory / LOCK_NAME), timeout=60):
        return publish_new(directory, f"expectations_{entry.date}", payload)
