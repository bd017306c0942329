"""Expectation history files (specification §4.4 plus provenance): the schema of the files
calibrations and human overrides write, as read from disk.

A history file is written once and never changed (expectations/history.py writes them);
resolution (expectations/resolution.py) replays them in order.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from eval_pipeline.core.inputs.banks import Expectations

HISTORY_GLOB = "expectations_*.json"

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


class HumanOverride(BaseModel):
    """A clinician's decision for one test. `withdraw=True` ends the standing override."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expected_primary: list[str] = Field(default_factory=list)
    expected_secondary: list[str] = Field(default_factory=list)
    not_expected: list[str] = Field(default_factory=list)
    rank_check: list[dict[str, str]] = Field(default_factory=list)
    override_date: str
    by: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    withdraw: bool = False

    @model_validator(mode="after")
    def _primary_unless_withdrawal(self) -> HumanOverride:
        if not self.withdraw and not self.expected_primary:
            raise ValueError("an override needs at least one expected_primary")
        return self

    def expectations(self) -> Expectations:
        return Expectations.model_validate(
            {
                "expected_primary": self.expected_primary,
                "expected_secondary": self.expected_secondary,
                "not_expected": self.not_expected,
                "rank_check": self.rank_check,
            }
        )


class HistoryChange(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

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


class HistoryFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

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


class LoadedHistory(BaseModel):
    """A history file as read from disk; the path orders same-day files and names problems."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    entry: HistoryFile


def history_sort_key(entry: HistoryFile, path: Path) -> tuple[datetime, str]:
    """Replay order: by timestamp, then by file name (suffix _2, _3 … for same-day files)."""
    parts = path.stem.split("_")
    seq = int(parts[-1]) if len(parts) > 2 and parts[-1].isdigit() else 1
    return (entry.version, f"{seq:06d}")
