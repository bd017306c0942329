"""The cyclic garbage collector paused where a command only builds what it keeps to the end."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_holding = False  # whether this process keeps what it builds to its end out of the collector's sight


def hold_long_lived() -> None:
    """Freeze every object alive now, and what later pauses build, so the collector's full passes
    during a Dagster run walk only what the run creates: for a process whose start-up lives to its
    end (the `eval-pipeline` entry point, a test worker), not for `main` called from other Python."""
    global _holding
    gc.freeze()
    _holding = True


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: start-up and an evaluation allocate hundreds of
    thousands of small objects and keep nearly all of them to the end, so the collector's passes
    over them find nothing (reference counting still frees the rest)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # What was built inside goes straight to the oldest generation (or, where the process
            # holds what lives long, out of the collector's sight), not walked by its next pass.
            gc.freeze()
            if not _holding:
                gc.unfreeze()
            gc.enable()
