"""The narrowed run's evaluation runs with the cyclic garbage collector paused, and leaves the
collector as it found it."""

from __future__ import annotations

import gc

import pytest

from eval_pipeline.cli.narrowed_run import cyclic_gc_paused


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_restores_it_and_a_disabled_collector_stays_disabled() -> None:
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
