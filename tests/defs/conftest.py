from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from eval_pipeline.definitions import build_resources
from eval_pipeline.defs.resources import InputsResource, ProvidersResource, RunScopeResource, StorageResource
from eval_pipeline.orchestration.execution import dagster_yaml
from eval_pipeline.orchestration.instance_storage import storage_config
from tests.conftest import TENANT

REPO = Path(__file__).resolve().parents[2]
# No test reads a step's captured output, and capturing it starts `tail` processes for every run.
NO_COMPUTE_LOGS = {
    "compute_logs": {
        "module": "dagster._core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
}
# The project's log level (`run`'s dagster.yaml): Dagster's events all stored, and its debug lines
# (every IO-manager load and write) not, a third of a run's stored events that no test reads.
PYTHON_LOGS = {"python_logs": yaml.safe_load(dagster_yaml(Path()))["python_logs"]}


def location_env(root: Path) -> dict[str, str]:
    """`EVAL_PIPELINE_*` as a user sets them for a code location on the project in `root`: a copy
    of the tenant fixture in `tenant/`, `models.yaml`, and results, storage and cache beside them."""
    paths = {
        "KB": "tenant/kb.yaml",
        "BANKS_DIR": "tenant/banks",
        "MODELS_FILE": "models.yaml",
        "RESULTS_DIR": "results",
        "STORAGE_DIR": "storage",
        "CACHE_DIR": ".cache",
        "CALIBRATION_DIR": "calibration",
    }
    return {f"EVAL_PIPELINE_{name}": str(root / path) for name, path in paths.items()}


@dataclass
class Env:
    root: Path
    kb: Path
    banks: Path
    models_file: Path
    results: Path
    instance: dg.DagsterInstance

    def materialisations(self, key: str) -> int:
        return len(self.instance.fetch_materializations(dg.AssetKey(key), limit=1000).records)

    def resources(self, **scope: Any) -> dict[str, Any]:
        return build_resources(
            InputsResource(kb_path=str(self.kb), banks_dir=str(self.banks)),
            StorageResource(
                storage_dir=str(self.root / "storage"),
                results_dir=str(self.results),
                calibration_dir=str(self.root / "calibration"),
            ),
            ProvidersResource(models_file=str(self.models_file), cache_dir=str(self.root / "cache")),
            RunScopeResource(**scope),
        )


@contextmanager
def project_storage_instance(home: Path | None = None) -> Iterator[dg.DagsterInstance]:
    """A temporary instance on the project's SQLite storage, the one `run`, `dg dev` and the
    daemon open (orchestration/instance_storage.py): Dagster's own opens a database engine for
    every statement, most of a test's materialisation time, and no project runs on it. In `home`
    when given (kept after it closes), else in a directory of its own."""
    with nullcontext(str(home)) if home else tempfile.TemporaryDirectory() as base:
        overrides = {"storage": storage_config(base), **PYTHON_LOGS, **NO_COMPUTE_LOGS}
        with dg.instance_for_test(overrides=overrides, temp_dir=base) as instance:
            yield instance


def _env(root: Path, tenant: Path, instance: dg.DagsterInstance) -> Env:
    models = root / "models.yaml"
    if not models.exists():
        shutil.copy(REPO / "models.yaml", models)
    return Env(
        root=root,
        kb=tenant / "kb.yaml",
        banks=tenant / "banks",
        models_file=models,
        results=root / "results",
        instance=instance,
    )


@pytest.fixture
def env(tenant: Path, tmp_path: Path) -> Iterator[Env]:
    with project_storage_instance() as instance:
        yield _env(tmp_path, tenant, instance)


@pytest.fixture(scope="module")
def shared_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """An `env` for the module's tests that only read what they evaluate on the unchanged
    tenant fixture: the first evaluation is shared, so tests must not write to it."""
    root = tmp_path_factory.mktemp("shared_env")
    shutil.copytree(TENANT, root / "tenant")
    with project_storage_instance() as instance:
        yield _env(root, root / "tenant", instance)


class Kept:
    """A project on the tenant fixture (files, results and instance) prepared once, then kept
    aside closed. `restore()` puts a fresh copy back where it was made and opens it, so each test
    starts from the same state and may write to it: what it holds records absolute paths (the
    snapshots' KB, Dagster's records), which a copy elsewhere would no longer match."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._kept = root.with_name(f"{root.name}-kept")
        shutil.copytree(TENANT, root / "tenant")

    @contextmanager
    def open(self) -> Iterator[Env]:
        home = self.root / "dagster_home"
        home.mkdir(exist_ok=True)
        with project_storage_instance(home) as instance:
            yield _env(self.root, self.root / "tenant", instance)

    def keep(self) -> None:
        """Call once the instance of `open()` is closed: the state every `restore()` returns to."""
        shutil.copytree(self.root, self._kept)

    @contextmanager
    def restore(self) -> Iterator[Env]:
        shutil.rmtree(self.root)
        shutil.copytree(self._kept, self.root)
        with self.open() as env:
            yield env
