"""The mistakes a newcomer makes in their first hour, each answered in one line that says what to
do: no `-: -:` placeholders, no argparse usage block, a "did you mean" for a mistyped name, where
a command looked for a project. Run in real `eval-pipeline` processes, as a newcomer runs them,
on the second domain's project and in an empty folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TENANT

EVAL = str(Path(sys.executable).parent / "eval-pipeline")
TENANT_DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks"]

# (where it runs, the command line, its exit code, what the one line must say)
MISTAKES: list[tuple[str, list[str], int, str]] = [
    ("empty", ["run"], 2, "looked for kb/ and test_banks/ there"),
    ("empty", ["validate"], 2, "or pass --kb PATH --banks-dir DIR"),
    ("empty", ["show"], 2, "run `eval-pipeline run` first"),
    ("project", ["run", *TENANT_DATA, "--model", "local-minlm"], 2, "did you mean 'local-minilm'?"),
    ("project", ["run", *TENANT_DATA, "--banks", "semntic"], 2, "did you mean 'semantic'?"),
    ("project", ["run", *TENANT_DATA, "--test", "T-RENT-01"], 2, "did you mean 'T-RENT-001'?"),
    ("project", ["run", *TENANT_DATA, "--topic", "mony"], 2, "did you mean 'money'?"),
    ("project", ["run", *TENANT_DATA, "--fail-under", "abc"], 2, "see `eval-pipeline run --help`"),
    ("project", ["run", "--fail-under"], 2, "expected one argument; see `eval-pipeline run --help`"),
    ("project", ["run", *TENANT_DATA, "--date", "2026-13-01"], 2, "'2026-13-01' is not YYYY-MM-DD"),
    ("project", ["diff"], 2, "required: base, head; see `eval-pipeline diff --help`"),
    ("project", ["init"], 2, "see `eval-pipeline init --help`"),
    ("project", [], 2, "see `eval-pipeline --help`"),
    ("project", ["evaluate"], 2, "invalid choice: 'evaluate'"),
    (
        "project",
        ["run", "--modle", "local-minilm"],
        2,
        "--modle local-minilm; see `eval-pipeline run --help`",
    ),
    ("project", ["run", *TENANT_DATA, "--model", "voyage-haiku"], 2, "needs the environment variable"),
    ("project", ["validate", "--kb", "tenant/kb.yml", "--banks-dir", "tenant/banks"], 2, "kb.yml: "),
    ("project", ["run", *TENANT_DATA, "--junit", "tenant"], 2, "a folder is in the way"),
]


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    empty, project = tmp_path / "empty", tmp_path / "project"
    empty.mkdir()
    shutil.copytree(TENANT, project / "tenant")
    shutil.copy(REPO / "models.yaml", project / "models.yaml")
    return {"empty": empty, "project": project}


def _eval(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["DAGSTER_HOME"] = str(cwd / ".dagster_home")
    return subprocess.run([EVAL, *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("where", "argv", "code", "says"), MISTAKES, ids=lambda v: str(v)[:40])
def test_each_mistake_is_one_line_with_a_useful_hint(
    places: dict[str, Path], where: str, argv: list[str], code: int, says: str
) -> None:
    done = _eval(argv, places[where])
    lines = done.stderr.splitlines()
    assert done.returncode == code, done.stderr
    problem = lines[0]
    # A bad input file also says how many problems it found: still one line per problem.
    assert lines[1:] in ([], ["1 problem(s) found"]), done.stderr
    assert says in problem, problem
    assert "-: -:" not in problem and ": -:" not in problem and "usage:" not in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_version_names_the_installed_release(places: dict[str, Path]) -> None:
    from importlib.metadata import version

    done = _eval(["--version"], places["empty"])
    assert (done.returncode, done.stdout) == (0, f"eval-pipeline {version('eval-pipeline')}\n")
