"""The numeric contract end to end: real `eval-pipeline` processes on one or two BLAS threads, with
the cache off or on, a test alone or in the full run, store the same semantic records, and the
same results document apart from when and how long, on the sample and on the second domain."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, TENANT
from tests.stable_json import stable

pytestmark = pytest.mark.slow

MODEL = "local-minilm"


def _project(root: Path, domain: str) -> list[str]:
    """A copy of the domain's data and the models file in `root`; the `--kb`/`--banks-dir` flags."""
    shutil.copy(REPO / "models.yaml", root / "models.yaml")
    if domain == "sample":
        shutil.copytree(REPO / "kb", root / "kb")
        shutil.copytree(REPO / "test_banks", root / "test_banks")
        return []
    shutil.copytree(TENANT, root / "tenant")
    return ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks"]


def _run(root: Path, threads: str, *argv: str) -> None:
    # Only the thread count is set: whatever else the machine's environment holds
    # (OPENBLAS_CORETYPE among it) is inherited as a user's shell would pass it on.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "DAGSTER_HOME": str(root / "dagster_home")}
    for key in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        env.pop(key, None)
    command = [sys.executable, "-m", "eval_pipeline.cli", "run", "--model", MODEL, *argv]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr


def _document(root: Path, under: str = "") -> dict[str, Any]:
    (path,) = (root / "results" / under).glob(f"{MODEL}/*/results.json")
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _records(doc: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Each semantic test's score (its evaluation), selections and candidates with their scores."""
    fields = ("status", "evaluation", "selections", "candidates")
    return {r["test_id"]: tuple(r.get(f) for f in fields) for r in doc["semantic"]}


@pytest.mark.parametrize("domain", ["sample", "tenant"])
def test_the_same_inputs_store_the_same_semantic_records_wherever_and_however_they_run(
    domain: str, tmp_path: Path
) -> None:
    flags = _project(tmp_path, domain)

    _run(tmp_path, "1", *flags, "--cache", "off")  # the full run, through Dagster
    alone_thread = _document(tmp_path)
    assert not (tmp_path / ".cache").exists()
    _run(tmp_path, "2", *flags, "--force")  # again: two threads, the cache filled as it goes
    two_threads = _document(tmp_path)
    assert (tmp_path / ".cache").is_dir()

    # The whole document, not only the semantic records (code and inputs are the same).
    assert json.dumps(stable(two_threads), sort_keys=True) == json.dumps(stable(alone_thread), sort_keys=True)
    full = _records(two_threads)
    assert len(full) >= 8 and all(record[1] and record[3] for record in full.values())

    # A few tests alone, their query vectors and the KB's matrix read from the cache the full
    # run stored, then with the cache off: each embedded and scored on its own.
    picked = sorted(full)[:: max(1, len(full) // 4)]
    scope = [arg for test in picked for arg in ("--test", test)]
    _run(tmp_path, "1", *flags, *scope)
    (under,) = [p.name for p in (tmp_path / "results" / "_scoped").iterdir()]
    cached = _records(_document(tmp_path, f"_scoped/{under}"))
    shutil.rmtree(tmp_path / "results" / "_scoped")
    _run(tmp_path, "2", *flags, *scope, "--cache", "off")
    uncached = _records(_document(tmp_path, f"_scoped/{under}"))
    assert cached == uncached == {test: full[test] for test in picked}
