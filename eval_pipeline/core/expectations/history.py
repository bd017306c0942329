"""The append-only writer of expectation history files (their schema: inputs/history_file.py)."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.core.fileio import publish_new
from eval_pipeline.core.inputs.history_file import HistoryFile

LOCK_NAME = ".history.lock"


def append_history(directory: Path, entry: HistoryFile) -> Path:
    """Write `entry` as a new history file. The lock numbers same-day files in the order written;
    the publish (temp file, hard link) never shows a partial file nor replaces one, lock or not."""
    from filelock import FileLock  # here: reading expectations (every run) never loads it

    payload = entry.model_dump_json(indent=2, exclude_none=False)
    directory.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory / LOCK_NAME), timeout=60):
        return publish_new(directory, f"expectations_{entry.date}", payload)
