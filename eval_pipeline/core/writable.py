"""Folders a command will write into, checked before it spends anything: each is created when
missing and a file is made and removed in it, so a results folder that is a file, read-only or
on a full disk stops the command at once instead of after a whole evaluation and its API spend."""

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


def require_writable(folders: Iterable[tuple[str, Path]]) -> None:
    """Each (role, folder): created when missing, then a small file written to disk in it and
    removed. Raises NotWritable or NoSpace naming the first that fails."""
    for role, path in folders:
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=path, prefix=".write-check-")
            try:
                # A full disk may accept the file and refuse only its first block, on sync.
                os.write(fd, b"\0" * 4096)
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError as exc:
            raise _refusal(role, path, exc) from None
