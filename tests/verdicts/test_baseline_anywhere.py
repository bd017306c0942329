"""Where a team keeps its results, and how long ago it last evaluated, must not change the verdict:
two evaluations `gap` days apart, as a user runs them, in each of the places results can live.

Each cell evaluates a model on D0 = today - gap, then on today (D1) with the crisis bank deleted
(run exits 1 naming the bank), then on today again with the crisis bank back and the KB's state
handlers broken, with `--fail-on-regression` (exit 1 naming the state tests). Every comparison names
D0 as its baseline, with its age, on the console, in report.md and in report.html.
"""

from __future__ import annotations

import io
import shutil
import uuid
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from upath import UPath

from eval_pipeline.cli import main
from eval_pipeline.core.dates import days_before, today_utc
from tests.conftest import REPO, TENANT
from tests.deploy.conftest import s3, s3_endpoint
from tests.embedding_cache import warm

__all__ = ["s3", "s3_endpoint"]  # the module's local S3 server and bucket (fixtures)

MODEL = "local-minilm"


def _as_kb_folder(single_file: Path, kb: Path) -> None:
    """A one-file KB (`{kb_version, entities}`) written as the folder layout `init` makes."""
    data = yaml.safe_load(single_file.read_text(encoding="utf-8"))
    entities = data.pop("entities")
    (kb / "entities").mkdir(parents=True)
    (kb / "manifest.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    for entity in entities:
        text = yaml.safe_dump(entity, sort_keys=False, allow_unicode=True)
        (kb / "entities" / f"{entity['entity_id']}.yaml").write_text(text, encoding="utf-8")


def _put_domain(domain: str, project: Path) -> None:
    """The domain's KB and banks in the default layout of a project (kb/, test_banks/)."""
    for old in ("kb", "test_banks"):
        shutil.rmtree(project / old, ignore_errors=True)
    if domain == "sample":
        shutil.copytree(REPO / "kb", project / "kb")
        shutil.copytree(REPO / "test_banks", project / "test_banks")
    else:
        _as_kb_folder(TENANT / "kb.yaml", project / "kb")
        shutil.copytree(TENANT / "banks", project / "test_banks")


def break_state_handlers(kb: Path) -> list[str]:
    """Every STATE handler made unreachable (each condition now needs a value no state has); the
    handlers' ids."""
    broken = []
    for path in sorted((kb / "entities").glob("*.yaml")):
        entity = yaml.safe_load(path.read_text(encoding="utf-8"))
        if entity.get("load_mode") != "STATE":
            continue
        entity["state_conditions"] = {
            field: {"eq": "never-this-value"} for field in entity["state_conditions"]
        }
        path.write_text(yaml.safe_dump(entity, sort_keys=False, allow_unicode=True), encoding="utf-8")
        broken.append(entity["entity_id"])
    return broken


@dataclass
class Cell:
    project: Path
    flags: list[str]
    results: UPath

    def run(self, *argv: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["run", "--model", MODEL, *self.flags, *argv])
        return code, out.getvalue() + err.getvalue()

    def read(self, day: str, name: str) -> str:
        return (self.results / MODEL / day / name).read_text(encoding="utf-8")


def make_cell(
    location: str,
    domain: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    embeddings: Path,
    s3: str | None,
) -> Cell:
    """The project and where its results live, set the way a user sets them."""
    for name in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    project = tmp_path / "project"
    if location == "init":
        assert main(["init", str(project)]) == 0
    else:
        project.mkdir()
        shutil.copy(REPO / "models.yaml", project / "models.yaml")
    _put_domain(domain, project)
    warm(project / ".cache", embeddings)
    monkeypatch.chdir(project)
    elsewhere = tmp_path / "ci"
    flags: list[str] = []
    results: Any = project / "results"
    if location == "flags":
        flags = ["--results-dir", str(elsewhere / "results"), "--storage-dir", str(elsewhere / "storage")]
        monkeypatch.setenv("DAGSTER_HOME", str(elsewhere / "dagster_home"))
        results = elsewhere / "results"
    elif location == "env":
        monkeypatch.setenv("EVAL_PIPELINE_RESULTS_DIR", str(elsewhere / "results"))
        monkeypatch.setenv("EVAL_PIPELINE_STORAGE_DIR", str(elsewhere / "storage"))
        monkeypatch.setenv("DAGSTER_HOME", str(elsewhere / "dagster_home"))
        results = elsewhere / "results"
    elif location == "s3":
        assert s3 is not None
        prefix = f"{s3}/{uuid.uuid4().hex}"
        monkeypatch.setenv("EVAL_PIPELINE_RESULTS_URI", f"{prefix}/results")
        monkeypatch.setenv("EVAL_PIPELINE_OUTPUTS_URI", f"{prefix}/outputs")
        monkeypatch.setenv("DAGSTER_HOME", str(elsewhere / "dagster_home"))
        results = f"{prefix}/results"
    return Cell(project, flags, UPath(results))


def _age(gap: int) -> str:
    return f"{gap} day{'s' if gap != 1 else ''} earlier"


def evaluate_across_a_gap(cell: Cell, gap: int) -> None:
    """The three evaluations of the module docstring, and what each must say."""
    today = today_utc()
    d0 = (date.fromisoformat(today) - timedelta(days=gap)).isoformat()
    label = f"{d0}, {_age(gap)}"

    code, out = cell.run("--date", d0)
    assert code in (0, 1), out  # the sample's deliberate crisis misses fail its release gate

    banks = cell.project / "test_banks"
    shutil.move(banks / "pattern", cell.project / "pattern-aside")
    code, out = cell.run()
    assert code == 1, out
    # Named by the coverage gate, or by the regression gate where the project keeps it on (init).
    assert "bank pattern removed with its critical tests" in out, out
    assert f"since {label}:" in out, out
    assert f"## Since last run ({label})" in cell.read(today, "report.md")
    assert f"Baseline: {MODEL} @ {label}" in cell.read(today, "report.html")

    shutil.move(cell.project / "pattern-aside", banks / "pattern")
    assert break_state_handlers(cell.project / "kb")
    code, out = cell.run("--force", "--fail-on-regression")
    assert code == 1, out
    since = out.split(f"since {label}:")[1]
    assert "regressed: " in since and "[state]" in since, out
    assert "regression gate: FAILED (fails the run)" in since, out
    assert f"Baseline (the latest earlier usable evaluation): {label}." in cell.read(
        today, "regression_diff.md"
    )


# Each place results live, on both domains, at both gaps.
CELLS = [
    ("sample", "init", 12),
    ("sample", "flags", 1),
    ("sample", "env", 12),
    ("sample", "s3", 1),
    ("tenant", "init", 1),
    ("tenant", "flags", 12),
    ("tenant", "env", 1),
    ("tenant", "s3", 12),
]


@pytest.mark.parametrize(("domain", "location", "gap"), CELLS)
def test_the_gate_finds_its_baseline(
    domain: str,
    location: str,
    gap: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    local_embeddings: Path,
    request: pytest.FixtureRequest,
) -> None:
    bucket = request.getfixturevalue("s3") if location == "s3" else None
    evaluate_across_a_gap(make_cell(location, domain, tmp_path, monkeypatch, local_embeddings, bucket), gap)


def test_a_baseline_older_than_the_project_allows_fails_the_run_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_embeddings: Path
) -> None:
    cell = make_cell("init", "tenant", tmp_path, monkeypatch, local_embeddings, None)
    models = cell.project / "models.yaml"
    models.write_text(models.read_text().replace("max_baseline_age_days: null", "max_baseline_age_days: 7"))
    d0 = days_before(today_utc(), 12)
    assert cell.run("--date", d0)[0] == 0
    code, out = cell.run()
    assert code == 1, out
    assert (
        f"baseline gate failed: the baseline local-minilm @ {d0} is 12 days old, "
        "over the project's maximum baseline age of 7 days"
    ) in out
    assert f"since {d0}, 12 days earlier:" in out  # the comparison itself is still made and shown
    assert cell.run("--date", days_before(today_utc(), 5), "--force")[0] == 0  # 7 days back: young enough
