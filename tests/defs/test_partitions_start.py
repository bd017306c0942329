"""Date partitions read the way the UI reads them: GraphQL over the code location loaded in a
process of its own (as `dg dev` loads it). Every process holds the same window of dates, from
`MAX_DAYS_BACK` days ago to today, whatever the project or where its results live, and nothing
is set for it: a past date a `run` evaluated in its own process is a materialised partition there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

import eval_pipeline.definitions
from eval_pipeline.core.dates import MAX_DAYS_BACK, first_evaluation_date, today_utc
from eval_pipeline.core.scoring.run_document import RESULTS_FILE
from eval_pipeline.defs.partitions import DATE_DIM, MODEL_DIM, sync_model_partitions
from eval_pipeline.orchestration.execution import project_instance
from eval_pipeline.providers.models import load_models
from tests.conftest import TENANT
from tests.defs.conftest import REPO
from tests.embedding_cache import warm

QUERY = """{ assetNodes {
  assetKey { path }
  partitionKeysByDimension { name partitionKeys }
  partitionStats { numPartitions numMaterialized numFailed numMaterializing }
} }"""
# (KB, banks folder) of each domain, copied into the project.
DOMAINS = {"sample": (REPO / "kb", REPO / "test_banks"), "tenant": (TENANT / "kb.yaml", TENANT / "banks")}


@dataclass(frozen=True)
class Shown:
    """What the UI's asset list shows for one partitioned asset."""

    dates: list[str]
    models: list[str] | None  # None: a date-only asset
    partitions: int
    materialized: int
    missing: int  # what the asset list counts as missing


@pytest.fixture(params=sorted(DOMAINS))
def project(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_embeddings: Path
) -> Path:
    """A project that has evaluated nothing yet, with every path of the code location in it (its
    embeddings cached: what is shown, not the embedding, is what is tested)."""
    kb, banks = DOMAINS[request.param]
    copy = shutil.copytree if kb.is_dir() else shutil.copy
    copy(kb, tmp_path / kb.name)
    shutil.copytree(banks, tmp_path / "banks")
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    warm(tmp_path / ".cache", local_embeddings)
    paths = {
        "KB": kb.name,
        "BANKS_DIR": "banks",
        "MODELS_FILE": "models.yaml",
        "RESULTS_DIR": "results",
        "STORAGE_DIR": "storage",
        "CACHE_DIR": ".cache",
        "CALIBRATION_DIR": "calibration",
    }
    for name, value in paths.items():
        monkeypatch.setenv(f"EVAL_PIPELINE_{name}", str(tmp_path / value))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / ".dagster_home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def instance(project: Path) -> Iterator[dg.DagsterInstance]:
    with project_instance(project / ".dagster_home") as instance:
        yield instance


def _shown(instance: dg.DagsterInstance) -> dict[str, Shown]:
    """Each partitioned asset as the UI lists it, from a freshly loaded code location."""
    with define_out_of_process_context(eval_pipeline.definitions.__file__, "defs", instance) as context:
        nodes = execute_dagster_graphql(context, QUERY).data["assetNodes"]
    shown = {}
    for node in nodes:
        stats = node["partitionStats"]
        if stats is None:  # unpartitioned: the inputs
            continue
        keys = {d["name"]: d["partitionKeys"] for d in node["partitionKeysByDimension"]}
        done = stats["numMaterialized"] + stats["numFailed"] + stats["numMaterializing"]
        shown["/".join(node["assetKey"]["path"])] = Shown(
            dates=keys.get(DATE_DIM) or keys[next(iter(keys))],
            models=keys.get(MODEL_DIM),
            partitions=stats["numPartitions"],
            materialized=stats["numMaterialized"],
            missing=stats["numPartitions"] - done,
        )
    return shown


def _enabled(project: Path) -> list[str]:
    return [key for key, model in load_models(project / "models.yaml").items() if model.enabled]


def test_every_process_shows_the_same_window_of_dates_and_a_past_date_evaluated_elsewhere(
    project: Path, instance: dg.DagsterInstance
) -> None:
    models = _enabled(project)
    assert len(models) >= 2
    sync_model_partitions(instance, models)  # as the model_partitions sensor does on its first tick
    window = [
        (date.fromisoformat(first_evaluation_date()) + timedelta(days=i)).isoformat()
        for i in range(MAX_DAYS_BACK + 1)
    ]
    assert window[-1] == today_utc()
    fresh = _shown(instance)
    assert "run_report" in fresh and "model_comparison" in fresh
    for asset, shown in fresh.items():
        assert shown.dates == window, asset
        per_model = len(models) if shown.models is not None else 1
        assert shown.partitions == shown.missing == len(window) * per_model, asset

    past = (date.fromisoformat(today_utc()) - timedelta(days=12)).isoformat()
    data = ["--kb", os.environ["EVAL_PIPELINE_KB"], "--banks-dir", "banks"]
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", "run", "--date", past, "--model", models[0], *data],
        capture_output=True,
        text=True,
        timeout=600,
    )
    # Evaluated either way: 1 is the sample's critical failures failing the gate.
    assert done.returncode in (0, 1), done.stderr
    assert (project / "results" / models[0] / past / RESULTS_FILE).is_file()

    later = _shown(instance)
    assert all(shown.dates == window for shown in later.values())
    assert later["run_report"].materialized == 1
    assert later["model_comparison"].materialized == 1
