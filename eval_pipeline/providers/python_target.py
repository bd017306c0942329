"""The team's system as a Python entry point (`system: {kind: python, entrypoint: pkg.mod:attr}`).

It is imported from the environment eval-pipeline runs in (the working directory first, as
`python -m` would): one callable answering every mechanism, an object (a class is instantiated
without arguments) with a method per mechanism (`semantic`, `state`, `pattern`, `always`), or one
callable per mechanism. Each takes a `SystemRequest` and returns a `SystemAnswer` or a dict of its
shape, plainly or as a coroutine; the answer is validated like an HTTP answer.

Calls run in worker processes (`python_worker`) that import the entry point once, one call at a
time each and up to the model's `concurrency` at once. A call not returned within `timeout_s` is
abandoned: its worker is killed (a thread could not be) and the next call starts a fresh one.
Timed-out calls count towards the entry point's circuit breaker a round at a time: once every
call in flight has timed out (or `breaker.failures` in a row), the remaining calls fail at once.
Here the entry point is imported once more, to fail before any run when it cannot be.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.contract import ContractViolation, SystemAnswer, SystemRequest, parse_answer
from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.circuit import BreakerSettings, Outcome, breaker_for
from eval_pipeline.providers.models import ConfigError, ModelConfig
from eval_pipeline.providers.python_worker import EntrypointError, load_handlers

# The retry machinery (tenacity) loads with a target, not with the check every run makes.
if TYPE_CHECKING:
    from eval_pipeline.providers.ratelimit import Clock

WORKER = [sys.executable, "-m", "eval_pipeline.providers.python_worker"]
START_TIMEOUT_S = 60.0  # a worker's start: Python, then the team's imports (not the call's timeout)
LINE_LIMIT = 64 * 1024 * 1024  # the longest answer a worker may send (asyncio's default: 64 KiB)


def require_entrypoint(cfg: ModelConfig, models_file: Path) -> None:
    """Fail before any run (one line naming the file, the model and the field) when the model's
    Python entry point cannot be loaded."""
    if cfg.system is None or cfg.system.entrypoint is None:
        return
    try:
        load_handlers(cfg.system.entrypoint, cfg.system.mechanisms)
    except EntrypointError as exc:
        raise ConfigError(f"{models_file}: model '{cfg.key}': field 'system.entrypoint': {exc}") from None


class _Worker:
    """One worker process: a call at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def exchange(self, message: str) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None  # both piped
        stdin.write(message.encode() + b"\n")
        await stdin.drain()
        line = await stdout.readline()
        if not line:
            code = await self.process.wait()
            raise ProviderError(f"the entry point's process ended (exit {code})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


class _Workers:
    """The worker processes of one event loop: idle ones are reused, a killed one replaced."""

    def __init__(self, start: str, label: str) -> None:
        self._start = start
        self._label = label
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._broken: str | None = None  # why workers cannot start: every call fails at once

    async def take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.process.returncode is None:
                return worker
        if self._broken is not None:
            raise ProviderError(self._broken)
        process = await asyncio.create_subprocess_exec(
            *WORKER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=LINE_LIMIT
        )
        worker = _Worker(process)
        self._all.append(worker)
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                reply = await worker.exchange(self._start)
        except TimeoutError:
            self._broken = f"the entry point {self._label} did not start within {START_TIMEOUT_S:g} s"
        except ProviderError as exc:
            self._broken = str(exc)
        except BaseException:
            worker.kill()
            raise
        else:
            if reply.get("ready"):
                return worker
            self._broken = str(reply.get("error"))
        worker.kill()
        raise ProviderError(self._broken)

    def give_back(self, worker: _Worker) -> None:
        self._idle.append(worker)

    async def aclose(self) -> None:
        for worker in self._all:
            worker.kill()
            await worker.process.wait()
        self._all.clear()
        self._idle.clear()


class PythonTarget:
    """Answers requests by calling the team's Python code in worker processes."""

    def __init__(
        self,
        spec: str | Mapping[Mechanism, str],
        mechanisms: Sequence[Mechanism],
        timeout_s: float,
        clock: Clock | None = None,
        breaker: BreakerSettings | None = None,
    ) -> None:
        load_handlers(spec, mechanisms)  # EntrypointError now, before any call
        self._spec = spec
        self._timeout_s = timeout_s
        start = {
            "entrypoint": spec if isinstance(spec, str) else {m.value: spec[m] for m in mechanisms},
            "mechanisms": [m.value for m in mechanisms],
            "path": sys.path,
        }
        label = f"'{spec}'" if isinstance(spec, str) else "of the model"
        from eval_pipeline.providers.ratelimit import REAL_CLOCK, LoopLocal

        self.clock = clock or REAL_CLOCK
        self._breaker = breaker or BreakerSettings()
        self._workers = LoopLocal(lambda: _Workers(json.dumps(start), label), close=lambda w: w.aclose())

    async def aclose(self) -> None:
        """Stop this loop's worker processes (they are stopped when the loop ends anyway)."""
        await self._workers.aclose()

    async def ask(self, request: SystemRequest) -> SystemAnswer:
        """One request; raises ProviderError when the code fails or is too slow, and
        ContractViolation for an answer that breaks the contract."""
        name = self._spec if isinstance(self._spec, str) else self._spec[request.mechanism]
        workers = self._workers.get()
        async with breaker_for(
            f"python:{name}", self._breaker, self.clock, per_round=True
        ).attempt() as admitted:
            worker = await workers.take()
            try:
                async with asyncio.timeout(self._timeout_s):
                    reply = await worker.exchange(request.model_dump_json())
            except TimeoutError:
                worker.kill()  # abandoned: the call may never return
                admitted.outcome = Outcome.UNREACHABLE
                raise ProviderError(
                    f"the entry point '{name}' gave no answer within {self._timeout_s:g} s"
                ) from None
            except BaseException:  # cancelled (the run is stopping) or the worker died: never reused
                worker.kill()
                raise
            admitted.outcome = Outcome.ANSWERED
        workers.give_back(worker)
        if "raised" in reply:
            raise ProviderError(f"the entry point raised {reply['raised']}: {reply['detail']}")
        if "violation" in reply:
            raise ContractViolation(reply["violation"])
        return parse_answer(reply["answer"], request.mechanism)
