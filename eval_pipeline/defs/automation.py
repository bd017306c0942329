"""Jobs and automation sensors (the conditions are in `automation_conditions`).

`evaluation_automation` materialises what the conditions ask for (paid models only with
`automate: true`); `model_partitions` adds a partition per enabled model of the models file; the
named jobs are the stages the command line runs, so CLI runs show in the UI by name.
"""

import dagster as dg

from eval_pipeline.defs.graph import COMPARISON, DATE_STAGE, EVALUATION, PER_MODEL
from eval_pipeline.defs.partitions import MODEL_DIM, date_partitions, model_date_partitions
from eval_pipeline.defs.resources import ProvidersResource

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


JOBS = [date_job, model_job, reevaluation_job, rediff_job, comparison_job]
SENSORS: list[dg.SensorDefinition] = [evaluation_automation, model_partitions]
