"""The command's console: what it prints reaches the terminal inert, a reader that has gone
leaves the command to finish, and the API SDKs' own log lines stay off it.

Ids, names and reasons from users and the team's system are printed in many places: rather than
trusting each, the streams escape every control character but the newline (core/control_chars.py),
so an ESC in a `kb_version` cannot clear the screen. Progress bars draw on their own descriptor."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Callable, Iterator
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
        self._unless_gone(self.inner.write, console_text(text))
        return len(text)

    def flush(self) -> None:
        self._unless_gone(self.inner.flush)

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def _unless_gone(self, call: Callable[..., object], *text: str) -> None:
        if self.closed_by_reader:
            return
        try:
            call(*text)
        except BrokenPipeError:
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
