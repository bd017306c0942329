"""The folders an evaluation writes into: checked writable before it evaluates or calls an API, and
claimed for its KB's project (`_project.json` in the results and storage folders), so two projects
never share results or model x date partitions by accident. An object store checks itself (its
credentials and buckets) when the first report is written."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from eval_pipeline.cli.exit_status import UsageError
from eval_pipeline.core.inputs.identity import ProjectIdentity, project_identity
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.writable import require_writable
from eval_pipeline.location import instance_home
from eval_pipeline.providers.object_store import is_local, local_path, output_path, write_text

if TYPE_CHECKING:
    from upath import UPath

PROJECT_FILE = "_project.json"


def local_folder(location: str | Path) -> Path | None:
    """The file system folder of a results or outputs location; None for an object store."""
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


def _held(marker: Path | UPath) -> ProjectIdentity | None:
    if not marker.is_file():
        return None
    try:
        return ProjectIdentity.model_validate_json(marker.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        kind = type(exc).__name__
        raise UsageError(f"{marker}: not a readable project record ({kind}); restore or remove it") from None


def claim_project(kb: KnowledgeBase, locations: Sequence[tuple[str, Path | UPath]]) -> None:
    """Refuse (one line, nothing written) if any location holds another project's evaluations,
    else record this KB's project in each, its entity ids brought up to date (a KB edit stays the
    same project). Called once every other input has been accepted: bad input writes nothing."""
    running = project_identity(kb)
    held = [_held(root / PROJECT_FILE) for _, root in locations]
    for (where, _), identity in zip(locations, held, strict=True):
        if identity is not None and not identity.same_project(running):
            raise UsageError(
                f"{where} holds evaluations of project {identity.label}, but --kb is project "
                f"{running.label}; evaluate it into its own location (--results-dir DIR --storage-dir DIR) "
                "or scaffold a new project with `eval-pipeline init DIR`"
            )
    for (_, root), identity in zip(locations, held, strict=True):
        # Unchanged is the rule (every run of a project records it): a list of every entity id
        # is not written and synced again.
        if identity != running:
            write_text(root / PROJECT_FILE, running.model_dump_json(indent=2))
