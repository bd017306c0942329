"""The command's stdout and stderr: what it prints reaches the terminal inert.

Test ids, names, reasons and labels come from users and from the team's system; a command
prints them in many places. Rather than trusting each place, the streams themselves show every
control character but the newline escaped (core/inputs/text.py `console_text`), so an ESC in a
`kb_version` or in an id the system returned cannot clear the screen or rewrite what was shown.
Progress bars draw on their own descriptor (orchestration/terminal.py) and are not affected.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import TextIO

from eval_pipeline.core.control_chars import console_text


class InertStream(io.TextIOBase):
    """A text stream that writes `console_text` of what it is given to `inner`."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(console_text(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()


@contextlib.contextmanager
def inert_console() -> Iterator[None]:
    """stdout and stderr inert while the block runs, then given back as they were."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(stdout), InertStream(stderr)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # a reader gone: the pipe-safe stdout says so itself
            sys.stdout.flush()
            sys.stderr.flush()
        sys.stdout, sys.stderr = stdout, stderr
