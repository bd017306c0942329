"""When the machine runs out of something a command needs (disk space, `ulimit -f`, `ulimit -n`),
one line naming the path and the limit, exit 3; a run step is not started without the files it
may need. The OSError often names neither (a failed write or sync names no file; SQLite says "disk
I/O error" and the like): the writer that meets one knows the path, the limit is read here.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eval_pipeline.core.errors import CouldNotEvaluate

# Files SQLite opens for one database (itself, its WAL and shared-memory files) and a margin: a
# process this close to its open-file limit could not open one.
_SQLITE_FILES = 8
# What one in-process run step may open beyond the files already open: Dagster's run and
# event-log databases and its event loop, the step's documents, the embedder's model (an offline
# model's step peaks at 23 more than it starts with), and room for a team system's workers or
# connections.
STEP_FILES = 48


class OutOfResources(CouldNotEvaluate):
    """The disk, a file-size limit or the open-file limit ran out (exit 3)."""


def _soft_limit(which: int) -> int | None:
    soft = resource.getrlimit(which)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def _free_bytes(path: Path) -> int | None:
    for folder in (path, *path.absolute().parents):
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return None


def _open_files(limit: int) -> int | None:
    """How many files this process has open (None where the system does not say)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError as exc:  # listing needs a file of its own: at the limit, that fails too
        return limit if exc.errno == errno.EMFILE else None


def _near_open_file_limit() -> bool:
    """Whether this process has (nearly) as many files open as `ulimit -n` lets it."""
    limit = _soft_limit(resource.RLIMIT_NOFILE)
    if limit is None:
        return False
    return (_open_files(limit) or 0) >= limit - _SQLITE_FILES


def require_spare_files(step: str) -> None:
    """Fail in one line before a run step that may not open the files it needs: short of them it
    fails part-way, inside Dagster or asyncio, and their noise (a half-made event loop's
    "Exception ignored") comes before the cause."""
    limit = _soft_limit(resource.RLIMIT_NOFILE)
    open_now = None if limit is None else _open_files(limit)
    if limit is not None and open_now is not None and limit - open_now < STEP_FILES:
        raise OutOfResources(
            f"too many open files to run {step}: the open-file limit (ulimit -n) is {limit:,}, "
            f"{open_now} are open and a run step needs up to {STEP_FILES} more"
        )


def _no_space(path: Path, quota: bool = False) -> OutOfResources:
    free = _free_bytes(path)
    left = "" if free is None else f" ({free:,} bytes free)"
    what = "the disk quota is used up" if quota else "no space left on the disk"
    return OutOfResources(f"{what} writing {path}{left}")


def _too_large(path: Path) -> OutOfResources:
    limit = _soft_limit(resource.RLIMIT_FSIZE)
    if limit is None:
        return OutOfResources(f"file too large writing {path}: over the file system's largest file")
    return OutOfResources(
        f"file too large writing {path}: the file-size limit (ulimit -f) is {limit:,} bytes"
    )


def _too_many_open(path: Path, system: bool = False) -> OutOfResources:
    if system:
        return OutOfResources(f"too many open files opening {path}: the system's open-file table is full")
    limit = _soft_limit(resource.RLIMIT_NOFILE)
    shown = "unlimited" if limit is None else f"{limit:,}"
    return OutOfResources(f"too many open files opening {path}: the open-file limit (ulimit -n) is {shown}")


def exhausted(exc: OSError, path: str | Path | None = None) -> OutOfResources | None:
    """The one line for `exc` if it says a resource ran out, else None. `path`: the file the
    caller was writing, when `exc` does not name it."""
    where = Path(path if path is not None else exc.filename or "a file")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _no_space(where, quota=exc.errno == errno.EDQUOT)
    if exc.errno == errno.EFBIG:
        return _too_large(where)
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return _too_many_open(where, system=exc.errno == errno.ENFILE)
    return None


def sqlite_exhausted(message: str, database: str | Path) -> OutOfResources | None:
    """The one line for a SQLite error `message` on `database` if a resource ran out, else None.
    SQLite hides the errno: a full disk is "database or disk is full"; the file-size limit shows
    as "disk I/O error" (told apart by a limit being set), the open-file limit as "unable to open
    database file" (told apart by this process being at its limit)."""
    path = Path(database)
    if "database or disk is full" in message:
        return _no_space(path)
    if "disk I/O error" in message and _soft_limit(resource.RLIMIT_FSIZE) is not None:
        return _too_large(path)
    if "unable to open database file" in message and _near_open_file_limit():
        return _too_many_open(path)
    return None


@contextmanager
def writing_to(path: str | Path) -> Iterator[None]:
    """Around writes to `path`: an OSError that says the disk, the file-size limit or the open
    files ran out becomes `OutOfResources` naming `path` (a failed write or sync names no file)."""
    try:
        yield
    except OSError as exc:
        out = exhausted(exc, path)
        if out is None:
            raise
        raise out from None
