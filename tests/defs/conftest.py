from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from eval_pipeline.definitions import build_resources
from eval_pipeline.defs.resources import InputsResource, ProvidersResource, RunScopeResource, StorageResource

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Env:
    root: Path
    kb: Path
    banks: Path
    models_file: Path
    results: Path
    instance: dg.DagsterInstance

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


@pytest.fixture
def env(tenant: Path, tmp_path: Path) -> Iterator[Env]:
    models = tmp_path / "models.yaml"
    shutil.copy(REPO / "models.yaml", models)
    with dg.instance_for_test() as instance:
        yield Env(
            root=tmp_path,
            kb=tenant / "kb.yaml",
            banks=tenant / "banks",
            models_file=models,
            results=tmp_path / "results",
            instance=instance,
        )
