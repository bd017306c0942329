"""Atomic file writes (a reader sees the old file or the new one, never a partial one) and reads
of JSON files into models with one-line errors."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def _current_umask() -> int:
    # The only portable way to read the umask is to set it and put it back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def temp_file(directory: str | Path, suffix: str = "") -> tuple[int, str]:
    """A temp file for an atomic write, with the mode a plain `open` would give (0666 & ~umask):
    `mkstemp` creates 0600, and the rename or link would keep that on the final file."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    os.fchmod(fd, 0o666 & ~_UMASK)
    return fd, tmp


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file(path.parent, path.suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: object) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def read_json_model(path: Path, model: type[M], error: type[Exception], what: str) -> M:
    """A JSON file as `model`, or `error` with one line naming the file and the first bad field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read {what} ({type(exc).__name__})") from None
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise error(f"{path}: {where}: {first['msg']} (not a valid {what})") from None
