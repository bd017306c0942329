"""What the system under test did for one semantic test: the two stages, usage, cost, errors;
the boundary between `providers/` (which produce it) and scoring (which judges it).

A test holds 15 candidates and up to 6 selections, built by our own code from data a provider's
answer was already validated into: they are plain slotted dataclasses, a third of a pydantic
model's cost to build. Pydantic still validates them, against the same rules, wherever they enter
from a file (a retrieval or a result read back from JSON).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, with_config

from eval_pipeline.core.inputs.frozen import FrozenModel


@with_config(ConfigDict(defer_build=True, extra="forbid"))
@dataclass(frozen=True, slots=True)
class Candidate:
    """One embedding-stage hit: an entity and its cosine similarity to the query."""

    entity_id: str
    score: float


@with_config(ConfigDict(defer_build=True, extra="forbid"))
@dataclass(frozen=True, slots=True)
class Selection:
    """One reranker pick, 1-based rank, with the model's reason when it gives one."""

    entity_id: str
    rank: Annotated[int, Field(ge=1)]
    reason: str | None = None


class Usage(FrozenModel):
    # Frozen: usages are added into new ones, never changed in place, so one empty usage
    # (`NO_USAGE`) serves every record that used nothing instead of a new model each.
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    # The part of cache_creation_input_tokens written with the 1-hour TTL (billed 2x input, not
    # the 5-minute 1.25x); the rest were 5-minute writes.
    cache_creation_1h_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage.model_validate(
            {name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields}
        )

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        """The sum of `usages`, validated once rather than once per addition (a run adds one per
        test)."""
        sums = dict.fromkeys(cls.model_fields, 0)
        for usage in usages:
            for name in sums:
                sums[name] += getattr(usage, name)
        return cls.model_validate(sums)

    @property
    def any_tokens(self) -> bool:
        """Whether anything was used: asked several times a test, so it reads every count straight
        from the instance."""
        return any(self.__dict__.values())


NO_USAGE = Usage()


class SemanticRetrieval(BaseModel):
    """The outcome of running one semantic test's prompt through a model's pipeline. `status` is
    `errored` when any stage failed after retries; `error` then says why and the selections are
    whatever was obtained (usually none). Errored retrievals are never scored."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    test_id: str
    model: str
    trial: int = 0
    status: Literal["ok", "errored"]
    candidates: list[Candidate] = Field(default_factory=list)
    selections: list[Selection] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    api_calls: int = 0
    cache_hits: int = 0
    error: str | None = None

    @property
    def selected_ids(self) -> list[str]:
        return [s.entity_id for s in sorted(self.selections, key=lambda s: s.rank)]

    @property
    def candidate_ids(self) -> list[str]:
        return [c.entity_id for c in self.candidates]


def final_ranking(selections: Sequence[Selection], candidates: Sequence[Candidate]) -> list[str]:
    """The one ranking a semantic test produced, as standard IR metrics and TREC run files see it:
    the reranker's picks in rank order (what the assistant loads), then the other candidates in the
    embedding's order (still the system's ranking below them)."""
    picked = [s.entity_id for s in sorted(selections, key=lambda s: s.rank)]
    chosen = set(picked)
    return picked + [c.entity_id for c in candidates if c.entity_id not in chosen]
