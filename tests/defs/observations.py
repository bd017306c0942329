"""Seed an observation of the input files at a past time (a snapshot taken then, its id the data
version), as the automation's cron would have recorded it that day. Dagster stamps observations
with the clock, so the event is stored with the past timestamp directly."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_TAG
from dagster._core.events import AssetObservationData, DagsterEvent, DagsterEventType
from dagster._core.events.log import EventLogEntry

from eval_pipeline.core.inputs.snapshots import take_snapshot
from eval_pipeline.defs.inputs import input_files


def observed_on(instance: dg.DagsterInstance, store: Path, kb: Path, banks: Path, when: datetime) -> str:
    manifest = take_snapshot(store, kb, banks, when)
    observation = dg.AssetObservation(
        asset_key=input_files.key, tags={DATA_VERSION_TAG: manifest.snapshot_id}
    )
    event = DagsterEvent(
        event_type_value=DagsterEventType.ASSET_OBSERVATION.value,
        job_name="__runless__",
        event_specific_data=AssetObservationData(observation),
    )
    entry = EventLogEntry(  # type: ignore[no-untyped-call]
        error_info=None,
        level="INFO",
        user_message="",
        run_id="",
        timestamp=when.timestamp(),
        dagster_event=event,
    )
    instance.store_event(entry)
    return manifest.snapshot_id
