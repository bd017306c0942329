"""Opus calibration in Dagster: an on-demand, date-partitioned job and an opt-in KB sensor.

`opus_calibration_job` calibrates the scope in its run config and, only with `apply: true`,
writes history, raw responses and log record. A job, not an asset: it spends money, so never in
"Materialize all" or automation. Its history is a new version of the `history_files` source, from
which automation re-scores (no retrieval). `calibration_agreement` (no API call) compares the
proposals with the clinicians' decisions (kappa, CI, report). `kb_affected_calibration` (STOPPED,
and inert unless `CalibrationSettings.on_kb_change`) requests an `affected` calibration for the
entities added or changed since its last look.
"""

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, cast, get_args

import dagster as dg
from pydantic import Field

from eval_pipeline.core.calibration.agreement import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    MIN_TOPIC_TESTS,
    agreement_from_files,
    markdown,
)
from eval_pipeline.core.calibration.files import latest_documents
from eval_pipeline.core.calibration.proposals import Scope
from eval_pipeline.core.calibration.records import CalibrationRun
from eval_pipeline.core.calibration.scope import ScopeError, retrieved_entities
from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.inputs.history_file import Trigger
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks, InputError
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.markdown_text import table, text
from eval_pipeline.defs.inputs import history_files
from eval_pipeline.defs.metadata import readable
from eval_pipeline.defs.partitions import date_partitions
from eval_pipeline.defs.resources import InputsResource, StorageResource
from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.pricing import PricingError
from eval_pipeline.providers.ratelimit import RateLimiter
from eval_pipeline.runtime.dagster_private import DATA_VERSION_TAG

if TYPE_CHECKING:
    from eval_pipeline.providers.calibration_session import CalibrationPlan

GROUP = "calibration"


class CalibrationConfig(dg.Config):
    # Dagster config cannot take Literal types: scope and trigger are checked in `_checked`.
    scope: str = Field(default="full", description="full | affected | single")
    test_ids: list[str] = Field(default_factory=list, description="single scope")
    added_entities: list[str] = Field(default_factory=list, description="affected scope")
    apply: bool = Field(default=False, description="write history/responses/log; else a dry run")
    batch: bool = Field(default=False, description="Message Batches API: half price, slower")
    model: str | None = Field(default=None, description="default: the newest Opus in the pinned SDK")
    max_cost_usd: float | None = Field(default=None, description="fail before spending above this")
    trigger: str | None = Field(default=None, description="history trigger; default per scope")
    rate_per_min: float = 48.0  # the specification's pace: one call every 1.25 s
    concurrency: int = 4
    poll_interval_s: float = 10.0  # between looks at a Message Batch
    calibration_dir: str = "calibration"


class CalibrationSettings(dg.ConfigurableResource):  # type: ignore[type-arg]
    """What the KB sensor may do. Off by default: a calibration costs money."""

    on_kb_change: bool = False
    apply: bool = False
    model: str | None = None
    max_cost_usd: float | None = None


def _checked(config: CalibrationConfig) -> tuple[Scope, Trigger | None]:
    scopes, triggers = get_args(Scope), get_args(Trigger)
    if config.scope not in scopes:
        raise dg.Failure(f"scope must be one of {', '.join(scopes)}, not {config.scope!r}")
    if config.trigger is not None and config.trigger not in triggers:
        raise dg.Failure(f"trigger must be one of {', '.join(triggers)}, not {config.trigger!r}")
    return cast(Scope, config.scope), cast("Trigger | None", config.trigger)


def _validated(inputs: InputsResource) -> tuple[KnowledgeBase, Banks]:
    try:
        return load_validated(inputs.kb, inputs.banks)
    except InputError as exc:
        raise dg.Failure("\n".join(str(p) for p in exc.problems)) from None


# The calibrator's modules (and the Anthropic SDK) are imported by the op alone: the code
# location loads this module for every evaluation.


def _plan(config: CalibrationConfig, inputs: InputsResource, storage: StorageResource) -> "CalibrationPlan":
    from eval_pipeline.providers.calibration_session import plan_calibration
    from eval_pipeline.providers.calibrator import DEFAULT_MODEL

    kb, banks = _validated(inputs)
    scope, trigger = _checked(config)
    docs, _ = latest_documents(Path(storage.results_dir)) if scope == "affected" else ([], [])
    try:
        return plan_calibration(
            kb,
            banks.semantic_tests,
            banks.history,
            scope=scope,
            test_ids=config.test_ids,
            added_entities=config.added_entities,
            retrieved=retrieved_entities(docs),
            model=config.model or DEFAULT_MODEL,
            batch=config.batch,
            trigger=trigger,
        )
    except (ScopeError, PricingError) as exc:
        raise dg.Failure(str(exc)) from None


def _calibrate(config: CalibrationConfig, plan: "CalibrationPlan") -> CalibrationRun:
    from eval_pipeline.providers.calibration_session import CalibrationSession
    from eval_pipeline.providers.calibrator import CalibratorConfigError, api_key_from_env

    try:
        key = api_key_from_env()
    except CalibratorConfigError as exc:
        raise dg.Failure(str(exc)) from None

    async def calls() -> CalibrationRun:
        limiter = RateLimiter(config.rate_per_min, config.concurrency)
        session = CalibrationSession(plan, key, limiter, config.poll_interval_s)
        try:
            _, estimate = await session.estimate()
            if config.max_cost_usd is not None and estimate.typical_usd > config.max_cost_usd:
                raise dg.Failure(
                    f"estimate ~${estimate.typical_usd:.4f} exceeds max_cost_usd ${config.max_cost_usd:.4f}"
                )
            return await session.run()
        finally:
            await session.aclose()

    try:
        return asyncio.run(calls())
    except ProviderError as exc:
        raise dg.Failure(f"calibrator API: {exc}") from None


@dg.op(
    description="Opus proposes semantic-test expectations (dry run unless apply); on demand only.",
    tags={"kind": "calibration"},
    pool="anthropic",  # shares Anthropic's limit with evaluation runs (defs/pools.py)
)
def opus_calibration(
    context: dg.OpExecutionContext,
    config: CalibrationConfig,
    inputs: InputsResource,
    storage: StorageResource,
) -> dg.Output[None]:
    if config.apply and context.partition_key != today_utc():
        # History is stamped with the time it is written; a past partition would misdate it.
        raise dg.Failure(f"apply only for today's partition ({today_utc()}), not {context.partition_key}")
    plan = _plan(config, inputs, storage)
    if not plan.tests:
        return dg.Output(None, metadata={"applied": False, "tests": 0, "scope": config.scope})
    run = _calibrate(config, plan)
    from eval_pipeline.providers.calibration_session import keep

    kept = keep(run, plan, config.apply, inputs.banks, Path(config.calibration_dir))
    if config.apply:
        # The history source's new version, recorded now: the re-score needs no next observation.
        version = {DATA_VERSION_TAG: inputs.history_hash()}
        context.log_event(dg.AssetObservation(asset_key=history_files.key, tags=version))
    return dg.Output(None, metadata=_metadata(run, plan.why, config.apply, kept.history, kept.review))


def _proposals(run: CalibrationRun) -> list[dict[str, object]]:
    """Every proposal with the raw answer it came from, for review in the UI."""
    raw = {c.test_id: c.response for c in run.calls}
    return [
        {
            "test_id": d.test_id,
            "changed": d.changed,
            "conflict": d.conflict,
            "previous_source": d.previous_source,
            "previous": d.previous.model_dump(mode="json"),
            "proposed": d.proposed.model_dump(mode="json"),
            "reasoning": d.reasoning,
            "raw_response": raw.get(d.test_id),
        }
        for d in run.diffs
    ]


def _metadata(
    run: CalibrationRun,
    why: dict[str, list[str]],
    applied: bool,
    history: Path | None,
    review: Path | None,
) -> dict[str, "dg.RawMetadataValue"]:
    rows = [
        (
            text(d.test_id),
            "conflict" if d.conflict else "changed",
            text(d.previous_source),
            text(", ".join(d.previous.expected_primary)),
            text(", ".join(d.proposed.expected_primary)),
            text(", ".join(d.proposed.expected_secondary) or "-"),
        )
        for d in run.changed
    ]
    header = ("test", "status", "was", "primary was", "primary", "secondary")
    rejected = [
        f"- {text(o.test_id)} ({o.status}): {text(o.reason)}" for o in run.outcomes if o.status != "proposed"
    ]
    coverage = run.coverage
    metadata: dict[str, dg.RawMetadataValue] = {
        "applied": applied,
        "history_file": str(history) if history else "",
        "review_file": str(review) if review else "",
        "scope": run.scope,
        "tests": len(run.calls),
        "changed": len(run.changed),
        "unchanged": len(run.diffs) - len(run.changed),
        "conflicts": sum(d.conflict for d in run.diffs),
        "rejected": run.count("rejected"),
        "errored": run.count("errored"),
        "calibration_cost_usd": run.cost_usd,
        "kb_prefix_tokens": run.prefix_tokens,
        "min_cache_read_coverage": min(coverage) if coverage else -1.0,
        "changes": dg.MetadataValue.md("\n".join(table(header, rows)) if rows else "no changes"),
        "problems": dg.MetadataValue.md("\n".join(rejected) or "none"),
        "affected_because": dg.MetadataValue.json(why),
        "proposals": dg.MetadataValue.json(_proposals(run)),
    }
    return readable(metadata)


@dg.job(
    name="opus_calibration_job",
    partitions_def=date_partitions,
    description="Opus calibration of the semantic expectations (costs money; never automated).",
)
def calibration_job() -> None:
    opus_calibration()


@dg.sensor(
    job=calibration_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="KB entities added or changed: calibrate the affected tests (opt-in, costs money).",
)
def kb_affected_calibration(
    context: dg.SensorEvaluationContext, inputs: InputsResource, calibration_settings: CalibrationSettings
) -> dg.SensorResult | dg.SkipReason:
    if not calibration_settings.on_kb_change:
        return dg.SkipReason("off: set CalibrationSettings.on_kb_change to calibrate on KB changes")
    try:
        kb = inputs.load_kb(inputs.kb)
    except InputError as exc:
        return dg.SkipReason(f"KB does not load: {exc.problems[0] if exc.problems else exc}")
    current = {e.entity_id: e.content_hash for e in kb.entities}
    cursor = json.dumps(current, sort_keys=True)
    if context.cursor is None:
        return dg.SensorResult(cursor=cursor, skip_reason="first look: KB remembered, nothing to compare")
    previous: dict[str, str] = json.loads(context.cursor)
    touched = sorted(eid for eid, digest in current.items() if previous.get(eid) != digest)
    if not touched:
        return dg.SensorResult(cursor=cursor, skip_reason="no entity added or changed")
    config = CalibrationConfig(
        scope="affected",
        added_entities=touched,
        apply=calibration_settings.apply,
        model=calibration_settings.model,
        max_cost_usd=calibration_settings.max_cost_usd,
        trigger="kb_change",
    )
    request = dg.RunRequest(
        run_key=f"kb-calibration-{kb.content_hash[:16]}",
        partition_key=today_utc(),
        run_config=dg.RunConfig(ops={opus_calibration.name: config}),
    )
    return dg.SensorResult(run_requests=[request], cursor=cursor)


class AgreementConfig(dg.Config):
    calibration_dir: str = Field(default="calibration", description="where the review files are")
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    min_topic_tests: int = MIN_TOPIC_TESTS


@dg.asset(
    group_name=GROUP,
    deps=[history_files],
    description="Calibrator proposals vs human decisions (reviews, overrides): percent, Cohen's kappa, CI.",
)
def calibration_agreement(config: AgreementConfig, inputs: InputsResource) -> dg.MaterializeResult[None]:
    _, banks = _validated(inputs)
    report, unreadable = agreement_from_files(
        Path(config.calibration_dir),
        banks,
        resamples=config.resamples,
        seed=config.seed,
        min_topic_tests=config.min_topic_tests,
    )
    o = report.overall
    return dg.MaterializeResult(
        metadata=readable(
            {
                "judgements": report.judgements,
                "pairs": o.pairs,
                # Numeric series plot per materialisation; -1 stands for "undefined" (no variation).
                "percent_agreement": o.percent_agreement if o.percent_agreement is not None else -1.0,
                "kappa": o.kappa if o.kappa is not None else -1.0,
                "kappa_ci_low": o.kappa_ci[0] if o.kappa_ci else -1.0,
                "kappa_ci_high": o.kappa_ci[1] if o.kappa_ci else -1.0,
                "by_kind": dg.MetadataValue.json(report.by_kind),
                "by_topic": dg.MetadataValue.json(
                    {t: s.model_dump(mode="json") for t, s in report.by_topic.items()}
                ),
                "disagreements": len(report.disagreements),
                "report": dg.MetadataValue.md(markdown(report)),
                "unreadable_reviews": dg.MetadataValue.json(unreadable),
            }
        )
    )
