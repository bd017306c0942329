"""Input assets: the KB and bank files as observed on disk, the snapshot each date evaluates,
and that date's KB, banks and expectation history.

Each observation of the KB and banks (on a cron) stores a content-addressed snapshot.
`input_snapshot[D]` picks date D's inputs, which everything downstream reads: for a past date the
snapshot current at its end, else the current files (snapshotted, to be reproduced later).
"""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from eval_pipeline.core.dates import end_of_day, now_utc, today_utc
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.history_file import LoadedHistory
from eval_pipeline.core.inputs.kb import KnowledgeBase, LoadMode
from eval_pipeline.core.inputs.loading import Banks, InputError, history_hash
from eval_pipeline.core.inputs.snapshots import (
    SnapshotError,
    SnapshotRef,
    current,
    newest_observed,
    take_snapshot,
)
from eval_pipeline.core.inputs.validation import cross_check
from eval_pipeline.core.markdown_text import text
from eval_pipeline.defs.automation_conditions import OBSERVE, evaluation_asset
from eval_pipeline.defs.partitions import date_partitions
from eval_pipeline.defs.resources import InputsResource, StorageResource
from eval_pipeline.runtime.instance_queries import observations_before

GROUP = "inputs"
JSON_IO = "json_io"


class HistorySet(FrozenModel):
    files: list[LoadedHistory]
    content_hash: str


def _failure(exc: InputError) -> dg.Failure:
    lines = [str(p) for p in exc.problems]
    return dg.Failure(description="\n".join(lines), metadata={"problems": len(lines)})


@dg.observable_source_asset(
    group_name=GROUP,
    automation_condition=OBSERVE,
    description="KB and bank files on disk; each new version is stored as a snapshot (version = hash)",
)
def input_files(inputs: InputsResource, storage: StorageResource) -> dg.DataVersion:
    manifest = take_snapshot(storage.snapshot_store, inputs.kb, inputs.banks, now_utc())
    return dg.DataVersion(manifest.snapshot_id)


@dg.observable_source_asset(
    group_name=GROUP, automation_condition=OBSERVE, description="Expectation history files on disk"
)
def history_files(inputs: InputsResource) -> dg.DataVersion:
    return dg.DataVersion(inputs.history_hash())


@evaluation_asset(GROUP, date_partitions, JSON_IO, deps=[input_files])
def input_snapshot(
    context: dg.AssetExecutionContext, inputs: InputsResource, storage: StorageResource
) -> dg.Output[SnapshotRef]:
    """Which KB and banks this date evaluates: the snapshot current at the end of the date, or
    (today, or nothing observed) the current files."""
    date = context.partition_key
    seen = (
        observations_before(context.instance, input_files.key, end_of_day(date))
        if date < today_utc()
        else iter(())
    )
    try:
        ref = newest_observed(storage.snapshot_store, inputs.kb, inputs.banks, seen)
    except SnapshotError as exc:
        raise dg.Failure(description=str(exc)) from None
    if ref is None:
        manifest = take_snapshot(storage.snapshot_store, inputs.kb, inputs.banks, now_utc())
        ref = current(storage.snapshot_store, manifest, inputs.kb, inputs.banks)
    return dg.Output(
        ref,
        metadata={"snapshot": ref.snapshot_id[:12], "chosen_by": ref.chosen_by, "directory": ref.directory},
    )


@evaluation_asset(GROUP, date_partitions, JSON_IO)
def knowledge_base(inputs: InputsResource, input_snapshot: SnapshotRef) -> dg.Output[KnowledgeBase]:
    """The parsed KB of the date. Its data version is the content hash every result carries."""
    try:
        kb = inputs.load_kb(Path(input_snapshot.kb_path))
    except InputError as exc:
        raise _failure(exc) from None
    modes = {m.value: len(kb.with_mode(m)) for m in LoadMode}
    return dg.Output(
        kb,
        data_version=dg.DataVersion(kb.content_hash),
        metadata={
            "kb_version": kb.kb_version,
            "kb_hash": kb.content_hash,
            "entities": len(kb.entities),
            "snapshot": input_snapshot.label,
            **modes,
        },
    )


@evaluation_asset(
    GROUP,
    date_partitions,
    JSON_IO,
    check_specs=[
        dg.AssetCheckSpec(
            "banks_reference_known_entities",
            asset="test_banks",
            blocking=True,
            description="Every entity a bank test names exists in the date's KB (blocking: scoring "
            "waits for it).",
        )
    ],
)
def test_banks(
    inputs: InputsResource, knowledge_base: KnowledgeBase, input_snapshot: SnapshotRef
) -> Iterator[dg.Output[Banks] | dg.AssetCheckResult]:
    """The four banks and the pattern rules of the date, cross-checked against its KB (blocking)."""
    banks, problems = inputs.load_banks(Path(input_snapshot.banks_dir))
    problems += cross_check(knowledge_base, Path(input_snapshot.kb_path), banks)
    counts = {m.value: n for m, n in banks.counts().items()}
    yield dg.Output(banks, metadata={**counts, "bank_hashes": dg.MetadataValue.json(banks.file_hashes)})
    yield dg.AssetCheckResult(
        check_name="banks_reference_known_entities",
        passed=not problems,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"problems": dg.MetadataValue.md("\n".join(f"- {text(p)}" for p in problems) or "none")},
    )


@evaluation_asset(GROUP, date_partitions, JSON_IO, deps=[history_files])
def expectation_history(inputs: InputsResource) -> dg.Output[HistorySet]:
    """Every calibration and human override, in the order they were written (the snapshot of
    expectations for the date is taken from these, as of the date's end)."""
    try:
        files = inputs.load_history()
    except InputError as exc:
        raise _failure(exc) from None
    content = history_hash(files)
    return dg.Output(
        HistorySet(files=files, content_hash=content),
        data_version=dg.DataVersion(content),
        metadata={"files": len(files), "history_hash": content},
    )
