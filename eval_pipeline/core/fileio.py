"""Atomic file writes (a reader sees the old file or the new one, never a partial one) and reads
of JSON files into models with one-line errors."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from eval_pipeline.core.inputs.reading import MAX_DOCUMENT_BYTES, BadFile, read_input_text

M = TypeVar("M", bound=BaseModel)


class TextFile(Protocol):
    """What a read needs of a path: a local `Path`, or an object store's (the caller's UPath)."""

    def read_text(self, encoding: str | None = ..., errors: str | None = ...) -> str: ...


def _current_umask() -> int:
    # The only portable way to read the umask is to set it and put it back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def _synced_temp(directory: Path, suffix: str, data: bytes) -> str:
    """`data` in a new temp file beside its destination, on disk, with the mode a plain `open`
    would give (0666 & ~umask: `mkstemp` creates 0600, and a rename or link keeps that)."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` at once: a reader sees the old file or the new, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _synced_temp(path.parent, path.suffix, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def publish_new(directory: Path, stem: str, text: str) -> Path:
    """Publish `text` as `<stem>.json`, or `<stem>_2.json`, … — whichever name is still free.
    Never replaces a file, also when another process publishes the same stem at once."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = _synced_temp(directory, ".json", text.encode("utf-8"))
    try:
        n = 1
        while True:
            target = directory / (f"{stem}.json" if n == 1 else f"{stem}_{n}.json")
            try:
                os.link(tmp, target)  # atomic, and fails rather than replace an existing file
                return target
            except FileExistsError:
                n += 1
    finally:
        os.unlink(tmp)


def atomic_write_json(path: Path, data: object) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def read_json_model(path: TextFile, model: type[M], error: type[Exception], what: str) -> M:
    """A JSON file as `model`, or `error` with one line naming the file and the first bad field."""
    try:
        # A local path is checked first (a FIFO would block the read); an object store has none.
        if isinstance(path, Path):
            text = read_input_text(path, MAX_DOCUMENT_BYTES)
        else:
            text = path.read_text(encoding="utf-8")
    except BadFile as exc:
        raise error(f"{path}: cannot read {what} ({exc.message})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read {what} ({type(exc).__name__})") from None
    return parse_json_model(text, path, model, error, what)


def parse_json_model(text: str, source: object, model: type[M], error: type[Exception], what: str) -> M:
    """JSON text already read from `source` as `model`, or `error` with one line naming it."""
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise error(f"{source}: {where}: {first['msg']} (not a valid {what})") from None
