"""The command's console: what it prints reaches the terminal inert, a reader that has gone
leaves the command to finish, and the API SDKs' own log lines stay off it.

Test ids, names, reasons and labels come from users and from the team's system; a command
prints them in many places. Rather than trusting each place, the streams themselves show every
control character but the newline escaped (core/control_chars.py `console_text`), so an ESC in a
`kb_version` or in an id the system returned cannot clear the screen or rewrite what was shown.
Progress bars draw on their own descriptor (orchestration/terminal.py) and are not affected.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from eval_pipeline.core.control_chars import console_text

# voyageai warns through the `voyage` logger about replies it could not read (Python's last-resort
# handler prints that to stderr); the anthropic SDK and the HTTP clients log through theirs. Every
# such fault is retried and reported by eval-pipeline itself: their lines would only repeat it raw.
SDK_LOGGERS = ("voyage", "anthropic", "httpx", "httpx2", "httpcore", "aiohttp")


class ConsoleStream(io.TextIOBase):
    """A text stream that writes `console_text` of what it is given to `inner`, and goes quiet
    once its reader has gone (`eval-pipeline diff … | head`), so the command still finishes and
    its exit code still carries the verdict."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                self.inner.write(console_text(text))
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self._reader_gone()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def _reader_gone(self) -> None:
        self.closed_by_reader = True
        # Python flushes the real stream again at exit; point it at /dev/null so that cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, self.inner.fileno())
        os.close(devnull)


@contextlib.contextmanager
def command_console() -> Iterator[None]:
    """While the block runs: stdout and stderr inert and pipe-safe, the SDKs' loggers quiet."""
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())
        logger.propagate = False
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ConsoleStream(stdout), ConsoleStream(stderr)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # a reader gone: its stream went quiet by itself
            sys.stdout.flush()
            sys.stderr.flush()
        sys.stdout, sys.stderr = stdout, stderr
