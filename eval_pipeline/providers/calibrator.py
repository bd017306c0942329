"""Claude as the expectation calibrator, through `anthropic.AsyncAnthropic`.

Every request is the instructions, then the whole KB as the cached prefix, then one test's user
turn. The answer is structured output (`output_config.format` with a JSON schema), not forced
tool use: Claude Opus 5.5, the default calibrator, rejects a forced `tool_choice` with a 400 and
always thinks, so responses hold thinking blocks before the JSON text. The key comes from
$ANTHROPIC_API_KEY only and is never printed.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

from anthropic.types import Message, MessageParam, TextBlockParam
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from anthropic.types.model import Model

from eval_pipeline.core.calibration.prompt import OUTPUT_SCHEMA, SYSTEM_INSTRUCTIONS, kb_text
from eval_pipeline.core.calibration.proposals import CallRecord
from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.mechanisms.retrieval import Usage
from eval_pipeline.providers.anthropic_client import AnthropicProvider, BatchProgress, cached_system, usage_of
from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.models import FaultSettings, WaitLimits
from eval_pipeline.providers.pricing import Price, cost_usd, prefix_usage
from eval_pipeline.providers.ratelimit import RateLimiter

# A calibration batch may take up to the API's 24 hours to end: its run deadline allows that.
CALIBRATION_FAULTS = FaultSettings(waits=WaitLimits(run_deadline_s=25 * 3600))

API_KEY_ENV = "ANTHROPIC_API_KEY"
# Adaptive thinking plus the JSON. The SDK refuses non-streaming calls whose max_tokens implies
# more than 10 minutes (over ~21k tokens), so this stays below that.
MAX_OUTPUT_TOKENS = 16_000
# Planning figure for estimates only (thinking included); the actual usage is what gets logged.
TYPICAL_OUTPUT_TOKENS = 2_000

# Undated aliases only: "claude-opus-5-5" -> (5, 5), "claude-opus-5" -> (5, 0). Dated snapshot ids
# such as claude-opus-4-5-20251101 repeat an alias and are skipped.
_OPUS_ALIAS = re.compile(r"^claude-opus-(\d+)(?:-(\d{1,2}))?$")


def newest_opus(model_ids: Iterable[str]) -> str:
    versions = [(int(m[1]), int(m[2] or 0), i) for i in model_ids if (m := _OPUS_ALIAS.match(i))]
    if not versions:
        raise ValueError("no Claude Opus model id in the list")
    return max(versions)[2]


SDK_MODEL_IDS: tuple[str, ...] = get_args(get_args(Model)[0])
DEFAULT_MODEL = newest_opus(SDK_MODEL_IDS)


class CalibratorConfigError(BadInput):
    """The calibrator cannot be set up (no key, no price): one line for the user."""


def api_key_from_env(environ: Mapping[str, str] | None = None) -> str:
    key = (os.environ if environ is None else environ).get(API_KEY_ENV, "").strip()
    if not key:
        raise CalibratorConfigError(
            f"calibration calls the Anthropic API: set {API_KEY_ENV} in the environment"
        )
    return key


@dataclass(frozen=True)
class CalibrationPrompt:
    test_id: str
    text: str


@dataclass(frozen=True)
class TokenCount:
    prefix_tokens: int  # instructions + KB: the cached prefix every call shares
    turn_tokens: int  # every test's user turn together
    tests: int


@dataclass(frozen=True)
class CostEstimate:
    input_usd: float
    output_typical_usd: float
    output_max_usd: float

    @property
    def typical_usd(self) -> float:
        return self.input_usd + self.output_typical_usd

    @property
    def max_usd(self) -> float:
        return self.input_usd + self.output_max_usd


def estimate_cost(count: TokenCount, price: Price, batch: bool) -> CostEstimate:
    """The first call writes the KB prefix to the cache, every later call reads it."""
    if count.tests == 0:
        return CostEstimate(0.0, 0.0, 0.0)
    prompt = prefix_usage(count.prefix_tokens, count.turn_tokens, count.tests, batch)

    def output(per_test: int) -> float:
        return cost_usd(Usage(output_tokens=per_test * count.tests), price, batch)

    return CostEstimate(
        cost_usd(prompt, price, batch), output(TYPICAL_OUTPUT_TOKENS), output(MAX_OUTPUT_TOKENS)
    )


def calls_cost(calls: Iterable[CallRecord], price: Price, batch: bool) -> float:
    return sum(cost_usd(c.usage, price, batch) for c in calls)


def system_blocks(kb: KnowledgeBase, long_ttl: bool = False) -> list[TextBlockParam]:
    """Instructions, then the KB as the cached prefix."""
    return cached_system(SYSTEM_INSTRUCTIONS, kb_text(kb), long_ttl)


def _user(text: str) -> list[MessageParam]:
    return [{"role": "user", "content": text}]


Progress = Callable[[int, int], None]  # (done, total)


def calibrator_access(api_key: str, limiter: RateLimiter) -> ApiAccess:
    """A calibration's calls: paced by `limiter`, each allowed the long answer adaptive thinking
    may take, the run allowed the 24 hours a batch may take."""
    return ApiAccess(api_key, limiter=limiter, timeout_s=600.0, faults=CALIBRATION_FAULTS)


class Calibrator(AnthropicProvider):
    """Proposes expectations for semantic tests; one `CallRecord` per test, errors included."""

    def params(
        self, system: list[TextBlockParam], prompt: CalibrationPrompt
    ) -> MessageCreateParamsNonStreaming:
        return {
            "model": self.model_id,
            "max_tokens": MAX_OUTPUT_TOKENS,
            "system": system,
            "messages": _user(prompt.text),
            "output_config": {"format": {"type": "json_schema", "schema": OUTPUT_SCHEMA}},
        }

    async def count(self, kb: KnowledgeBase, prompts: Sequence[CalibrationPrompt]) -> TokenCount:
        """Three free count_tokens calls: the prefix is (KB + probe) − (probe alone)."""
        output_config = self.params([], CalibrationPrompt("", ""))["output_config"]
        probe = _user(prompts[0].text if prompts else "Propose this test's expectations.")
        turns = _user("\n\n".join(p.text for p in prompts) or ".")

        async def tokens(messages: list[MessageParam], system: list[TextBlockParam]) -> int:
            return await self._count_tokens(system=system, messages=messages, output_config=output_config)

        with_kb = await tokens(probe, system_blocks(kb))
        without = await tokens(probe, [])
        return TokenCount(with_kb - without, await tokens(turns, []) if prompts else 0, len(prompts))

    async def calibrate(
        self, kb: KnowledgeBase, prompts: Sequence[CalibrationPrompt], on_done: Progress | None = None
    ) -> list[CallRecord]:
        """One Messages call per test, in `prompts` order."""
        system = system_blocks(kb)
        done = 0

        async def one(prompt: CalibrationPrompt) -> CallRecord:
            nonlocal done
            try:
                outcome: Message | str = await self._messages_create(self.params(system, prompt))
            except ProviderError as exc:
                outcome = str(exc)
            record = _record(prompt.test_id, None, outcome)
            done += 1
            if on_done is not None:
                on_done(done, len(prompts))
            return record

        return list(await asyncio.gather(*(one(p) for p in prompts)))

    async def calibrate_batch(
        self,
        kb: KnowledgeBase,
        prompts: Sequence[CalibrationPrompt],
        on_progress: BatchProgress | None = None,
    ) -> list[CallRecord]:
        """The same requests as `calibrate`, as one message batch; results matched by custom id."""
        if not prompts:
            return []
        system = system_blocks(kb, long_ttl=True)
        # Custom ids allow [A-Za-z0-9_-]{1,64}; test ids may hold dots and be longer.
        by_custom_id = {f"test-{i:05d}": p for i, p in enumerate(prompts)}
        results = await self._run_batch(
            {cid: self.params(system, p) for cid, p in by_custom_id.items()}, on_progress
        )
        missing = "the batch returned no result for it"
        return [_record(p.test_id, cid, results.get(cid, missing)) for cid, p in by_custom_id.items()]


def _record(test_id: str, custom_id: str | None, outcome: Message | str) -> CallRecord:
    """The call's message, or (a string) why it has none."""
    if isinstance(outcome, str):
        return CallRecord(test_id=test_id, custom_id=custom_id, error=outcome)
    response = outcome.model_dump(mode="json", exclude_none=True)
    return CallRecord(test_id=test_id, custom_id=custom_id, usage=usage_of(outcome), response=response)
