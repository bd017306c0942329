"""Jobs and automation sensors (the conditions are in `automation_conditions`).

`evaluation_automation` materialises what the conditions ask for (paid models only with
`automate: true`); `model_partitions` adds a partition per enabled model of the models file;
`later_date_diffs` makes a later date's regression diff again once an earlier date is evaluated
after it (a UI backfill, automation of a past date), as its baseline may now be that date: a
sensor, as "the next evaluated date" is no partition mapping; free (the diff reads stored files)
and idempotent (a diff made after the report asks for nothing). The named jobs are the stages
the command line runs, so CLI runs show in the UI by name.
"""

import dagster as dg

from eval_pipeline.defs.graph import COMPARISON, DATE_STAGE, EVALUATION, PER_MODEL
from eval_pipeline.defs.partitions import (
    MODEL_DIM,
    date_partitions,
    model_and_date,
    model_date_key,
    model_date_partitions,
)
from eval_pipeline.defs.resources import ProvidersResource, StorageResource
from eval_pipeline.providers.evaluation_index import next_evaluated_date
from eval_pipeline.runtime.instance_queries import latest_materialization

date_job = dg.define_asset_job("evaluate_date", selection=sorted(DATE_STAGE), partitions_def=date_partitions)
model_job = dg.define_asset_job(
    "evaluate_model", selection=sorted(PER_MODEL), partitions_def=model_date_partitions
)
# A model's report, gate and diff rebuilt with what was evaluated again (orchestration/reevaluation_runs.py).
reevaluation_job = dg.define_asset_job(
    "reevaluate_model",
    selection=["run_report", "release_gate", "regression_diff"],
    partitions_def=model_date_partitions,
)
# A later date's regression diff made again, its baseline maybe an earlier date evaluated since.
rediff_job = dg.define_asset_job(
    "rediff_later_date", selection=["regression_diff"], partitions_def=model_date_partitions
)
comparison_job = dg.define_asset_job(
    "compare_models", selection=sorted(COMPARISON), partitions_def=date_partitions
)

evaluation_automation = dg.AutomationConditionSensorDefinition(
    "evaluation_automation",
    target=EVALUATION,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Evaluate what changed: new day, KB/bank/history edits, newly enabled models (free ones).",
)


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Add a model partition for each enabled model of the models file.",
)
def model_partitions(
    context: dg.SensorEvaluationContext, providers: ProvidersResource
) -> dg.SensorResult | dg.SkipReason:
    existing = set(context.instance.get_dynamic_partitions(MODEL_DIM))
    new = [key for key, cfg in providers.models().items() if cfg.enabled and key not in existing]
    if not new:
        return dg.SkipReason("every enabled model has its partition")
    # A tick that launches no run is recorded as skipped: its reason says what was added.
    return dg.SensorResult(
        skip_reason=f"added model partition(s) {', '.join(new)}: evaluation_automation evaluates them",
        dynamic_partitions_requests=[
            dg.AddDynamicPartitionsRequest(partitions_def_name=MODEL_DIM, partition_keys=new)
        ],
    )


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


JOBS = [date_job, model_job, reevaluation_job, rediff_job, comparison_job]
