"""The append-only writer of expectation history files (their schema: inputs/history_file.py)."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.core.fileio import publish_new
from eval_pipeline.core.inputs.history_file import HistoryFile

LOCK_NAME = ".history.lock"


def append_history(directory: Path, entry: HistoryFile) -> Path:
    """Write `entry` as a new history file; never overwrites, safe across processes.

    The lock serialises writers (same-day files are numbered in the order written); the
    temp-file + hard-link publish means a reader never sees a partial file and an existing file
    can never be replaced, even without the lock.
    """
    from filelock import FileLock  # here: reading expectations (every run) never loads it

    payload = entry.model_dump_json(indent=2, exclude_none=False)
    directory.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory / LOCK_NAME), timeout=60):
        return publish_new(directory, f"expectations_{entry.date}", payload)
