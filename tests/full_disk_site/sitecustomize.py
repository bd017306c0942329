"""Test-only, on PYTHONPATH of a process a test starts: the disk holding a folder fills up.

With EVAL_PIPELINE_TEST_FULL_DISK set to a folder, the files written under it are synced to disk
as usual for the first EVAL_PIPELINE_TEST_FULL_DISK_AFTER of them (default 0); after that a
sync fails with ENOSPC, as a full disk reports a write the page cache took but the disk cannot
hold (delayed allocation). Everything else on the machine writes as usual."""

import errno
import os

_FOLDER = os.environ.get("EVAL_PIPELINE_TEST_FULL_DISK", "")

if _FOLDER:
    _room = int(os.environ.get("EVAL_PIPELINE_TEST_FULL_DISK_AFTER", "0"))
    _sync = os.fsync

    def _fsync(fd: "int | object") -> None:
        global _room
        number = fd if isinstance(fd, int) else fd.fileno()  # type: ignore[attr-defined]
        where = os.readlink(f"/proc/self/fd/{number}")
        if where.startswith(_FOLDER + os.sep):
            if _room <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            _room -= 1
        _sync(number)

    os.fsync = _fsync
