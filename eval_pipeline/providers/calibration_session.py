"""One calibration, the same steps for `eval-pipeline calibrate` and `opus_calibration_job`:
choose the tests, estimate the cost (free token counting), call the calibrator, record the run,
then write it (apply: history, responses, log) or keep it for review. The callers only decide
how to report, how to refuse (a CLI error, a Dagster failure) and what to do after the estimate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from eval_pipeline.core.calibration.files import apply_calibration
from eval_pipeline.core.calibration.prompt import user_turn
from eval_pipeline.core.calibration.proposals import DEFAULT_TRIGGERS, Scope, judge
from eval_pipeline.core.calibration.records import CalibrationRun
from eval_pipeline.core.calibration.review import review_from_run, write_review
from eval_pipeline.core.calibration.scope import scoped_tests
from eval_pipeline.core.dates import now_utc
from eval_pipeline.core.expectations.resolution import ResolvedExpectation, resolve
from eval_pipeline.core.inputs.banks import SemanticTest
from eval_pipeline.core.inputs.history_file import LoadedHistory, Trigger
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import history_dir
from eval_pipeline.providers.anthropic_client import BatchProgress
from eval_pipeline.providers.calibrator import (
    CalibrationPrompt,
    Calibrator,
    CostEstimate,
    Progress,
    TokenCount,
    calibrator_access,
    calls_cost,
    estimate_cost,
)
from eval_pipeline.providers.pricing import Price, load_price_overrides, lookup_price
from eval_pipeline.providers.ratelimit import RateLimiter


@dataclass(frozen=True)
class CalibrationPlan:
    """What one calibration covers: `bank` is every semantic test (a review file fingerprints
    it), `tests` the scope, `why` each scoped test's reason (affected scope)."""

    kb: KnowledgeBase
    bank: list[SemanticTest]
    tests: list[SemanticTest]
    resolved: dict[str, ResolvedExpectation]
    why: dict[str, list[str]]
    scope: Scope
    trigger: Trigger
    added_entities: list[str]
    model: str
    batch: bool
    price: Price


def plan_calibration(
    kb: KnowledgeBase,
    bank: list[SemanticTest],
    history: Sequence[LoadedHistory],
    *,
    scope: Scope,
    test_ids: Sequence[str],
    added_entities: Sequence[str],
    retrieved: Mapping[str, set[str]],
    model: str,
    batch: bool,
    trigger: Trigger | None = None,
) -> CalibrationPlan:
    """Raises ScopeError (bad ids for the scope) and PricingError (a model without a price)."""
    resolved = resolve(bank, history)
    chosen, why = scoped_tests(scope, bank, kb, resolved, list(test_ids), list(added_entities), retrieved)
    trigger = trigger or DEFAULT_TRIGGERS[scope]
    price = lookup_price(model, load_price_overrides())
    return CalibrationPlan(
        kb, bank, chosen, resolved, why, scope, trigger, list(added_entities), model, batch, price
    )


class CalibrationSession:
    """The calls of one plan: `estimate` first (free), then `run` (paid). Close with `aclose`."""

    def __init__(self, plan: CalibrationPlan, key: str, limiter: RateLimiter, poll_interval_s: float) -> None:
        self.plan = plan
        self.prompts = [
            CalibrationPrompt(t.test_id, user_turn(t, plan.resolved[t.test_id])) for t in plan.tests
        ]
        self.calibrator = Calibrator(plan.model, calibrator_access(key, limiter), poll_interval_s)
        self._count: TokenCount | None = None

    async def estimate(self) -> tuple[TokenCount, CostEstimate]:
        self._count = await self.calibrator.count(self.plan.kb, self.prompts)
        return self._count, estimate_cost(self._count, self.plan.price, self.plan.batch)

    async def run(
        self, progress: Progress | None = None, batch_progress: BatchProgress | None = None
    ) -> CalibrationRun:
        plan = self.plan
        count = self._count or (await self.estimate())[0]
        started, clock = now_utc(), time.monotonic()
        if plan.batch:
            calls = await self.calibrator.calibrate_batch(plan.kb, self.prompts, batch_progress)
        else:
            calls = await self.calibrator.calibrate(plan.kb, self.prompts, progress)
        outcomes, diffs = judge(calls, plan.kb, plan.resolved)
        return CalibrationRun(
            scope=plan.scope,
            trigger=plan.trigger,
            added_entities=plan.added_entities,
            model=self.calibrator.model_id,
            mode="batch" if plan.batch else "sequential",
            kb=plan.kb,
            started=started,
            duration_s=time.monotonic() - clock,
            prefix_tokens=count.prefix_tokens,
            calls=calls,
            outcomes=outcomes,
            diffs=diffs,
            cost_usd=calls_cost(calls, plan.price, plan.batch),
        )

    async def aclose(self) -> None:
        await self.calibrator.aclose()


@dataclass(frozen=True)
class Kept:
    """Where a finished calibration went: history (applied) or a review file (dry run)."""

    history: Path | None = None
    responses: Path | None = None
    log: Path | None = None
    review: Path | None = None


def keep(
    run: CalibrationRun, plan: CalibrationPlan, apply: bool, banks_dir: Path, calibration_dir: Path
) -> Kept:
    """Apply writes the history file, raw responses and log record (CalibrationFileError when the
    log cannot be read); a dry run with proposals keeps them for review; otherwise nothing."""
    if apply:
        written = apply_calibration(history_dir(banks_dir), calibration_dir, run)
        return Kept(history=written.history, responses=written.responses, log=written.log)
    if run.diffs:
        return Kept(review=write_review(calibration_dir, review_from_run(run, plan.bank)))
    return Kept()
