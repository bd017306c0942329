"""The CI recipes in docs/ci/ parse and do what docs/ci.md says, as far as is possible offline:
their shell steps run in order, as the CI server would run them (a step's `if:` decided as GitHub
decides it), on a copy of the sample or of the second domain with an offline model and an
evaluation of yesterday standing in for the default branch's. Installing (`make install`: the
test's environment is installed already) and the steps that call a CI service's actions are left
out; what those actions read (JUnit files, report.html, the comment) is checked, and the
comment's first line against the job's exit code: ✅ only when the job passes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.report.diff_comment import MAX_LINES
from tests.conftest import REPO, TENANT
from tests.core.test_junit import cases, outcome, valid
from tests.embedding_cache import warm

RECIPES = REPO / "docs" / "ci"
BIN = Path(sys.executable).parent
INSTALL = "make install"
STEP_OUTPUT = r"steps\.([\w-]+)\.outputs\.([\w-]+)"
EXPRESSION = re.compile(r"\$\{\{\s*" + STEP_OUTPUT + r"\s*\}\}")
YESTERDAY = (date.fromisoformat(today_utc()) - timedelta(days=1)).isoformat()


def _no_keys(environment: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.endswith("_API_KEY")]:
        environment.delenv(name)


def _evaluated_yesterday(root: Path, local_embeddings: Path) -> int:
    """`root`'s default branch evaluated yesterday (the restored cache); run's exit code."""
    warm(root / ".cache", local_embeddings)
    shutil.copy(REPO / "models.yaml", root / "models.yaml")
    # In this process: it only stands in for main's evaluation (the recipes' own commands run as
    # the CI server runs them), and a process of its own would import Dagster again.
    with pytest.MonkeyPatch.context() as environment:
        environment.chdir(root)
        environment.setenv("DAGSTER_HOME", str(root / ".dagster_home"))
        _no_keys(environment)
        return main(["run", "--model", "local-minilm", "--date", YESTERDAY])


@pytest.fixture(scope="module")
def main_branch(tmp_path_factory: pytest.TempPathFactory, local_embeddings: Path) -> Path:
    root = tmp_path_factory.mktemp("project")
    for name in ("kb", "test_banks", "calibration"):
        shutil.copytree(REPO / name, root / name)
    assert _evaluated_yesterday(root, local_embeddings) == 1  # the sample's deliberate critical misses
    return root


@pytest.fixture(scope="module")
def tenant_branch(tmp_path_factory: pytest.TempPathFactory, local_embeddings: Path) -> Path:
    """The second domain laid out as a project at its root (kb/ and test_banks/)."""
    root = tmp_path_factory.mktemp("tenant")
    kb = yaml.safe_load((TENANT / "kb.yaml").read_text())
    entities = kb.pop("entities")
    (root / "kb" / "entities").mkdir(parents=True)
    (root / "kb" / "manifest.yaml").write_text(yaml.safe_dump(kb))
    for entity in entities:
        (root / "kb" / "entities" / f"{entity['entity_id']}.yaml").write_text(yaml.safe_dump(entity))
    shutil.copytree(TENANT / "banks", root / "test_banks")
    assert _evaluated_yesterday(root, local_embeddings) in (0, 1)
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


def _copy(branch: Path, tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(branch, root)
    return root


@pytest.fixture
def project(main_branch: Path, tmp_path: Path) -> Path:
    return _copy(main_branch, tmp_path)


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # GitHub runs `run:` with `bash -e {0}`; GitLab runs a job's script with errexit and pipefail.
    command = ["bash", "-eo", "pipefail", "-c", script]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def _pairs(path: Path) -> dict[str, str]:
    """KEY=value lines, as in $GITHUB_ENV and $GITHUB_OUTPUT."""
    if not path.is_file():
        return {}
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@dataclass
class Job:
    """What a recipe's job did: its exit code and the CI service's actions it called, with their
    inputs."""

    exit_code: int
    used: dict[str, dict[str, Any]] = field(default_factory=dict)


def _condition(expression: str, outputs: dict[str, dict[str, str]], root: Path) -> bool:
    """A step's `if:` as GitHub decides it, for the parts of its expressions the workflow uses."""
    parts: list[tuple[str, Callable[[re.Match[str]], str]]] = [
        (r"\balways\(\)", lambda m: "True"),
        (STEP_OUTPUT, lambda m: repr(outputs.get(m[1], {}).get(m[2], ""))),
        (r"hashFiles\('([^']+)'\)", lambda m: repr("hash" if list(root.glob(m[1])) else "")),
        (r"\bgithub\.event_name\b", lambda m: repr("pull_request")),
        (r"\bgithub\.ref\b", lambda m: repr("refs/pull/1/merge")),
        (r"&&", lambda m: " and "),
    ]
    for pattern, value in parts:
        expression = re.sub(pattern, value, expression)
    assert re.fullmatch(r"[\w\s'!=.\-/]*", expression), expression  # nothing left untranslated
    return bool(eval(expression, {"__builtins__": {}}))


def _run_github(root: Path) -> Job:
    workflow: dict[Any, Any] = yaml.safe_load((RECIPES / "github-actions.yml").read_text())
    steps = workflow["jobs"]["evaluate"]["steps"]
    env = _env(root, {k: str(v) for k, v in workflow["jobs"]["evaluate"]["env"].items()})
    outputs: dict[str, dict[str, str]] = {}
    job = Job(exit_code=0)
    for step in steps:
        if not _condition(step.get("if", "always()"), outputs, root):
            continue
        if "uses" in step:
            job.used[step["uses"].split("@")[0]] = step.get("with", {})
            continue
        if INSTALL in step["run"]:
            continue
        files = {name: root / f".{name.lower()}" for name in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH")}
        step_env = env | {name: str(path) for name, path in files.items()}
        for key, value in step.get("env", {}).items():
            step_env[key] = EXPRESSION.sub(lambda m: outputs.get(m[1], {}).get(m[2], ""), str(value))
        done = _bash(step["run"], root, step_env)
        if step["name"].startswith("Gate"):
            job.exit_code = done.returncode
            continue
        assert done.returncode == 0, (step["name"], done.stderr)
        env |= _pairs(files["GITHUB_ENV"])
        outputs[step.get("id", step["name"])] = _pairs(files["GITHUB_OUTPUT"])
        files["GITHUB_OUTPUT"].unlink(missing_ok=True)
    return job


def _run_gitlab(root: Path) -> Job:
    job = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())["retrieval-eval"]
    script = [line for line in job["script"] if line != INSTALL]
    assert len(script) == len(job["script"]) - 1
    env = _env(root, {k: str(v) for k, v in job["variables"].items()})
    done = _bash("\n".join(script), root, env)  # no merge request, no token: no note is posted
    return Job(exit_code=done.returncode)


RECIPE_RUNNERS = {"github": _run_github, "gitlab": _run_gitlab}


def _verdict_line(root: Path, job: Job) -> str:
    """The comment's first line, checked against the job's exit code."""
    comment = (root / "reports" / "comment.md").read_text()
    assert len(comment.splitlines()) <= MAX_LINES
    first = comment.splitlines()[0]
    assert first.startswith(
        "## ✅ Retrieval check: PASSED" if job.exit_code == 0 else "## ❌ Retrieval check: "
    )
    return first


def _critical_ids(root: Path) -> list[str]:
    results = json.loads((root / "results" / "local-minilm" / today_utc() / "results.json").read_text())
    return [c["test_id"] for c in results["aggregate"]["critical_failures"]]


def _check_reports(root: Path) -> None:
    """What the reporters read: JUnit files valid and naming the failing tests, report.html."""
    run = cases(valid((root / "reports/junit-run.xml").read_text()))
    assert outcome(run["gate/local-minilm"]) == "failure"
    failing = [name for name, case in run.items() if outcome(case) == "failure"]
    assert len(failing) > 3 and all(name.split("/")[1] for name in failing)
    diff = cases(valid((root / "reports/junit-diff.xml").read_text()))
    assert len(diff) == len(run)  # one case per test of HEAD, and the gate's (vs run's per model)
    assert (root / "reports" / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_both_recipes_parse_and_name_the_documented_files() -> None:
    page = (REPO / "docs" / "ci.md").read_text()
    for name in ("github-actions.yml", "gitlab-ci.yml"):
        assert yaml.safe_load((RECIPES / name).read_text())
        assert f'--8<-- "docs/ci/{name}"' in page
    steps = yaml.safe_load((RECIPES / "github-actions.yml").read_text())["jobs"]["evaluate"]["steps"]
    cached = [s["with"]["path"] for s in steps if s.get("uses", "").startswith("actions/cache@")]
    assert cached == [".venv"]  # the environment, keyed by the lock file
    gitlab = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())["retrieval-eval"]
    assert [c["paths"] for c in gitlab["cache"]] == [[".venv/"], ["results/"]]
    assert gitlab["cache"][0]["key"]["files"] == ["requirements.lock", "pyproject.toml"]


def test_the_github_workflow_fails_a_critical_failure_in_its_first_line(project: Path) -> None:
    job = _run_github(project)
    assert job.exit_code == 1  # the sample's critical failures fail its release gate
    first = _verdict_line(project, job)
    critical = _critical_ids(project)
    assert critical and "critical failure(s)" in first and critical[0] in first
    comment = (project / "reports" / "comment.md").read_text()
    assert "Retrieval diff: PASSED" in comment  # the same inputs as yesterday: the diff is clean
    assert job.used["mikepenz/action-junit-report"]["report_paths"] == "reports/junit-*.xml"
    assert job.used["marocchino/sticky-pull-request-comment"]["path"] == "reports/comment.md"
    uploaded = job.used["actions/upload-artifact"]["path"].split()
    assert "reports/report.html" in uploaded and "reports/junit-*.xml" in uploaded
    _check_reports(project)


def test_the_gitlab_job_fails_a_critical_failure_in_its_first_line(project: Path) -> None:
    job = _run_gitlab(project)
    assert job.exit_code == 1
    first = _verdict_line(project, job)
    assert _critical_ids(project)[0] in first
    artifacts = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())["retrieval-eval"]["artifacts"]
    assert (
        artifacts["reports"]["junit"] == "reports/junit-*.xml" and "reports/report.html" in artifacts["paths"]
    )
    _check_reports(project)


@pytest.mark.parametrize("recipe", RECIPE_RUNNERS)
def test_no_comment_when_run_refuses_its_input(project: Path, recipe: str) -> None:
    entity = next((project / "kb" / "entities").glob("*.yaml"))
    entity.write_text("entity_id: [not, an, id]\n")
    job = RECIPE_RUNNERS[recipe](project)
    assert job.exit_code == 2
    assert not (project / "reports" / "comment.md").exists()
    assert "marocchino/sticky-pull-request-comment" not in job.used


@pytest.mark.parametrize("recipe", RECIPE_RUNNERS)
def test_the_second_domain_gets_the_verdict_its_exit_code_says(
    tenant_branch: Path, tmp_path: Path, recipe: str
) -> None:
    root = _copy(tenant_branch, tmp_path)
    job = RECIPE_RUNNERS[recipe](root)
    assert job.exit_code in (0, 1)
    _verdict_line(root, job)
    gate = json.loads((root / "results" / "local-minilm" / today_utc() / "gate.json").read_text())
    assert gate["passed"] is (job.exit_code == 0)  # the same inputs as yesterday: the gate decides
    assert (root / "reports" / "report.html").is_file()
