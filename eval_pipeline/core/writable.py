"""Folders a command will write into, checked before it spends anything: a results folder that is
a file, read-only or on a full disk stops the command before an evaluation and its API spend. A
folder not there yet is not created (bad input found later must leave nothing behind): its
nearest existing ancestor, on the same file system, is probed instead."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from eval_pipeline.core.errors import BadInput, CouldNotEvaluate


class NotWritable(BadInput):
    """A folder the command writes into is a file, or cannot be written (exit 2)."""


class NoSpace(CouldNotEvaluate):
    """A folder the command writes into is on a full disk (exit 3)."""


def _refusal(role: str, path: Path, exc: OSError) -> BadInput | CouldNotEvaluate:
    """The one line that names the folder and why it cannot take the command's files."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return NoSpace(f"{role} {path}: no space left on its disk")
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        return NotWritable(f"{role} {path}: a file is in the way (a folder is needed)")
    return NotWritable(f"{role} {path}: not writable ({exc.strerror or exc})")


def _probe(folder: Path) -> None:
    """A small file made, written to disk and removed in `folder`."""
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-check-")
    try:
        # A full disk may accept the file and refuse only its first block, on sync.
        os.write(fd, b"\0" * 4096)
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(probe)


def require_writable(folders: Iterable[tuple[str, Path]]) -> None:
    """Each (role, folder), or the nearest existing folder above it, takes a new file. Raises
    NotWritable or NoSpace naming the first that fails."""
    for role, path in folders:
        try:
            existing = next(p for p in (path, *path.absolute().parents) if p.exists())
            if not existing.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(existing))
            _probe(existing)
        except OSError as exc:
            raise _refusal(role, path, exc) from None


def require_writable_file(role: str, path: Path) -> None:
    """A file the command will write (atomically, beside itself, its missing folders made first,
    as every output flag does): the nearest existing folder above it must take a new file, and no
    folder may stand where the file goes."""
    if path.is_dir():
        raise NotWritable(f"{role} {path}: a folder is in the way (a file is needed)")
    require_writable([(role, path.absolute().parent)])
