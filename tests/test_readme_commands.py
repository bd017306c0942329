"""Every command of the README and of docs/own-project.md runs as written, in order, on a copy of a
fresh clone (the tracked files, `make run`'s evaluation of today for the README): each ends with
exit 0, or 1 where a gate fails by design (the sample's deliberate critical misses), never with
bad input (2), an internal error (3) or a traceback. A `cd` carries to the commands after it.

The commands are the lines of the pages' `sh` blocks. The quick start's `make run` and
`make test` are the suite and `make run` itself, so they are checked to be make targets
(`make -n`), not run here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

from eval_pipeline.core.dates import today_utc
from tests.conftest import REPO
from tests.embedding_cache import warm

BIN = Path(sys.executable).parent
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
PAGES = {"readme": REPO / "README.md", "own-project": REPO / "docs" / "own-project.md"}


def commands(page: Path) -> list[str]:
    """The page's commands: each line of its `sh` blocks, in order."""
    return [
        line for block in SH_BLOCK.findall(page.read_text()) for line in block.splitlines() if line.strip()
    ]


def _clone_files() -> list[str]:
    """What a fresh clone holds: the tracked files (git), or where git is not installed, every file
    but the ones .gitignore names (the environment, caches and results a checkout makes)."""
    if shutil.which("git") and (REPO / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
        )
        return [name for name in listed.stdout.split("\0") if name and (REPO / name).is_file()]
    ignored = [
        line.strip().rstrip("/") for line in (REPO / ".gitignore").read_text().splitlines() if line.strip()
    ]
    files = []
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        skip = parts[0] == ".git" or any(fnmatch(part, pattern) for part in parts for pattern in ignored)
        if path.is_file() and not skip and not fnmatch("/".join(parts), "benchmarks/results.md"):
            files.append("/".join(parts))
    return files


def _fresh_clone(root: Path, local_embeddings: Path) -> Path:
    for name in _clone_files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    warm(root / ".cache", local_embeddings)
    return root


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return env | {
        "PATH": f"{BIN}{os.pathsep}{env['PATH']}",
        "DAGSTER_HOME": str(root / ".dagster_home"),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _run_all(lines: list[str], root: Path) -> list[tuple[str, int]]:
    """Each line in bash from the folder the `cd`s before it lead to; its exit code."""
    here, codes = root, []
    env = _env(root)
    for line in lines:
        out, err, code, cwd = _bash(line, here, env)
        assert "Traceback" not in out + err and "internal error" not in err, (line, err)
        assert code in (0, 1), (line, code, err)
        codes.append((line, code))
        here = cwd
    return codes


def _bash(line: str, cwd: Path, env: dict[str, str]) -> tuple[str, str, int, Path]:
    """`line` in bash; its output, exit code and the folder it ended in (for a `cd`)."""
    marker = "__cwd__"
    script = f'{line}\nstatus=$?\necho {marker}"$PWD"\nexit $status'
    done = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    out, _, where = done.stdout.rpartition(marker)
    return out, done.stderr, done.returncode, Path(where.strip())


def test_the_quick_start_names_make_targets() -> None:
    for target in ("run", "test", "ui", "bench", "test-fast"):
        done = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=False)
        assert done.returncode == 0, (target, done.stderr)


@pytest.mark.parametrize("page", PAGES)
def test_every_command_runs_as_written(page: str, tmp_path: Path, local_embeddings: Path) -> None:
    root = _fresh_clone(tmp_path / "clone", local_embeddings)
    lines = commands(PAGES[page])
    assert len(lines) >= 8
    if page == "readme":  # after `make run`: both offline models evaluated today
        run = "eval-pipeline run --model local-minilm --model local-hybrid"
        assert _run_all([run], root) == [(run, 1)]  # the sample's deliberate critical misses
    codes = dict(_run_all(lines, root))
    if page == "readme":
        assert (root / "report.html").is_file() and (root / "trec" / "run.trec").is_file()
        assert (root / "my-project" / "models.yaml").is_file()
        assert (root / "results" / "local-minilm" / today_utc() / "report.html").is_file()
    else:
        assert (root / "my-project" / ".github" / "workflows" / "retrieval-eval.yml").is_file()
        assert (root / "beir-project" / "trec" / "qrels.trec").is_file()
        assert all(code == 0 for code in codes.values()), codes  # a new project passes its gates
