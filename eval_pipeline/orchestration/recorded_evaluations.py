"""Full evaluations recorded beside the project instance, so that an unchanged rerun can let one
stand without loading Dagster (which costs more than the check itself).

Whenever the instance says a date's evaluation stands (orchestration/instance_evaluations.py), `run`
records its fingerprint, runs and results-file hashes, with a mark of the instance's stored
history: the size, time and inode of each file the project's SQLite storage keeps runs and events
in (orchestration/instance_storage.py), and the instance's configuration. Any run,
materialisation or observation since changes a file there, and so the mark; a rerun finding the
same fingerprint and the same mark finds the instance as it was when the evaluation was known to
stand. Any doubt (another mark, another storage, an unreadable record) falls back to asking the
instance. No Dagster import here: this module is the fast path.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from eval_pipeline.core.fileio import atomic_write_text

RECORDS_DIR = "recorded_evaluations"
HISTORY_DIR = "history"  # where the project's SQLite storage keeps runs and events
CONFIG_FILE = "dagster.yaml"


class RecordedEvaluation(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    date: str
    fingerprint: str
    run_ids: list[str]
    made_at: datetime | None
    results_sha256: dict[str, str]  # model -> the sha256 of the results.json its run wrote
    instance_mark: str


def instance_mark(home: Path) -> str | None:
    """The mark of the instance's configuration and stored history; None when unreadable."""
    digest = hashlib.sha256()
    try:
        digest.update((home / CONFIG_FILE).read_bytes())
        # -shm files index a write-ahead log for readers; the log and databases hold the data.
        files = sorted(p for p in (home / HISTORY_DIR).rglob("*") if not p.name.endswith("-shm"))
        for path in files:
            st = path.stat()
            if path.is_file():
                name = path.relative_to(home).as_posix()
                digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
    except OSError:  # a file came or went while reading: no mark to compare
        return None
    return digest.hexdigest()


def _record_file(home: Path, date: str) -> Path:
    return home / RECORDS_DIR / f"{date}.json"


def read_record(home: Path, date: str) -> RecordedEvaluation | None:
    try:
        return RecordedEvaluation.model_validate_json(_record_file(home, date).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):  # none, or not one this code wrote: ask the instance
        return None


def write_record(home: Path, record: RecordedEvaluation) -> None:
    atomic_write_text(_record_file(home, record.date), record.model_dump_json(indent=2))
