"""Where an applied calibration lands, append-only: history file, raw responses, log record.

- `test_banks/semantic/history/expectations_<date>[_N].json` through `history_file.append_history`.
- `calibration/opus_responses/calibration_<timestamp>[_N].json`: every raw response, published by
  hard-linking a finished temp file to a free name, so an existing file is never replaced.
- `calibration/calibration_log.json`: one record appended per applied calibration under a file
  lock (read, append, atomic replace), so two calibrations finishing together both land. A log
  that cannot be read is an error, never silently restarted: that would drop past records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.core.dates import now_utc
from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.fileio import atomic_write_text, publish_new, read_json_model
from eval_pipeline.core.inputs.history_file import append_history
from eval_pipeline.core.scoring.run_document import (
    RESULTS_FILE,
    RunDocument,
    model_dirs,
    read_document,
    result_dates,
)

# The log's models load with a log to read or write: every run asks its date's cost, and on a
# project that never calibrated there is none.
if TYPE_CHECKING:
    from eval_pipeline.core.calibration.records import CalibrationLog, CalibrationRecord, CalibrationRun

RESPONSES_DIR = "opus_responses"
LOG_FILE = "calibration_log.json"
LOCK_NAME = ".calibration.lock"
LOCK_TIMEOUT_S = 60


class CalibrationFileError(BadInput):
    """A calibration file exists but cannot be read; nothing was written over it."""


def read_log(path: Path) -> CalibrationLog:
    from eval_pipeline.core.calibration.records import CalibrationLog

    if not path.exists():
        return CalibrationLog()
    return read_json_model(path, CalibrationLog, CalibrationFileError, "calibration log")


def calibration_cost(calibration_dir: Path, date: str) -> float:
    """What calibrations cost on `date`, reported apart from the system under test."""
    if not (calibration_dir / LOG_FILE).exists():
        return 0.0
    records = read_log(calibration_dir / LOG_FILE).records
    return round(sum(r.cost_usd for r in records if r.started_at.date().isoformat() == date), 6)


def append_log(path: Path, record: CalibrationRecord) -> None:
    from filelock import FileLock  # here: a run that only reads the log never loads it

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.parent / LOCK_NAME), timeout=LOCK_TIMEOUT_S):
        log = read_log(path)
        log.records.append(record)
        atomic_write_text(path, log.model_dump_json(indent=2) + "\n")


@dataclass(frozen=True)
class AppliedFiles:
    history: Path | None
    responses: Path
    log: Path


def apply_calibration(history_dir: Path, calibration_dir: Path, run: CalibrationRun) -> AppliedFiles:
    """Write the three files; raw responses first, so what was paid for survives a later failure."""
    responses = run.responses()
    stem = f"calibration_{responses.calibration_id}"
    response_path = publish_new(calibration_dir / RESPONSES_DIR, stem, responses.model_dump_json())
    history = run.history()
    if history is not None:
        # Stamped when written, not when the run started: a batch can take hours, and history
        # replays in timestamp order, so an override made meanwhile must sort before it.
        history = history.model_copy(update={"version": now_utc()})
    history_path = append_history(history_dir, history) if history is not None else None
    log_path = calibration_dir / LOG_FILE
    record = run.record().model_copy(
        update={
            "history_file": str(history_path) if history_path else None,
            "response_file": str(response_path),
        }
    )
    append_log(log_path, record)
    return AppliedFiles(history_path, response_path, log_path)


def latest_documents(results_dir: Path) -> tuple[list[RunDocument], list[str]]:
    """Each model's newest results.json under `results_dir`, and the ones that could not be read."""
    docs: list[RunDocument] = []
    unreadable: list[str] = []
    for model_dir in model_dirs(results_dir):
        dates = result_dates(model_dir)
        if not dates:
            continue
        path = model_dir / dates[-1] / RESULTS_FILE
        try:
            docs.append(read_document(path))
        except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
            unreadable.append(str(path))
    return docs, unreadable
