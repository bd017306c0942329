"""How close the API pipeline runs to its rate-limit floor, against the API emulator.

Runs the 94 prompts of test_banks/semantic/parent_test_bank.json over the KB's semantic entities
(Voyage embeddings + Claude reranker, real SDK clients, loopback emulator) three ways:

  (a) sequential     the specification's pace: one test at a time, then sleep 1.25 s
  (b) ours 48/min    SemanticPipeline, reranker limited to 48/min, concurrency 4
  (c) ours 1000/min  the same at 1000/min with concurrency 16

then (c) again on its warm response cache (must make 0 emulator calls) and a pass with 20% faults
of every kind. The floor of a rate-limited run is `calls / rate`; `ratio_to_floor` is (b) over its
floor and `speedup_vs_sequential` is (a) over (c).

Time runs on a ScaledClock (default 10x): every wait (pacing, backoff, the 1.25 s sleeps) takes
1/10 of its clock time, and the emulator's latency is set to 300 ms / 10 of real time, so a call
costs ~300 ms of clock time. Durations are clock seconds unless marked real; a run takes ~35 s.
Client and emulator CPU (~4 ms of real time per query here) is not scaled, so it counts 10x on the
clock: at 20x it would be ~80 ms of clock per query, more than the 60 ms gap at 1000/min, and the
1000/min pass would measure this machine's CPU instead of the pacing. Higher factors run faster
but understate the speed-up; lower ones are more faithful.

    .venv/bin/python -m benchmarks.api_pace [--factor 10] [--latency-ms 300]

The emulator's selections are test-double output, never model quality.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from eval_pipeline.core.inputs.banks import SemanticBank
from eval_pipeline.core.inputs.kb import Entity
from eval_pipeline.core.inputs.loading import Problem, load_kb
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.providers.cache import ResponseCache
from eval_pipeline.providers.claude_rerank import ClaudeReranker
from eval_pipeline.providers.pricing import cost_usd, lookup_price
from eval_pipeline.providers.ratelimit import RateLimiter, RetryPolicy, ScaledClock
from eval_pipeline.providers.semantic_pipeline import SemanticPipeline
from eval_pipeline.providers.target import RetrievalItem
from eval_pipeline.providers.voyage import VoyageEmbedder
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator

REPO = Path(__file__).resolve().parents[1]
BANK = REPO / "test_banks" / "semantic" / "parent_test_bank.json"
KB_DIR = REPO / "kb"
EMBED_MODEL, RERANK_MODEL = "voyage-3.5", "claude-haiku-4-5"
SPEC_GAP_S = 1.25  # the specification's sequential runner sleeps this long after every test
FAKE_KEY = "emulator-only-key"
CLIENT_TIMEOUT_REAL_S = 0.5  # below the emulator's stall, so `timeout` faults do time out
STALL_REAL_S = 2.0
FAULT_RATE = 0.2

Drive = Callable[[SemanticPipeline], Awaitable[list[SemanticRetrieval]]]


@dataclass(frozen=True)
class Pass:
    name: str
    rate_per_min: float | None
    concurrency: int
    clock_s: float
    real_s: float
    prepare_calls: int  # emulator calls to index the KB (before the timed run)
    emulator_calls: int
    rerank_calls: int
    results: list[SemanticRetrieval]

    @property
    def floor_s(self) -> float | None:
        return None if self.rate_per_min is None else self.rerank_calls / self.rate_per_min * 60

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)


@dataclass(frozen=True)
class Bench:
    emulator: EmulatorHandle
    clock: ScaledClock
    entities: list[Entity]
    items: list[RetrievalItem]
    workdir: Path

    def pipeline(self, cache_name: str, rate: float | None, concurrency: int) -> SemanticPipeline:
        cache = ResponseCache(self.workdir / cache_name)
        limiter = None if rate is None else RateLimiter(rate, concurrency, self.clock)
        policy = RetryPolicy()
        embedder = VoyageEmbedder(
            EMBED_MODEL,
            FAKE_KEY,
            self.emulator.voyage_base_url,
            cache,
            None,
            clock=self.clock,
            policy=policy,
            timeout_s=CLIENT_TIMEOUT_REAL_S,
        )
        reranker = ClaudeReranker(
            RERANK_MODEL,
            FAKE_KEY,
            self.emulator.base_url,
            cache,
            limiter,
            lookup_price(RERANK_MODEL),
            "bench-1",
            clock=self.clock,
            policy=policy,
            timeout_s=CLIENT_TIMEOUT_REAL_S,
        )
        return SemanticPipeline(
            "bench",
            embedder,
            reranker,
            None,
            concurrency,
            embed_cost=partial(cost_usd, price=lookup_price(EMBED_MODEL)),
            rerank_cost=partial(cost_usd, price=lookup_price(RERANK_MODEL)),
        )

    async def run(
        self, name: str, cache_name: str, rate: float | None, concurrency: int, drive: Drive
    ) -> Pass:
        pipeline = self.pipeline(cache_name, rate, concurrency)
        self.emulator.reset()
        await pipeline.prepare(self.entities)  # indexing the KB is not part of the paced run
        prepare_calls = self.emulator.stats["total_requests"]
        self.emulator.reset()
        loop = asyncio.get_running_loop()
        clock_start, real_start = self.clock.now(), loop.time()
        results = await drive(pipeline)
        stats = self.emulator.stats
        return Pass(
            name=name,
            rate_per_min=rate,
            concurrency=concurrency,
            clock_s=self.clock.now() - clock_start,
            real_s=loop.time() - real_start,
            prepare_calls=prepare_calls,
            emulator_calls=stats["total_requests"],
            rerank_calls=stats["requests"].get("POST /v1/messages", 0),
            results=results,
        )

    async def sequential(self, pipeline: SemanticPipeline) -> list[SemanticRetrieval]:
        results = []
        for item in self.items:
            results.append(await pipeline.retrieve(item.test_id, item.query, item.trial))
            await self.clock.sleep(SPEC_GAP_S)
        return results

    async def concurrent(self, pipeline: SemanticPipeline) -> list[SemanticRetrieval]:
        return await pipeline.retrieve_many(self.items)


def load_inputs() -> tuple[list[Entity], list[RetrievalItem]]:
    problems: list[Problem] = []
    kb = load_kb(KB_DIR, problems)
    if kb is None or problems:
        raise SystemExit(f"cannot load {KB_DIR}: {'; '.join(map(str, problems))}")
    bank = SemanticBank.model_validate_json(BANK.read_text(encoding="utf-8"))
    return kb.semantic_entities, [RetrievalItem(t.test_id, t.prompt) for t in bank.tests]


def table(passes: list[Pass]) -> str:
    header = (
        f"{'pass':<22}{'rate/min':>9}{'conc':>5}{'calls':>7}{'rerank':>7}"
        f"{'clock s':>9}{'real s':>8}{'floor s':>9}{'÷floor':>8}{'ok':>5}{'err':>5}"
    )
    rows = [header, "-" * len(header)]
    for p in passes:
        floor = p.floor_s
        rows.append(
            f"{p.name:<22}{_cell(p.rate_per_min, 'g'):>9}{p.concurrency:>5}{p.emulator_calls:>7}"
            f"{p.rerank_calls:>7}{p.clock_s:>9.1f}{p.real_s:>8.2f}{_cell(floor, '.1f'):>9}"
            f"{_cell(p.clock_s / floor if floor else None, '.3f'):>8}"
            f"{p.count('ok'):>5}{p.count('errored'):>5}"
        )
    return "\n".join(rows)


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


async def benchmark(factor: float, latency_ms: float) -> None:
    entities, items = load_inputs()
    clock = ScaledClock(factor)
    emulator = start_emulator(latency_ms=latency_ms / factor, stall_s=STALL_REAL_S, seed=1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            bench = Bench(emulator, clock, entities, items, Path(tmp))
            print(
                f"{len(items)} queries over {len(entities)} semantic entities; clock {factor:g}x, "
                f"emulated latency {latency_ms:g} ms per call (clock)",
                flush=True,
            )
            seq = await bench.run("(a) sequential+1.25s", "a", None, 1, bench.sequential)
            slow = await bench.run("(b) ours 48/min", "b", 48, 4, bench.concurrent)
            fast = await bench.run("(c) ours 1000/min", "c", 1000, 16, bench.concurrent)
            warm = await bench.run("(c) warm cache", "c", 1000, 16, bench.concurrent)
            emulator.reconfigure(fault_rate=FAULT_RATE)
            faulty = await bench.run("(c) 20% faults", "f", 1000, 16, bench.concurrent)
            faults = emulator.stats["faults"]
    finally:
        emulator.stop()
    print(table([seq, slow, fast, warm, faulty]))
    print(
        f"warm-cache pass: {warm.prepare_calls + warm.emulator_calls} emulator calls "
        f"({warm.prepare_calls} to index the KB, {warm.emulator_calls} for {len(warm.results)} "
        f"queries; {warm.count('ok')} ok)"
    )
    print(f"fault pass: {faulty.count('ok')} ok, {faulty.count('errored')} errored; {_reasons(faulty)}")
    print(f"  faults injected by kind: {dict(sorted(faults.items()))}")
    floor = slow.floor_s or float("nan")
    print(f"ratio_to_floor={slow.clock_s / floor:.3f} speedup_vs_sequential={seq.clock_s / fast.clock_s:.1f}")


def _reasons(p: Pass) -> str:
    reasons = Counter(r.error for r in p.results if r.error)
    return ", ".join(f"{n}x {reason}" for reason, n in reasons.most_common()) or "no errors"


def main() -> None:
    parser = argparse.ArgumentParser(description="API pacing benchmark against the emulator")
    parser.add_argument("--factor", type=float, default=10.0, help="clock speed-up (default 10)")
    parser.add_argument("--latency-ms", type=float, default=300.0, help="per call, clock ms")
    args = parser.parse_args()
    # The SDKs would send even loopback traffic through a configured HTTP(S)_PROXY.
    loopback = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1,localhost"]))
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = loopback
    asyncio.run(benchmark(args.factor, args.latency_ms))


if __name__ == "__main__":
    main()
