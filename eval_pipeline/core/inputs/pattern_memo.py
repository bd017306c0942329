"""Crisis patterns that passed validation, remembered in the cache folder: a warm run does not
compile and screen them again (~8 ms of a narrowed run for the sample's 30 patterns, and a
process for each pattern the backtracking screen probes).

A set of patterns is remembered as an empty file named for its hash together with the code
version and the Python version (whose `re` compiled them), and only once the whole input loaded
without a problem. A set that differs in any pattern is another set, checked again; a pattern
that fails is never remembered, so a bad rule is refused as ever.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from eval_pipeline.core.code_version import code_version

DIRECTORY = "patterns"


def _marker(cache_dir: Path, patterns: Sequence[str]) -> Path:
    key = json.dumps([code_version(), sys.version, list(patterns)])
    return cache_dir / DIRECTORY / hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def screened(cache_dir: Path, patterns: Sequence[str]) -> bool:
    """Whether this set of patterns passed validation before, with this code and this Python."""
    return _marker(cache_dir, patterns).is_file()


def remember(cache_dir: Path, patterns: Sequence[str]) -> None:
    """Note that the set passed; a cache folder that takes no file only means checking again."""
    marker = _marker(cache_dir, patterns)
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
