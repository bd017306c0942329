"""Atomic file writes (a reader sees the old file or the new one, never a partial one), reads of
regular files only, under a size cap (a FIFO would block a read forever, a device never ends), and
reads of JSON files into models with one-line errors."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.system_limits import exhausted, writing_to

M = TypeVar("M", bound=BaseModel)

# One cap for every input file: far above any real KB entity, bank or models file (the sample's
# largest is ~100 kB), far below what would exhaust memory when parsed.
MAX_INPUT_BYTES = 5 * 1024 * 1024
# Documents this tool wrote (results, reviews, logs) grow with the banks: a looser cap, the same
# refusal of FIFOs and devices.
MAX_DOCUMENT_BYTES = 512 * 1024 * 1024
_GROWTH_CHUNK = 1 << 20  # how a file that grew after its stat is read on


class BadFile(BadInput, ValueError):
    """Why a file cannot be taken as input; `item` and `field` say where inside it, if anywhere."""

    def __init__(self, message: str, line: int | None = None, item: str = "-", field: str = "-") -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.item = item
        self.field = field


def _kind(mode: int) -> str:
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket"}
    found = [name for test, name in kinds.items() if test(mode)]
    return found[0] if found else "a device"


def read_input_text(path: Path, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes, else BadFile naming why."""
    try:
        # stat before open: opening a FIFO for reading blocks until a writer comes.
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise BadFile(f"cannot read file: it is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise BadFile(f"file is {info.st_size:,} bytes, over the {limit:,}-byte input limit")
        with open(path, "rb") as handle:
            data = _read_up_to(handle, info.st_size, limit)
    except OSError as exc:
        if (out := exhausted(exc, path)) is not None:  # the machine's limit, not the file's fault
            raise out from None
        raise BadFile(f"cannot read file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise BadFile(f"file is over the {limit:,}-byte input limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadFile(f"not UTF-8 text (byte {exc.start}): save it as UTF-8") from None


def _read_up_to(handle: BinaryIO, size: int, limit: int) -> bytes:
    """The file's bytes, read into a buffer of the size it had when stat'ed (`read(n)` allocates
    n bytes at once: a cap-sized buffer would ask for 512 MB to read a 2 kB document); if it has
    grown since, the rest in chunks, stopping past `limit`."""
    data = handle.read(size + 1)
    chunks = [data]
    total = len(data)
    while total > size and total <= limit and (chunk := handle.read(_GROWTH_CHUNK)):
        chunks.append(chunk)
        total += len(chunk)
    return data if len(chunks) == 1 else b"".join(chunks)


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
    with writing_to(path):
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
    with writing_to(directory / f"{stem}.json"):
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
