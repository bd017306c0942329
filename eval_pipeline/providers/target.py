"""What the assets drive for the semantic mechanism, whoever implements it: the built-in
`SemanticPipeline` or the team's own system (`SystemPipeline`, over HTTP or a Python entry point),
and the progress bar that follows it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from eval_pipeline.core.inputs.banks import SemanticTest
from eval_pipeline.core.inputs.kb import Entity
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval, Usage

if TYPE_CHECKING:  # as in base.py: only a prompt-caching reranker reports one
    from eval_pipeline.providers.prompt_cache import PromptCacheStatus

OnDone = Callable[[SemanticRetrieval], None]
T = TypeVar("T")
R = TypeVar("R")


class RetrievalItem(NamedTuple):
    """One test's message and trial, and who asks: an external system under test may answer
    per user type and state (the built-in pipelines ignore both)."""

    test_id: str
    query: str
    trial: int = 0
    user_type: str | None = None
    user_state: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class PrepareReport:
    """What indexing the KB took: how many entity vectors were computed vs reused."""

    entities: int
    embedded: int
    reused: int
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    api_calls: int = 0
    prompt_cache: PromptCacheStatus | None = None  # a reranker with a cached KB prefix says its size


class RetrievalPipeline(Protocol):
    """What the assets drive: `SemanticPipeline`, or the team's own system (`SystemPipeline`)."""

    model_key: str

    async def prepare(self, kb_entities: Sequence[Entity]) -> PrepareReport: ...

    async def retrieve(self, test_id: str, query: str, trial: int = 0) -> SemanticRetrieval: ...

    async def retrieve_many(
        self, items: Sequence[RetrievalItem], on_done: OnDone | None = None
    ) -> list[SemanticRetrieval]: ...


def retrieval_items(
    tests: Sequence[SemanticTest], trials: int | Mapping[str, Sequence[int]]
) -> list[RetrievalItem]:
    """Each test's message, user type and state, once per trial: `trials` of every test, or the
    trials named per test (a test not named is not asked)."""
    return [
        RetrievalItem(t.test_id, t.prompt, trial, t.user_type, t.user_state)
        for t in tests
        for trial in (range(trials) if isinstance(trials, int) else trials.get(t.test_id, ()))
    ]


async def retrieve_all(
    retrieve: Callable[[T], Awaitable[R]],
    items: Sequence[T],
    concurrency: int,
    on_done: Callable[[R], None] | None = None,
) -> list[R]:
    """Run `retrieve` over the items, at most `concurrency` at a time; results in input order,
    `on_done` (e.g. a progress bar) called as each finishes. The items are taken in order by
    `concurrency` workers: a bank of thousands of tests costs no task and no semaphore round each.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    done: dict[int, R] = {}
    todo = iter(enumerate(items))

    async def worker() -> None:
        for position, item in todo:
            result = await retrieve(item)
            if on_done is not None:
                on_done(result)
            done[position] = result

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(items)))))
    return [done[position] for position in range(len(items))]


@contextmanager
def semantic_bar(terminal_fd: int | None, model: str, total: int) -> Iterator[OnDone | None]:
    """A callback that advances a bar of the model's semantic tests once a test is done; None (and
    no bar) without a terminal. The bar is drawn on `terminal_fd`, not sys.stderr: inside a Dagster
    step fds 1 and 2 go to the step's compute log (`orchestration.evaluation_route.progress_terminal`)."""
    if terminal_fd is None:
        yield None
        return
    # Here: without a terminal (CI, a pipe, a script) no bar is drawn, and rich is not imported.
    from rich.console import Console
    from rich.progress import Progress

    console = Console(file=os.fdopen(terminal_fd, "w", closefd=False))
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"{model}: semantic tests", total=total)
        yield lambda _: bar.advance(task)
