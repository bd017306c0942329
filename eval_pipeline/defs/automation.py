"""Sensors and schedules. Anything that can spend money on APIs starts STOPPED.

- `kb_version_sensor_*`: the KB's content changed -> everything downstream of the KB, today.
- `history_sensor_*`: expectation history changed -> the expectation snapshot and scoring only
  (no retrieval is re-run).
- `model_comparison_*`: daily, every enabled model of the tier, today.
Each comes in a `local` tier (free models, RUNNING) and an `api` tier (cost-incurring, STOPPED).
"""


from collections.abc import Callable

import dagster as dg

from eval_pipeline.defs.graph import MATERIALIZABLE, downstream_of, everything, staged_requests
from eval_pipeline.defs.inputs import expectation_history, knowledge_base
from eval_pipeline.defs.partitions import MODEL_DIM, today_utc
from eval_pipeline.defs.resources import InputsResource, ProvidersResource

TIERS = {"local": (False, dg.DefaultSensorStatus.RUNNING), "api": (True, dg.DefaultSensorStatus.STOPPED)}
COMPARISON_CRON = "0 6 * * *"


def tier_models(providers: ProvidersResource, cost_incurring: bool) -> list[str]:
    return [k for k, m in providers.models().items() if m.enabled and m.cost_incurring == cost_incurring]


def _add_models(models: list[str]) -> list[dg.AddDynamicPartitionsRequest]:
    return [dg.AddDynamicPartitionsRequest(partitions_def_name=MODEL_DIM, partition_keys=models)]


def _change_sensor(
    name: str,
    fingerprint: Callable[[InputsResource], str],
    keys: set[dg.AssetKey],
    tier: str,
    description: str,
) -> dg.SensorDefinition:
    cost_incurring, status = TIERS[tier]

    @dg.sensor(
        name=f"{name}_{tier}",
        description=description,
        asset_selection=sorted(keys),
        minimum_interval_seconds=60,
        default_status=status,
    )
    def _sensor(
        context: dg.SensorEvaluationContext, inputs: InputsResource, providers: ProvidersResource
    ) -> dg.SensorResult | dg.SkipReason:
        current = fingerprint(inputs)
        if context.cursor == current:
            return dg.SkipReason("no change")
        models = tier_models(providers, cost_incurring)
        date = today_utc()
        return dg.SensorResult(
            run_requests=staged_requests(keys, date, models, f"{name}-{current[:12]}"),
            cursor=current,
            dynamic_partitions_requests=_add_models(models),
        )

    return _sensor


def _comparison_schedule(tier: str) -> dg.ScheduleDefinition:
    cost_incurring, status = TIERS[tier]

    @dg.schedule(
        name=f"model_comparison_{tier}",
        cron_schedule=COMPARISON_CRON,
        execution_timezone="UTC",
        target=MATERIALIZABLE,
        default_status=dg.DefaultScheduleStatus(status.value),
        description=f"Daily evaluation of every enabled {tier} model, for comparison.",
    )
    def _schedule(context: dg.ScheduleEvaluationContext, providers: ProvidersResource) -> list[dg.RunRequest]:
        models = tier_models(providers, cost_incurring)
        date = context.scheduled_execution_time.date().isoformat()
        instance = context.instance
        existing = set(instance.get_dynamic_partitions(MODEL_DIM))
        if missing := [m for m in models if m not in existing]:
            instance.add_dynamic_partitions(MODEL_DIM, missing)
        return staged_requests(everything(), date, models, f"comparison-{tier}")

    return _schedule


KB_DOWNSTREAM = downstream_of(knowledge_base)
HISTORY_DOWNSTREAM = downstream_of(expectation_history)

SENSORS = [
    sensor
    for tier in TIERS
    for sensor in (
        _change_sensor(
            "kb_version_sensor",
            InputsResource.kb_hash,
            KB_DOWNSTREAM,
            tier,
            "KB content changed: re-evaluate everything downstream of the KB for today.",
        ),
        _change_sensor(
            "history_sensor",
            InputsResource.history_hash,
            HISTORY_DOWNSTREAM,
            tier,
            "Expectation history changed: re-score only (retrievals are reused).",
        ),
    )
]
SCHEDULES = [_comparison_schedule(tier) for tier in TIERS]
