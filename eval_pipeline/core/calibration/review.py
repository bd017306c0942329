"""A dry run's proposals as a review file: decided per test by a human, then applied once.

A dry run pays for every proposal; its review file keeps them (with the raw responses) so a
reviewer can accept, reject or edit each and later apply exactly the accepted ones without calling
the model again. It is published under `calibration/reviews/` with a fresh name, then replaced
atomically, under a lock, as decisions are recorded. Rejections stay: they are the human's "no",
which the agreement report counts. A review is applied at most once (`applied`; the history file
carries its id), and only against the KB and semantic bank it was made for unless forced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

from filelock import FileLock
from pydantic import Field

from eval_pipeline.core.calibration.proposals import CallRecord, ProposalDiff, Scope
from eval_pipeline.core.calibration.records import CalibrationRecord, CalibrationRun
from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.fileio import atomic_write_text, publish_new, read_json_model
from eval_pipeline.core.inputs.banks import Expectations, SemanticTest
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.history_file import HistoryChange, HistoryFile, Trigger
from eval_pipeline.core.inputs.kb import canonical_json, sha256_text

REVIEWS_DIR = "reviews"
REVIEW_SCHEMA_VERSION: Literal[1] = 1
LOCK_TIMEOUT_S = 60

Decision = Literal["pending", "accepted", "rejected", "edited"]


class ReviewError(BadInput, ValueError):
    """A review file cannot be read, decided or applied as asked (one line, nothing written)."""


def bank_hash(tests: Iterable[SemanticTest]) -> str:
    """The semantic tests' content, so a review made for other tests is recognised as stale."""
    return sha256_text(canonical_json([t.model_dump(mode="json") for t in tests]))


class ReviewItem(FrozenModel):
    """One proposal and the reviewer's decision about it."""

    diff: ProposalDiff
    topics: list[str] = Field(default_factory=list)
    decision: Decision = "pending"
    edited: Expectations | None = Field(default=None, description="The reviewer's version (edited)")
    note: str | None = Field(default=None, description="Why the reviewer rejected or edited")
    decided_by: str | None = None

    @property
    def test_id(self) -> str:
        return self.diff.test_id

    @property
    def reviewable(self) -> bool:
        """Only proposals that would be written need a decision; the rest agree with today."""
        return self.diff.recorded

    @property
    def applied_expectations(self) -> Expectations:
        return self.edited if self.edited is not None else self.diff.proposed


class AppliedReview(FrozenModel):
    applied_at: datetime
    by: str
    history_file: str


class ReviewFile(FrozenModel):
    """calibration/reviews/review_<calibration id>.json (versioned)."""

    schema_version: Literal[1] = REVIEW_SCHEMA_VERSION
    review_id: str
    created_at: datetime
    scope: Scope
    trigger: Trigger
    model: str
    prompt_version: str
    kb_version: str
    kb_hash: str
    bank_hash: str
    record: CalibrationRecord = Field(description="The dry run: usage, cost, invalid or errored tests")
    items: list[ReviewItem]
    calls: list[CallRecord] = Field(description="Every raw response (or error), verbatim")
    applied: AppliedReview | None = None

    def item(self, test_id: str) -> ReviewItem:
        found = next((i for i in self.items if i.test_id == test_id), None)
        if found is None:
            raise ReviewError(f"{self.review_id}: {test_id} has no proposal in this review")
        if not found.reviewable:
            message = "proposal changes nothing; there is nothing to decide"
            raise ReviewError(f"{self.review_id}: {test_id}'s {message}")
        return found

    @property
    def to_review(self) -> list[ReviewItem]:
        return [i for i in self.items if i.reviewable]

    def count(self, decision: Decision) -> int:
        return sum(i.decision == decision for i in self.to_review)


def review_from_run(run: CalibrationRun, tests: Sequence[SemanticTest]) -> ReviewFile:
    """Every valid proposal (unchanged ones too: the agreement report uses them), all pending.

    `tests` is the whole semantic bank, whatever the scope: its hash marks the review stale when
    any test changes before the review is applied."""
    topics = {t.test_id: t.topics for t in tests}
    record = run.record()
    return ReviewFile(
        review_id=run.calibration_id,
        created_at=run.started,
        **record.model_dump(include={"scope", "trigger", "model", "prompt_version", "kb_version", "kb_hash"}),
        bank_hash=bank_hash(tests),
        record=record,
        items=[ReviewItem(diff=d, topics=topics.get(d.test_id, [])) for d in run.diffs],
        calls=run.calls,
    )


def decide(
    review: ReviewFile,
    test_id: str,
    decision: Literal["accepted", "rejected", "edited"],
    *,
    edited: Expectations | None = None,
    note: str | None = None,
    by: str | None = None,
) -> ReviewFile:
    """The review with one decision recorded (a later decision replaces an earlier one)."""
    if review.applied is not None:
        raise ReviewError(f"{review.review_id}: already applied; its decisions are final")
    if (decision == "edited") != (edited is not None):
        raise ReviewError(f"{review.review_id}: {test_id}: an edit needs expectations, and only an edit")
    current = review.item(test_id)
    updated = current.model_copy(
        update={"decision": decision, "edited": edited, "note": note, "decided_by": by}
    )
    items = [updated if i is current else i for i in review.items]
    return review.model_copy(update={"items": items})


def stale_reasons(review: ReviewFile, kb_hash: str, tests_hash: str) -> list[str]:
    hashes = (("the KB", review.kb_hash, kb_hash), ("the semantic bank", review.bank_hash, tests_hash))
    return [
        f"{what} changed since the dry run ({was[:12]} -> {now[:12]})"
        for what, was, now in hashes
        if was != now
    ]


def reviewed_history(review: ReviewFile, *, by: str, version: datetime) -> HistoryFile:
    """Exactly the accepted and edited proposals, as one history entry naming the reviewer."""
    chosen = [i for i in review.to_review if i.decision in ("accepted", "edited")]
    if not chosen:
        raise ReviewError(f"{review.review_id}: no accepted or edited proposal to apply")
    changes = [
        HistoryChange(
            test_id=i.test_id,
            previous=i.diff.previous,
            updated=i.applied_expectations,
            opus_reasoning=i.diff.reasoning,
            review_decision="edited" if i.decision == "edited" else "accepted",
            review_note=i.note,
        )
        for i in chosen
    ]
    return HistoryFile(
        version=version,
        calibration_trigger=review.trigger,
        **review.model_dump(include={"kb_version", "kb_hash", "model", "prompt_version"}),
        reviewed_by=by,
        review_id=review.review_id,
        changes=changes,
        changed_count=len(changes),
        unchanged_count=len(review.items) - len(changes),
    )


# --- files --------------------------------------------------------------------------------------------


def write_review(calibration_dir: Path, review: ReviewFile) -> Path:
    """Publish a new review file under a free name; an existing one is never replaced."""
    return publish_new(
        calibration_dir / REVIEWS_DIR, f"review_{review.review_id}", review.model_dump_json(indent=2)
    )


def read_review(path: Path) -> ReviewFile:
    return read_json_model(path, ReviewFile, ReviewError, "review file")


def save_review(path: Path, review: ReviewFile) -> None:
    atomic_write_text(path, review.model_dump_json(indent=2))


def review_lock(path: Path) -> FileLock:
    """Held while a review is decided or applied, so two reviewers cannot both apply it."""
    return FileLock(str(path.with_name(f".{path.name}.lock")), timeout=LOCK_TIMEOUT_S)


def read_reviews(calibration_dir: Path) -> tuple[list[ReviewFile], list[str]]:
    """Every review file under the calibration directory, and the ones that could not be read."""
    reviews: list[ReviewFile] = []
    unreadable: list[str] = []
    for path in sorted((calibration_dir / REVIEWS_DIR).glob("review_*.json")):
        try:
            reviews.append(read_review(path))
        except ReviewError as exc:
            unreadable.append(str(exc))
    return reviews, unreadable
