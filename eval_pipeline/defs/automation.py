"""Jobs, sensors and schedules. Anything that can spend money on APIs starts STOPPED.

A run cannot mix date-partitioned and model x date assets, so evaluation is two jobs:
`evaluate_date` (inputs, expectation snapshot, deterministic mechanisms) and `evaluate_model`
(one run per model). Triggers launch the date stage tagged with a tier and a scope; when it
succeeds, `chain_model_runs` launches that tier's model runs for the same date and scope, so a
model run never reads a date's inputs before they exist.

- `kb_version_sensor_*`: the KB content changed -> everything downstream of the KB, today.
- `history_sensor_*`: the expectation history changed -> the snapshot and scoring only (no
  retrieval is re-run).
- `model_comparison_*`: daily, every enabled model of the tier, today.
Each comes in a `local` tier (free models, RUNNING) and an `api` tier (cost-incurring, STOPPED).
"""

from collections.abc import Callable, Mapping

import dagster as dg

from eval_pipeline.defs.diffs import model_comparison, regression_diff
from eval_pipeline.defs.graph import DATE_STAGE, PER_MODEL, UNPARTITIONED, downstream_of, everything
from eval_pipeline.defs.inputs import expectation_history, knowledge_base
from eval_pipeline.defs.partitions import (
    MODEL_DIM,
    date_partitions,
    model_date_key,
    model_date_partitions,
    today_utc,
)
from eval_pipeline.defs.reports import run_report
from eval_pipeline.defs.resources import InputsResource, ProvidersResource

TIERS = {"local": (False, dg.DefaultSensorStatus.RUNNING), "api": (True, dg.DefaultSensorStatus.STOPPED)}
COMPARISON_CRON = "0 6 * * *"
TIER_TAG, SCOPE_TAG = "eval_pipeline/tier", "eval_pipeline/scope"

KB_DOWNSTREAM = downstream_of(knowledge_base)
HISTORY_DOWNSTREAM = downstream_of(expectation_history)
SCOPES: dict[str, set[dg.AssetKey]] = {
    "all": everything(),
    "kb": KB_DOWNSTREAM,
    "history": HISTORY_DOWNSTREAM,
}

date_job = dg.define_asset_job("evaluate_date", selection=sorted(DATE_STAGE), partitions_def=date_partitions)
model_job = dg.define_asset_job(
    "evaluate_model", selection=sorted(PER_MODEL), partitions_def=model_date_partitions
)


def tier_models(providers: ProvidersResource, cost_incurring: bool) -> list[str]:
    return [k for k, m in providers.models().items() if m.enabled and m.cost_incurring == cost_incurring]


diff_job = dg.define_asset_job(
    "diff_model", selection=[regression_diff.key], partitions_def=model_date_partitions
)
comparison_job = dg.define_asset_job(
    "compare_models", selection=[model_comparison.key], partitions_def=date_partitions
)


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None) -> float | None:
    """Timestamp of the newest materialisation of `key` (for `partition`), if any."""
    partitions = [partition] if partition is not None else None
    filter_ = dg.AssetRecordsFilter(asset_key=key, asset_partitions=partitions)
    records = instance.fetch_materializations(filter_, limit=1).records
    return records[0].timestamp if records else None


def _materialized(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None) -> bool:
    return _latest(instance, key, partition) is not None


def with_missing(
    instance: dg.DagsterInstance | None, scope: set[dg.AssetKey], stage: set[dg.AssetKey], partition: str
) -> list[dg.AssetKey]:
    """The scope's assets in this stage, plus any of the stage's assets not yet materialised for
    this partition: a narrow trigger (a history edit, a new day) must not read inputs that were
    never produced."""
    selected = scope & stage
    if instance is not None:
        for key in sorted(stage - selected):
            part = None if key in UNPARTITIONED else partition
            if not _materialized(instance, key, part):
                selected.add(key)
    return sorted(selected)


def date_stage_request(
    scope: str, tier: str, date: str, run_key: str, instance: dg.DagsterInstance | None = None
) -> dg.RunRequest:
    return dg.RunRequest(
        job_name=date_job.name,
        asset_selection=with_missing(instance, SCOPES[scope], set(DATE_STAGE), date),
        partition_key=date,
        run_key=run_key,
        tags={TIER_TAG: tier, SCOPE_TAG: scope},
    )


def model_stage_requests(
    tags: Mapping[str, str], date: str, models: list[str], instance: dg.DagsterInstance | None = None
) -> list[dg.RunRequest]:
    """The model runs that follow a successful date stage with these tags."""
    scope = SCOPES[tags.get(SCOPE_TAG, "all")]
    requests = []
    for m in models:
        key = model_date_key(m, date)
        requests.append(
            dg.RunRequest(
                job_name=model_job.name,
                asset_selection=with_missing(instance, scope, set(PER_MODEL), str(key)),
                partition_key=key,
                tags={**tags, "model": m},
            )
        )
    return requests


def _change_sensor(
    name: str,
    fingerprint: Callable[[InputsResource], str],
    scope: str,
    tier: str,
    description: str,
    first_tick_scope: str | None,
) -> dg.SensorDefinition:
    _, status = TIERS[tier]

    @dg.sensor(
        name=f"{name}_{tier}",
        description=description,
        jobs=[date_job],
        minimum_interval_seconds=60,
        default_status=status,
    )
    def _sensor(
        context: dg.SensorEvaluationContext, inputs: InputsResource
    ) -> dg.SensorResult | dg.SkipReason:
        current = fingerprint(inputs)
        if context.cursor == current:
            return dg.SkipReason("no change")
        # The first tick has nothing to compare with: it evaluates everything once, or (for a
        # sensor whose first evaluation another sensor already covers) only records the cursor.
        run_scope = scope if context.cursor else first_tick_scope
        if run_scope is None:
            return dg.SensorResult(cursor=current)
        date = today_utc()
        run_key = f"{name}-{tier}-{current[:16]}-{date}"
        request = date_stage_request(run_scope, tier, date, run_key, context.instance)
        return dg.SensorResult(run_requests=[request], cursor=current)

    return _sensor


def _comparison_schedule(tier: str) -> dg.ScheduleDefinition:
    _, status = TIERS[tier]

    @dg.schedule(
        name=f"model_comparison_{tier}",
        cron_schedule=COMPARISON_CRON,
        execution_timezone="UTC",
        job=date_job,
        default_status=dg.DefaultScheduleStatus(status.value),
        description=f"Daily evaluation of every enabled {tier} model, for comparison.",
    )
    def _schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        date = context.scheduled_execution_time.date().isoformat()
        return date_stage_request("all", tier, date, f"comparison-{tier}-{date}")

    return _schedule


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[date_job],
    request_job=model_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After a date stage succeeds, run each model of its tier for that date.",
)
def chain_model_runs(
    context: dg.RunStatusSensorContext, providers: ProvidersResource
) -> dg.SensorResult | dg.SkipReason:
    tags = dict(context.dagster_run.tags)
    tier = tags.get(TIER_TAG)
    date = tags.get("dagster/partition")
    if tier not in TIERS or date is None:
        return dg.SkipReason("not an evaluation date stage")
    models = tier_models(providers, TIERS[tier][0])
    return dg.SensorResult(
        run_requests=model_stage_requests(
            {TIER_TAG: tier, SCOPE_TAG: tags.get(SCOPE_TAG, "all")}, date, models
        ),
        dynamic_partitions_requests=[
            dg.AddDynamicPartitionsRequest(partitions_def_name=MODEL_DIM, partition_keys=models)
        ],
    )


def diff_requests(instance: dg.DagsterInstance, date: str) -> list[dg.RunRequest]:
    """Regression diffs for models whose report is newer than their diff, and a comparison when
    any report of the date is newer than the last comparison. Diffs cost nothing: every tier."""
    reports: dict[str, float] = {}
    for model in instance.get_dynamic_partitions(MODEL_DIM):
        stamp = _latest(instance, run_report.key, str(model_date_key(model, date)))
        if stamp is not None:
            reports[model] = stamp
    requests = []
    for model, stamp in sorted(reports.items()):
        key = model_date_key(model, date)
        if (_latest(instance, regression_diff.key, str(key)) or 0) < stamp:
            requests.append(
                dg.RunRequest(job_name=diff_job.name, partition_key=key, run_key=f"diff-{key}-{stamp}")
            )
    newest = max(reports.values(), default=None)
    if newest is not None and (_latest(instance, model_comparison.key, date) or 0) < newest:
        requests.append(
            dg.RunRequest(
                job_name=comparison_job.name, partition_key=date, run_key=f"compare-{date}-{newest}"
            )
        )
    return requests


@dg.sensor(
    jobs=[diff_job, comparison_job],
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After model reports are written: regression diffs and today's model comparison.",
)
def diffs_after_reports(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    requests = diff_requests(context.instance, today_utc())
    return dg.SensorResult(run_requests=requests) if requests else dg.SkipReason("diffs up to date")


JOBS = [date_job, model_job, diff_job, comparison_job]
SENSORS: list[dg.SensorDefinition] = [
    *(
        sensor
        for tier in TIERS
        for sensor in (
            _change_sensor(
                "kb_version_sensor",
                InputsResource.kb_hash,
                "kb",
                tier,
                "KB content changed: re-evaluate everything downstream of the KB for today.",
                first_tick_scope="all",
            ),
            _change_sensor(
                "history_sensor",
                InputsResource.history_hash,
                "history",
                tier,
                "Expectation history changed: re-score only (retrievals are reused).",
                first_tick_scope=None,
            ),
        )
    ),
    chain_model_runs,
    diffs_after_reports,
]
SCHEDULES = [_comparison_schedule(tier) for tier in TIERS]
