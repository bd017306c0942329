"""What a calibration leaves behind: the run with its calls and outcomes, the log record, the
raw-response file, and how much of each call read the cached KB prefix."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.calibration.prompt import PROMPT_VERSION
from eval_pipeline.core.calibration.proposals import (
    CalibrationOutcome,
    CallRecord,
    Mode,
    ProposalDiff,
    Scope,
    build_history,
)
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.history_file import HistoryFile, Trigger
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.mechanisms.retrieval import Usage


def cache_read_coverage(calls: Sequence[CallRecord], prefix_tokens: int) -> list[float]:
    """Share of the KB prefix read from cache by every answered call after the first."""
    answered = [c for c in calls if c.response is not None]
    if prefix_tokens <= 0:
        return []
    return [c.usage.cache_read_input_tokens / prefix_tokens for c in answered[1:]]


class Rejected(FrozenModel):
    test_id: str
    status: Literal["rejected", "errored"]
    reason: str


class CalibrationRecord(FrozenModel):
    """One line of calibration/calibration_log.json: an applied calibration, what it cost."""

    calibration_id: str
    started_at: datetime
    duration_s: float
    scope: Scope
    trigger: Trigger
    test_ids: list[str]
    added_entities: list[str] = Field(default_factory=list)
    model: str
    prompt_version: str
    kb_version: str
    kb_hash: str
    mode: Mode
    changed: int
    unchanged: int
    conflicts: list[str] = Field(default_factory=list, description="Changed tests with a standing override")
    rejected: list[Rejected] = Field(default_factory=list)
    usage: Usage
    cost_usd: float = Field(description="Calibration cost: never part of the system-under-test cost")
    kb_prefix_tokens: int
    min_cache_read_coverage: float | None = None
    # Filled in as the files are written (files.apply_calibration, or `calibrate --apply-from` for
    # a reviewed dry run, whose raw responses live in its review file).
    history_file: str | None = None
    response_file: str | None = None
    reviewed_by: str | None = None


class CalibrationLog(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    schema_version: int = 1
    records: list[CalibrationRecord] = Field(default_factory=list)


class ResponseFile(FrozenModel):
    """calibration/opus_responses/calibration_<timestamp>.json: every raw response, verbatim."""

    calibration_id: str
    model: str
    prompt_version: str
    kb_hash: str
    mode: Mode
    calls: list[CallRecord]


class CalibrationRun(FrozenModel):
    """One finished calibration: the calls, what they mean, and the files it would write."""

    scope: Scope
    trigger: Trigger
    added_entities: list[str] = Field(default_factory=list)
    model: str
    mode: Mode
    kb: KnowledgeBase
    started: datetime
    duration_s: float
    prefix_tokens: int
    calls: list[CallRecord]
    outcomes: list[CalibrationOutcome]
    diffs: list[ProposalDiff]
    cost_usd: float

    @property
    def calibration_id(self) -> str:
        """A file-name-safe UTC timestamp, e.g. 2026-11-22T14-30-05Z."""
        return self.started.strftime("%Y-%m-%dT%H-%M-%SZ")

    @property
    def usage(self) -> Usage:
        return sum((c.usage for c in self.calls), Usage())

    @property
    def coverage(self) -> list[float]:
        return cache_read_coverage(self.calls, self.prefix_tokens)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def changed(self) -> list[ProposalDiff]:
        return [d for d in self.diffs if d.changed]

    def history(self) -> HistoryFile | None:
        """None when no test got a valid proposal: there is nothing to resolve from."""
        if not self.diffs:
            return None
        return build_history(
            self.diffs, version=self.started, trigger=self.trigger, kb=self.kb, model=self.model
        )

    def record(self) -> CalibrationRecord:
        coverage = self.coverage
        return CalibrationRecord(
            calibration_id=self.calibration_id,
            started_at=self.started,
            duration_s=round(self.duration_s, 3),
            **self.model_dump(include={"scope", "trigger", "added_entities", "model", "mode"}),
            test_ids=[c.test_id for c in self.calls],
            prompt_version=PROMPT_VERSION,
            kb_version=self.kb.kb_version,
            kb_hash=self.kb.content_hash,
            changed=len(self.changed),
            unchanged=len(self.diffs) - len(self.changed),
            conflicts=[d.test_id for d in self.diffs if d.conflict],
            rejected=[
                Rejected(test_id=o.test_id, status=o.status, reason=o.reason or "")
                for o in self.outcomes
                if o.status != "proposed"
            ],
            usage=self.usage,
            cost_usd=round(self.cost_usd, 6),
            kb_prefix_tokens=self.prefix_tokens,
            min_cache_read_coverage=round(min(coverage), 4) if coverage else None,
        )

    def responses(self) -> ResponseFile:
        return ResponseFile(
            calibration_id=self.calibration_id,
            model=self.model,
            prompt_version=PROMPT_VERSION,
            kb_hash=self.kb.content_hash,
            mode=self.mode,
            calls=self.calls,
        )
