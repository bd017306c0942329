"""A file's identity as a memo keeps it (name, size, mtime_ns, ctime_ns, inode, device), and git's
"racy" rule: a file changed within `RACY_NS` of when it was read could change again within the same
tick of the filesystem's clock without its stat moving, so nothing read from it is memoised."""

from __future__ import annotations

import os
from collections.abc import Iterable

RACY_NS = 2_000_000_000  # covers coarse filesystem clocks (ticks of ms) and FAT's 2 s mtimes

# Name, size, mtime_ns, ctime_ns, inode, device: a list, as JSON gives it back.
Stat = list[str | int]


def stat_row(name: str, info: os.stat_result) -> Stat:
    return [name, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def racy(stats: Iterable[Stat], now_ns: int) -> bool:
    """Whether a file changed so recently that it could change again unseen."""
    after = now_ns - RACY_NS
    return any(max(int(s[2]), int(s[3])) >= after for s in stats)
