"""A rich progress bar for a model's semantic tests, drawn on a terminal's file descriptor.

The caller passes the descriptor rather than using sys.stderr: inside a Dagster step fds 1 and
2 go to the step's compute log, so the route hands over a duplicate of the terminal it opened
before the run (`orchestration.terminal.progress_terminal`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval

OnDone = Callable[[SemanticRetrieval], None]


@contextmanager
def semantic_bar(terminal_fd: int | None, model: str, total: int) -> Iterator[OnDone | None]:
    """A callback that advances the bar once a test is done; None (and no bar) without a terminal."""
    if terminal_fd is None:
        yield None
        return
    # Here: without a terminal (CI, a pipe, a script) no bar is drawn, and rich is not imported.
    from rich.console import Console
    from rich.progress import Progress

    console = Console(file=os.fdopen(terminal_fd, "w", closefd=False))
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"{model}: semantic tests", total=total)
        yield lambda _: bar.advance(task)
