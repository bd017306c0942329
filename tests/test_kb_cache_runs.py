"""`run` with the stored KB and the stored entity matrix gives the results it gives without them,
on the sample (a KB directory) and on the tenant domain (a one-file KB)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.core.inputs import kb_cache
from tests.embedding_cache import warm
from tests.stable_json import stable

REPO = Path(__file__).resolve().parents[1]
DATE = "2026-11-20"


def _files(*roots: Path) -> dict[Path, bytes]:
    return {f: f.read_bytes() for root in roots for f in sorted(root.rglob("*")) if f.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("which", ["sample", "tenant"])
def test_results_are_the_same_with_and_without_the_stored_kb_and_matrix(
    which: str, workdir: Path, monkeypatch: pytest.MonkeyPatch, local_embeddings: Path
) -> None:
    # The copies were just written; a real KB's files are older than the racy window.
    monkeypatch.setattr(kb_cache, "RACY_NS", 0)
    if which == "sample":
        shutil.copytree(REPO / "kb", workdir / "kb")
        shutil.copytree(REPO / "test_banks", workdir / "banks")
        kb, banks = workdir / "kb", workdir / "banks"
    else:
        kb, banks = workdir / "tenant" / "kb.yaml", workdir / "tenant" / "banks"
    inputs = _files(kb if kb.is_dir() else kb.parent, banks)
    argv = ["run", "--kb", str(kb), "--banks-dir", str(banks), "--date", DATE]
    argv += ["--model", "local-minilm", "--banks", "semantic"]
    results = workdir / "results" / "_scoped" / "banks-semantic" / "local-minilm" / DATE / "results.json"
    stored_kb = kb_cache.KbCache(workdir / ".cache").file_for(kb)

    assert main([*argv, "--cache", "off"]) in (0, 1)  # no cache read or written at all
    without = json.loads(results.read_text(encoding="utf-8"))
    assert not (workdir / ".cache").exists()

    # The vectors an earlier run stored (the session's: embedding the sample again is most of
    # this test's CPU); the KB and the matrix are not stored yet.
    warm(workdir / ".cache", local_embeddings)
    assert main(argv) in (0, 1)  # loads from the files, stores the KB and the matrix
    assert stored_kb.is_file() and list((workdir / ".cache" / "matrices").glob("*.bin"))
    first = os.stat(stored_kb)
    assert main(argv) in (0, 1)  # both from their stores
    again = os.stat(stored_kb)
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns), "read, not rebuilt"
    with_cache = json.loads(results.read_text(encoding="utf-8"))

    assert stable(with_cache) == stable(without)
    assert with_cache["provenance"]["kb_hash"] == without["provenance"]["kb_hash"]
    assert _files(kb if kb.is_dir() else kb.parent, banks) == inputs  # nothing lands in the data
