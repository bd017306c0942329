"""Whether a Claude prompt prefix can be cached: the per-model minimum cacheable length.

The API caches a prefix (tools, then system, up to the last `cache_control` marker) only when it
holds at least the model's minimum number of tokens; below it, it silently bills everything as
plain input (anthropic-sdk-python#1085). Minimums from the prompt-caching docs
(platform.claude.com, "Cache limitations"); the emulator enforces the same table.
"""

from __future__ import annotations

import math

from eval_pipeline.core.inputs.frozen import FrozenModel

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Characters / 4: the dry run's planning count and the API emulator's token count (real
    tokenizers count somewhat more)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


# Longest prefix first: "claude-opus-4-5" must not be read as "claude-opus-4".
_MINIMUMS: tuple[tuple[str, int], ...] = (
    ("claude-haiku-4-5", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-7", 2048),
    ("claude-opus-4-8", 1024),
    ("claude-opus-4-1", 1024),
    ("claude-3-5-haiku", 2048),
    ("claude-haiku-3-5", 2048),
    ("claude-sonnet-4", 1024),  # 4, 4.5 and 4.6
    ("claude-sonnet-5", 1024),
    ("claude-opus-5", 512),
    ("claude-opus-4", 1024),
)


def minimum_cacheable_tokens(model_id: str) -> int | None:
    """The model's minimum cacheable prefix in tokens; None when the table does not know it."""
    return next((minimum for prefix, minimum in _MINIMUMS if model_id.startswith(prefix)), None)


class PromptCacheStatus(FrozenModel):
    """What one run's stable prefix is worth: its size against the model's minimum."""

    model_id: str
    prefix_tokens: int | None  # None: the count failed (the run goes on without it)
    minimum: int | None
    count_error: str | None = None

    @property
    def used(self) -> bool:
        return (
            self.minimum is not None and self.prefix_tokens is not None and self.prefix_tokens >= self.minimum
        )

    @property
    def below_minimum(self) -> bool:
        """Known never to be cached: counted, and shorter than the model's known minimum."""
        return self.minimum is not None and self.prefix_tokens is not None and not self.used

    @property
    def note(self) -> str:
        if self.prefix_tokens is None:
            return (
                f"prompt cache unknown: the prefix could not be counted ({self.count_error}); "
                "check usage.cache_read_input_tokens"
            )
        if self.minimum is None:
            return (
                f"prompt cache unknown: prefix {self.prefix_tokens} tokens, no known minimum for "
                f"{self.model_id} (check usage.cache_read_input_tokens)"
            )
        verdict, against = ("used", ">=") if self.used else ("not used", "<")
        return (
            f"prompt cache {verdict}: prefix {self.prefix_tokens} tokens {against} minimum {self.minimum} "
            f"for {self.model_id}"
        )
