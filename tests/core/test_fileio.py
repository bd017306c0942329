"""Atomic writes give the mode a plain `open` would (0666 & ~umask), not mkstemp's 0600; reads
take a buffer the size of the file, never one the size of the cap."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path

from eval_pipeline.core.fileio import _read_up_to, atomic_write_text


def test_output_files_honour_the_umask(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "report.md", "x")
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE((tmp_path / "report.md").stat().st_mode) == 0o666 & ~mask
    assert (tmp_path / "report.md").read_text() == "x" and not list(tmp_path.glob(".tmp-*"))


def test_a_small_document_is_read_with_a_buffer_its_size(tmp_path: Path) -> None:
    # Under a 300 MB address-space limit a cap-sized (512 MB) read buffer cannot be had.
    document = tmp_path / "results.json"
    document.write_text('{"ok": true}')
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from eval_pipeline.core.fileio import MAX_DOCUMENT_BYTES, read_input_text\n"
        "resource.setrlimit(resource.RLIMIT_AS, (300 * 1024 * 1024, resource.RLIM_INFINITY))\n"
        "print(read_input_text(Path(sys.argv[1]), MAX_DOCUMENT_BYTES))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(document)], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, '{"ok": true}\n', "")


def test_a_file_that_grew_after_its_stat_is_read_to_the_limit() -> None:
    grown = io.BytesIO(b"x" * 5000)
    assert _read_up_to(grown, 10, 100_000) == b"x" * 5000  # all of it, past the stat'ed size
    grown.seek(0)
    assert len(_read_up_to(grown, 10, 20)) > 20  # stops once over the limit (then refused)
