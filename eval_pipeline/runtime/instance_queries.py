"""What the definitions and the command line read back from the Dagster instance: the events an
asset recorded, by partition or before a date."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg

RETRIEVALS = dg.AssetKey("semantic_retrievals")


def latest_materialization(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition_key: str
) -> dg.EventLogRecord | None:
    """The latest materialisation of `key` for one of its partitions."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition_key]), limit=1
    ).records
    return records[0] if records else None


def evaluation_id(instance: dg.DagsterInstance, partition_key: str) -> str | None:
    """The run whose retrievals the partition's report scores: what re-evaluations apply to."""
    record = latest_materialization(instance, RETRIEVALS, partition_key)
    return record.run_id if record is not None else None


def observations_before(
    instance: dg.DagsterInstance, key: dg.AssetKey, before: datetime
) -> Iterator[tuple[str | None, datetime]]:
    """The data versions an observable source recorded before `before`, newest first, with when
    each was observed (page by page)."""
    filter_ = dg.AssetRecordsFilter(asset_key=key, before_timestamp=before.timestamp())
    cursor = None
    while True:
        page = instance.fetch_observations(filter_, limit=100, cursor=cursor)
        for record in page.records:
            observation = record.asset_observation
            yield (
                (observation.data_version if observation else None),
                datetime.fromtimestamp(record.timestamp, UTC),
            )
        if not page.has_more:
            return
        cursor = page.cursor
