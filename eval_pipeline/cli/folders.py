"""The folders a command writes into, checked writable before it evaluates or calls an API
(core/writable.py). An object store's URI is left to the store: its credentials and buckets are
checked by its own client when the first report is written."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.core.writable import require_writable
from eval_pipeline.location import instance_home


def local_folder(location: str | Path) -> Path | None:
    """The file system folder of a results or outputs location; None for an object store."""
    from eval_pipeline.providers.object_store import is_local, local_path, output_path

    path = output_path(location)
    return local_path(path) if is_local(path) else None


def check_evaluation_folders(
    results: str | Path, storage_dir: Path, cache_dir: Path, outputs_uri: str | None = None
) -> None:
    """What a Dagster evaluation writes: reports, asset values and snapshots, the response and
    embedding caches, and the Dagster instance (runs and events)."""
    folders = [
        ("results folder", local_folder(results)),
        ("storage folder", storage_dir),
        ("outputs folder", None if outputs_uri is None else local_folder(outputs_uri)),
        ("cache folder", cache_dir),
        ("Dagster instance folder (DAGSTER_HOME)", instance_home()),
    ]
    require_writable((role, path) for role, path in folders if path is not None)
