"""The asset's overview in the UI shows the latest date's result.

Dagster's overview shows a partitioned asset's latest materialisation event, whichever
partition: after a backfill of past dates, not today's. A step of an earlier date than the
latest stored records the latest date's materialisation again (naming the date that ran), so the
overview and its plots' last point stay on the newest date.
"""

from __future__ import annotations

import dagster as dg

from eval_pipeline.runtime.instance_queries import latest_materialization

SHOWN_AGAIN_AFTER = "shown_again_after"


def keep_latest_date_in_view(context: dg.AssetExecutionContext) -> None:
    """Call after the step's output: records the latest stored date again when this step's date
    is earlier."""
    date, key = context.partition_key, context.asset_key
    later = [p for p in context.instance.get_materialized_partitions(key) if p > date]
    if not later:
        return
    latest = max(later)
    record = latest_materialization(context.instance, key, latest)
    shown = record.asset_materialization if record is not None else None
    if shown is None:
        return
    context.log_event(
        dg.AssetMaterialization(
            asset_key=key,
            partition=latest,
            description=f"{latest} recorded again: {date} was evaluated later; nothing of {latest} changed",
            metadata={**shown.metadata, SHOWN_AGAIN_AFTER: date},
        )
    )
