"""Later dates follow an earlier one: a model's report for a date made after its next later
evaluation (a UI backfill, automation of a past date) has that later date's regression diff made
again, as its baseline may now be this date. A sensor, as "the next evaluated date" is no
partition mapping; free (the diff reads stored files) and idempotent (a diff made after the
report asks for nothing).
"""

import dagster as dg

from eval_pipeline.defs.automation import rediff_job
from eval_pipeline.defs.partitions import model_and_date, model_date_key
from eval_pipeline.defs.resources import StorageResource
from eval_pipeline.providers.evaluation_index import next_evaluated_date
from eval_pipeline.runtime.instance_queries import latest_materialization

RUN_REPORT = dg.AssetKey("run_report")
REGRESSION_DIFF = dg.AssetKey("regression_diff")
BATCH = 200  # reports read per tick; the cursor carries on from the last one


@dg.sensor(
    job=rediff_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Make a later date's regression diff again once an earlier date is evaluated after it.",
)
def later_date_diffs(context: dg.SensorEvaluationContext, storage: StorageResource) -> dg.SensorResult:
    after = int(context.cursor) if context.cursor else None
    reports = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=RUN_REPORT, after_storage_id=after), limit=BATCH, ascending=True
    ).records
    requests: dict[dg.MultiPartitionKey, dg.RunRequest] = {}
    for record in reports:
        if record.partition_key is None:
            continue
        model, date = model_and_date(record.partition_key)
        later = next_evaluated_date(storage.results_root, model, date)
        if later is None:
            continue
        key = model_date_key(model, later)
        diffed = latest_materialization(context.instance, REGRESSION_DIFF, str(key))
        if diffed is None or diffed.storage_id < record.storage_id:  # not made since the report
            requests[key] = dg.RunRequest(run_key=f"{key}@{record.storage_id}", partition_key=str(key))
    cursor = str(reports[-1].storage_id) if reports else context.cursor
    return dg.SensorResult(run_requests=list(requests.values()), cursor=cursor)
