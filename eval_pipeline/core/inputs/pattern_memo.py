"""Crisis patterns that passed validation, remembered in the cache folder: a warm run does not
compile and screen them again (~8 ms of a narrowed run for the sample's 30 patterns, and a
process for each pattern the backtracking screen probes).

A set of patterns is remembered as an empty file named for its hash together with the code
version and the Python version (whose `re` compiled them), and only once the command goes ahead
(`keep`): bad input, found while loading or after, writes nothing. A set that differs in any
pattern is another set, checked again; a pattern that fails is never remembered, so a bad rule
is refused as ever.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipeline.core.code_version import code_version

DIRECTORY = "patterns"


@dataclass
class PatternMemo:
    """Where pattern sets are remembered, whether to read (`refresh` does not) and write them (a
    dry run does not), and the set that passed in this process, until it is kept."""

    directory: Path
    read: bool = True
    write: bool = True
    _passed: list[str] = field(default_factory=list)

    def _marker(self, patterns: Sequence[str]) -> Path:
        key = json.dumps([code_version(), sys.version, list(patterns)])
        return self.directory / DIRECTORY / hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]

    def screened(self, patterns: Sequence[str]) -> bool:
        """Whether this set passed validation before, with this code and this Python."""
        return self.read and self._marker(patterns).is_file()

    def passed(self, patterns: Sequence[str]) -> None:
        self._passed = list(patterns)

    def keep(self) -> None:
        """Remember the set that passed; a cache folder that takes no file only means checking
        again next time."""
        if not (self.write and self._passed):
            return
        marker = self._marker(self._passed)
        with contextlib.suppress(OSError):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
