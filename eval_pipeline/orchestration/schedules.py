"""Scheduled evaluations (`daily_evaluation`: the tick's date; `comparison_backfill`: the
`window_days` dates before it), each tick one asset backfill of its dates and models
(orchestration/backfill.py), so reports, diffs and comparisons run in dependency order.

What each runs, when, and whether it starts RUNNING come from `schedules.yaml` beside the models
file. A schedule launches runs, not backfills: its run request launches
`launch_evaluation_backfill`, a one-op job that submits the backfill. A tick whose paid models'
estimated spend (as `run --dry-run` estimates it) exceeds the budget per tick skips, saying so.
"""

from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path

import dagster as dg

from eval_pipeline.core.inputs.schedules import (
    SCHEDULES_FILE,
    BackfillSchedule,
    DailySchedule,
    ScheduleSettings,
    load_schedules,
)
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.defs.graph import ALL_ASSETS
from eval_pipeline.defs.resources import InputsResource, ProvidersResource
from eval_pipeline.location import location_paths
from eval_pipeline.orchestration.backfill import BACKFILL_TAG, submit_backfill
from eval_pipeline.providers.models import ModelConfig
from eval_pipeline.providers.pricing import usd
from eval_pipeline.providers.spend_estimate import estimate_spend
from eval_pipeline.runtime.dagster_private import IN_PROGRESS_RUN_STATUSES, AssetGraph, BulkActionStatus

SCHEDULE_TAG = "eval_pipeline/schedule"
LAUNCH_OP = "submit_backfill"


class BackfillRequest(dg.Config):
    """The dates and models a tick evaluates, and the schedule that asked."""

    dates: list[str]
    models: list[str]
    schedule: str


@dg.op(name=LAUNCH_OP)
def launch_backfill_op(context: dg.OpExecutionContext, config: BackfillRequest) -> None:
    """Submit the tick's asset backfill; the backfill daemon runs it."""
    # The graph the backfill's subset is drawn from (the code location's is not at hand in a step).
    graph = AssetGraph.from_assets(ALL_ASSETS)
    tags = {SCHEDULE_TAG: config.schedule, "launched_by": f"schedule {config.schedule}"}
    backfill_id = submit_backfill(context.instance, graph, config.dates, config.models, tags)
    context.log.info(f"backfill {backfill_id}: {', '.join(config.models)} over {', '.join(config.dates)}")


@dg.job(
    description="Submit one asset backfill of dates x models (what the schedules launch).",
    executor_def=dg.in_process_executor,
)
def launch_evaluation_backfill() -> None:
    launch_backfill_op()


def scheduled_models(
    listed: Sequence[str] | None, models: dict[str, ModelConfig], schedule: str
) -> list[str]:
    """The models a schedule evaluates: those listed (each an enabled model), else the enabled free ones."""
    if listed is None:
        return [key for key, cfg in models.items() if cfg.enabled and not cfg.cost_incurring]
    unknown = [key for key in listed if key not in models or not models[key].enabled]
    if unknown:
        raise dg.Failure(f"schedule {schedule}: {', '.join(unknown)} not an enabled model of the models file")
    return list(listed)


def over_budget(
    models: Sequence[str],
    dates: Sequence[str],
    budget: float,
    inputs: InputsResource,
    providers: ProvidersResource,
) -> str | None:
    """Why the tick must not run (its paid models' estimated spend over `budget`), or None."""
    configs = providers.models()
    paid = [configs[m] for m in models if configs[m].cost_incurring]
    if not paid:
        return None
    kb = inputs.load_kb(inputs.kb)
    banks, _ = inputs.load_banks(inputs.banks)
    embedded: set[tuple[str, str, str]] = set()
    mode = providers.mode()
    spends = [
        estimate_spend(cfg, kb.entities, banks, Scope(), Path(providers.cache_dir), mode, embedded=embedded)
        for cfg in paid
    ]
    unpriced = [s.model for s in spends if s.unpriced]
    if unpriced:
        return f"{', '.join(unpriced)}: no price known, so no spend estimate against the budget per tick"
    # Each date calls again at most what the first date's estimate does (the cache holds the rest).
    total = sum(s.cost_usd for s in spends) * len(dates)
    if total <= budget:
        return None
    return (
        f"estimated spend {usd(total)} ({', '.join(s.model for s in spends)} over {len(dates)} date(s)) "
        f"exceeds the budget per tick of {usd(budget)} (budget_per_tick_usd in {SCHEDULES_FILE})"
    )


def still_running(instance: dg.DagsterInstance, name: str, dates: Sequence[str]) -> str | None:
    """Why a tick must wait: an earlier tick's backfill of the same dates has not ended, or its
    run has not submitted it yet (a cron more frequent than a backfill lasts)."""
    span = dates[0] if len(dates) == 1 else f"{dates[0]}..{dates[-1]}"
    for backfill in instance.get_backfills(status=BulkActionStatus.REQUESTED):
        if backfill.tags.get(SCHEDULE_TAG) == name and backfill.tags.get(BACKFILL_TAG) == span:
            return f"backfill {backfill.backfill_id} of {span} from an earlier tick is still running"
    submitting = instance.get_runs(
        dg.RunsFilter(tags={SCHEDULE_TAG: name}, statuses=[*IN_PROGRESS_RUN_STATUSES]), limit=1
    )
    if submitting:
        return f"run {submitting[0].run_id} of an earlier tick has not submitted its backfill yet"
    return None


def _schedule(
    name: str,
    spec: DailySchedule | BackfillSchedule,
    budget: float,
    description: str,
    dates_of: Callable[[date], list[str]],
) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=name,
        cron_schedule=spec.cron,
        execution_timezone="UTC",
        job=launch_evaluation_backfill,
        default_status=dg.DefaultScheduleStatus.RUNNING if spec.enabled else dg.DefaultScheduleStatus.STOPPED,
        description=description,
    )
    def tick(
        context: dg.ScheduleEvaluationContext, inputs: InputsResource, providers: ProvidersResource
    ) -> dg.RunRequest | dg.SkipReason:
        dates = dates_of((context.scheduled_execution_time or datetime.now()).date())
        waiting = still_running(context.instance, name, dates)
        if waiting is not None:
            return dg.SkipReason(waiting)
        models = scheduled_models(spec.models, providers.models(), name)
        if not models:
            return dg.SkipReason(
                f"no model to evaluate: none listed and no enabled free model in {providers.models_file}"
            )
        reason = over_budget(models, dates, budget, inputs, providers)
        if reason is not None:
            return dg.SkipReason(reason)
        return dg.RunRequest(
            run_key=f"{name}:{dates[-1]}",
            run_config=dg.RunConfig(
                ops={LAUNCH_OP: BackfillRequest(dates=dates, models=models, schedule=name)}
            ),
            tags={SCHEDULE_TAG: name},
        )

    return tick


def build_schedules(settings: ScheduleSettings) -> list[dg.ScheduleDefinition]:
    """The project's two schedules, as its settings declare them."""
    days = settings.comparison_backfill.window_days
    return [
        _schedule(
            "daily_evaluation",
            settings.daily,
            settings.budget_per_tick_usd,
            "Evaluate the scheduled models for the new day, then compare them (one backfill).",
            lambda day: [day.isoformat()],
        ),
        _schedule(
            "comparison_backfill",
            settings.comparison_backfill,
            settings.budget_per_tick_usd,
            f"Evaluate and compare the scheduled models over the {days} dates before the tick's "
            "(one backfill).",
            lambda day: [(day - timedelta(days=n)).isoformat() for n in range(days, 0, -1)],
        ),
    ]


def project_schedules() -> list[dg.ScheduleDefinition]:
    """The code location's project's schedules (`schedules.yaml` beside its models file)."""
    return build_schedules(load_schedules(location_paths().models_file.with_name(SCHEDULES_FILE)))
