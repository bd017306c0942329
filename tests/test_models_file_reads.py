"""`run` reads the models file once per command: the flags' models, their configurations and the
project's gates come from one read, and the route is handed them as data. Counted without a patch:
a fresh interpreter's audit hook sees every `open` of the file (tests/test_import_sets.py probes
the same way for imports)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import offline_tenant_project

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"]

_PROBE = """
import contextlib, io, json, os, sys
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        if os.path.basename(os.fsdecode(args[0])) == "models.yaml":
            opened.append(os.fsdecode(args[0]))
sys.addaudithook(hook)
from eval_pipeline.cli import main
args = sys.argv[1:]
commands = [[]]  # one command after another in this process, split at "+"
for arg in args:
    commands.append([]) if arg == "+" else commands[-1].append(arg)
with contextlib.redirect_stdout(io.StringIO()):
    for command in commands:
        if command == ["edit"]:  # the user edits the file between two commands
            with open("models.yaml", "a") as f:
                f.write("# edited\\n")
            continue
        try:
            code = main(command)
        except SystemExit as exc:
            code = exc.code
print(json.dumps({"code": code, "opened": len(opened)}))
"""


def opens_of_the_models_file(cwd: Path, *argv: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    return report["code"], report["opened"]


@pytest.mark.parametrize(
    "argv",
    [
        ("run", *DATA, "--test", "T-RENT-001"),
        ("run", *DATA, "--banks", "state,pattern", "--fail-under", "50"),
        ("run", *DATA, "--dry-run"),
    ],
    ids=["narrowed", "narrowed-gated", "dry-run"],
)
def test_run_reads_the_models_file_once(tmp_path: Path, argv: tuple[str, ...]) -> None:
    with offline_tenant_project(tmp_path):
        code, opened = opens_of_the_models_file(tmp_path, *argv)
    assert code in (0, 1)
    assert opened == 1


def test_the_probe_counts_every_read(tmp_path: Path) -> None:
    with offline_tenant_project(tmp_path):
        other = tmp_path / "other" / "models.yaml"
        other.parent.mkdir()
        shutil.copy(tmp_path / "models.yaml", other)
        code, opened = opens_of_the_models_file(
            tmp_path, "models", "--models-file", str(other), "+", "run", *DATA, "--dry-run"
        )
    assert (code, opened) == (0, 2)


def test_an_edited_models_file_is_read_again_in_the_same_process(tmp_path: Path) -> None:
    # A code server lives on: the file it parsed is read again once it changes.
    with offline_tenant_project(tmp_path):
        code, opened = opens_of_the_models_file(tmp_path, "models", "+", "edit", "+", "models")
    assert (code, opened) == (0, 3)  # twice to read, once to edit


@pytest.mark.slow
def test_an_unchanged_rerun_reads_the_models_file_once(tmp_path: Path) -> None:
    # The full evaluation's graph runs read it again where a resource needs a model's
    # configuration or the gates (docs/architecture.md); a rerun that stands never loads them.
    with offline_tenant_project(tmp_path):
        assert opens_of_the_models_file(tmp_path, "run", *DATA) == (0, 1)  # the graph's runs too
        assert opens_of_the_models_file(tmp_path, "run", *DATA) == (0, 1)
