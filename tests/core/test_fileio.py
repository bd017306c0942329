"""Atomic writes give the mode a plain `open` would (0666 & ~umask), not mkstemp's 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from eval_pipeline.core.fileio import atomic_write_text


def test_output_files_honour_the_umask(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "report.md", "x")
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE((tmp_path / "report.md").stat().st_mode) == 0o666 & ~mask
    assert (tmp_path / "report.md").read_text() == "x" and not list(tmp_path.glob(".tmp-*"))
