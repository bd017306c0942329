"""Content-addressed snapshots of the KB and the banks, so a past date is evaluated on the inputs
the system had then.

A snapshot is `<store>/<hash>/kb/...` and `<store>/<hash>/banks/...`, named by the content hash of
its files, plus a `snapshot.json` manifest saying where they came from. Taking one twice is free,
and it is written to a temporary directory renamed into place, so no reader sees a partial one.
The expectation history is not snapshotted: it is append-only and dated, and resolution reads it
"as of" a date.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.fileio import atomic_write_text, read_json_model
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.kb import sha256_text
from eval_pipeline.core.inputs.loading import bank_files, files_hash, kb_files

MANIFEST = "snapshot.json"


class SnapshotError(BadInput, ValueError):
    """A stored snapshot that cannot be read (one line)."""


class SnapshotManifest(FrozenModel):
    snapshot_id: str
    taken_at: datetime
    kb_source: str  # absolute path of the KB the files were copied from
    banks_source: str
    kb_entry: str  # the KB inside the snapshot: "kb" (a directory) or "kb/<file name>"


class SnapshotRef(FrozenModel):
    """Which inputs an evaluation date uses: a stored snapshot, and whether an observation of the
    sources chose it (a past date) or it was taken from the current files when the run began."""

    snapshot_id: str
    directory: str
    kb_path: str
    banks_dir: str
    chosen_by: str  # "observation at <time>" or "current files"

    @property
    def label(self) -> str:
        return f"{self.snapshot_id[:12]} ({self.chosen_by})"


def inputs_hash(kb: Path, banks: Path) -> str:
    """The sources' data version: KB files and bank files (not the history) by name and content."""
    kb_root = kb if kb.is_dir() else kb.parent
    return sha256_text(f"{files_hash(kb_files(kb), kb_root)}\n{files_hash(bank_files(banks), banks)}")


def _copy(files: list[Path], root: Path, into: Path) -> None:
    for file in files:
        target = into / file.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)


def take_snapshot(store: Path, kb: Path, banks: Path, now: datetime) -> SnapshotManifest:
    """Snapshot the KB and banks as they are now; an identical snapshot already stored is reused."""
    snapshot_id = inputs_hash(kb, banks)
    final = store / snapshot_id
    stored = _stored(store, snapshot_id)
    if stored is not None:
        return stored
    store.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".snapshot-", dir=store))
    try:
        kb_root = kb if kb.is_dir() else kb.parent
        _copy(kb_files(kb), kb_root, staging / "kb")
        _copy(bank_files(banks), banks, staging / "banks")
        (staging / "banks").mkdir(exist_ok=True)  # a banks dir with no bank yet is still a snapshot
        manifest = SnapshotManifest(
            snapshot_id=snapshot_id,
            taken_at=now,
            kb_source=str(kb.resolve()),
            banks_source=str(banks.resolve()),
            kb_entry="kb" if kb.is_dir() else f"kb/{kb.name}",
        )
        atomic_write_text(staging / MANIFEST, manifest.model_dump_json(indent=2))
        try:
            staging.rename(final)
        except OSError:  # another process stored the same snapshot first: same content
            if not (final / MANIFEST).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _stored(store: Path, snapshot_id: str) -> SnapshotManifest | None:
    path = store / snapshot_id / MANIFEST
    if not path.is_file():
        return None
    return read_json_model(path, SnapshotManifest, SnapshotError, "snapshot manifest")


def current(
    store: Path, manifest: SnapshotManifest, kb: Path, banks: Path, chosen_by: str = "current files"
) -> SnapshotRef:
    """Today's inputs: the files themselves (so problems name the user's files), with the
    snapshot of them that makes this evaluation reproducible later (or, for `newest_observed`,
    that snapshot's own copies)."""
    return SnapshotRef(
        snapshot_id=manifest.snapshot_id,
        directory=str(store / manifest.snapshot_id),
        kb_path=str(kb),
        banks_dir=str(banks),
        chosen_by=chosen_by,
    )


def newest_observed(
    store: Path, kb: Path, banks: Path, observations: Iterable[tuple[str | None, datetime]]
) -> SnapshotRef | None:
    """The first of `observations` (data version, when; newest first) whose snapshot is stored
    and was taken of these KB and banks paths (a run on another KB must not pick up the default
    KB's observations), read from the store."""
    sources = (str(kb.resolve()), str(banks.resolve()))
    for version, when in observations:
        manifest = _stored(store, version) if version else None
        if manifest is not None and (manifest.kb_source, manifest.banks_source) == sources:
            directory = store / manifest.snapshot_id
            chosen_by = f"observation at {when.isoformat(timespec='seconds')}"
            return current(store, manifest, directory / manifest.kb_entry, directory / "banks", chosen_by)
    return None
