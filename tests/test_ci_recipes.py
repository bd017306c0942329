"""The CI recipes in docs/ci/ parse and do what docs/ci.md says, as far as is possible offline:
their shell steps run in order, as the CI server would run them, on a copy of the sample with an
offline model and an evaluation of yesterday standing in for the default branch's. Installing
(`make install`: the test's environment is installed already) and the steps that call a CI
service's actions are left out; what those actions read (JUnit files, the comment) is checked."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.report.diff_comment import MAX_LINES
from tests.conftest import REPO
from tests.core.test_junit import cases, outcome, valid
from tests.embedding_cache import warm

RECIPES = REPO / "docs" / "ci"
BIN = Path(sys.executable).parent
INSTALL = "make install"
EXPRESSION = re.compile(r"\$\{\{\s*steps\.(\w+)\.outputs\.(\w+)\s*\}\}")


@pytest.fixture(scope="module")
def main_branch(tmp_path_factory: pytest.TempPathFactory, local_embeddings: Path) -> Path:
    """A copy of the sample whose default branch evaluated it yesterday (the restored cache)."""
    root = tmp_path_factory.mktemp("project")
    for name in ("kb", "test_banks", "calibration"):
        shutil.copytree(REPO / name, root / name)
    warm(root / ".cache", local_embeddings)
    shutil.copy(REPO / "models.yaml", root / "models.yaml")
    yesterday = (date.fromisoformat(today_utc()) - timedelta(days=1)).isoformat()
    # In this process: it only stands in for main's evaluation (the recipes' own commands run as
    # the CI server runs them), and a process of its own would import Dagster again.
    with pytest.MonkeyPatch.context() as environment:
        environment.chdir(root)
        environment.setenv("DAGSTER_HOME", str(root / ".dagster_home"))
        for name in [k for k in os.environ if k.endswith("_API_KEY")]:
            environment.delenv(name)
        code = main(["run", "--model", "local-minilm", "--date", yesterday])
    assert code == 1  # the sample's deliberate critical misses fail its gate
    return root


def _env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {
        "PATH": f"{BIN}{os.pathsep}{env['PATH']}",
        "DAGSTER_HOME": str(root / ".dagster_home"),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    return env | (extra or {})


@pytest.fixture
def project(main_branch: Path, tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(main_branch, root)
    return root


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # GitHub runs `run:` with `bash -e {0}`; GitLab runs a job's script with errexit and pipefail.
    command = ["bash", "-eo", "pipefail", "-c", script]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def _pairs(path: Path) -> dict[str, str]:
    """KEY=value lines, as in $GITHUB_ENV and $GITHUB_OUTPUT."""
    if not path.is_file():
        return {}
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _check_reports(root: Path) -> None:
    """What the reporters read: JUnit files valid and naming the failing tests, a short comment."""
    run = cases(valid((root / "reports/junit-run.xml").read_text()))
    assert outcome(run["gate/local-minilm"]) == "failure"
    failing = [name for name, case in run.items() if outcome(case) == "failure"]
    assert len(failing) > 3 and all(name.split("/")[1] for name in failing)
    diff = cases(valid((root / "reports/junit-diff.xml").read_text()))
    assert len(diff) == len(run)  # one case per test of HEAD, and the gate's (vs run's per model)
    comment = (root / "reports/diff.md").read_text()
    assert comment.startswith("## ✅ Retrieval diff: PASSED") and len(comment.splitlines()) <= MAX_LINES


def test_both_recipes_parse_and_name_the_documented_files() -> None:
    page = (REPO / "docs" / "ci.md").read_text()
    for name in ("github-actions.yml", "gitlab-ci.yml"):
        assert yaml.safe_load((RECIPES / name).read_text())
        assert f'--8<-- "docs/ci/{name}"' in page


def test_the_github_workflow_runs_its_steps_offline(project: Path) -> None:
    workflow: dict[Any, Any] = yaml.safe_load((RECIPES / "github-actions.yml").read_text())
    assert {"pull_request", "push"} <= set(workflow[True])  # YAML 1.1 reads the `on` key as true
    job = workflow["jobs"]["evaluate"]
    env = _env(project, {k: str(v) for k, v in job["env"].items()})
    outputs: dict[str, dict[str, str]] = {}
    used: dict[str, dict[str, Any]] = {}
    ran = 0
    for step in job["steps"]:
        if "uses" in step:
            used[step["uses"].split("@")[0]] = step.get("with", {})
            continue
        if INSTALL in step["run"]:
            continue
        files = {
            name: project / f".{name.lower()}" for name in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH")
        }
        step_env = env | {name: str(path) for name, path in files.items()}
        for key, value in step.get("env", {}).items():
            step_env[key] = EXPRESSION.sub(lambda m: outputs.get(m[1], {}).get(m[2], ""), str(value))
        done = _bash(step["run"], project, step_env)
        ran += 1
        if step["name"].startswith("Gate"):
            assert done.returncode == 1 == int(outputs["evaluate"]["status"])  # the gate failed
            continue
        assert done.returncode == 0, (step["name"], done.stderr)
        env |= _pairs(files["GITHUB_ENV"])
        outputs[step.get("id", step["name"])] = _pairs(files["GITHUB_OUTPUT"])
        files["GITHUB_OUTPUT"].unlink(missing_ok=True)
    assert ran == 4
    assert outputs["Diff against main"]["status"] == "0"  # same inputs as yesterday: no regression
    assert used["mikepenz/action-junit-report"]["report_paths"] == "reports/junit-*.xml"
    assert len(list(project.glob("reports/junit-*.xml"))) == 2
    assert used["marocchino/sticky-pull-request-comment"]["path"] == "reports/diff.md"
    _check_reports(project)


def test_the_gitlab_job_runs_its_script_offline(project: Path) -> None:
    job = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())["retrieval-eval"]
    assert job["artifacts"]["reports"]["junit"] == "reports/junit-*.xml"
    script = [line for line in job["script"] if line != INSTALL]
    assert len(script) == len(job["script"]) - 1
    env = _env(project, {k: str(v) for k, v in job["variables"].items()})
    done = _bash("\n".join(script), project, env)  # no merge request, no token: no note is posted
    assert done.returncode == 1, done.stderr  # run's exit code: the gate failed
    assert len(list(project.glob("reports/junit-*.xml"))) == 2
    _check_reports(project)
