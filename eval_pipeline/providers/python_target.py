"""The team's system as a Python entry point (`system: {kind: python, entrypoint: pkg.mod:attr}`;
what it may be and how it is called: docs/http_target.md, "Python entry points").

Calls run in worker processes (`python_worker`), so that a call not returned within `timeout_s`
can be abandoned: its worker is killed (a thread could not be) and the next call starts a fresh
one. Here the entry point is imported once more, to fail before any run when it cannot be.
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


_Worker = asyncio.subprocess.Process  # one worker process: a call at a time


async def _exchange(worker: _Worker, message: str) -> dict[str, Any]:
    stdin, stdout = worker.stdin, worker.stdout
    assert stdin is not None and stdout is not None  # both piped
    stdin.write(message.encode() + b"\n")
    await stdin.drain()
    line = await stdout.readline()
    if not line:
        raise ProviderError(f"the entry point's process ended (exit {await worker.wait()})")
    reply: dict[str, Any] = json.loads(line)
    return reply


def _kill(worker: _Worker) -> None:
    if worker.returncode is None:
        worker.kill()


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
            if worker.returncode is None:
                return worker
        if self._broken is not None:
            raise ProviderError(self._broken)
        worker = await asyncio.create_subprocess_exec(
            *WORKER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=LINE_LIMIT
        )
        self._all.append(worker)
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                reply = await _exchange(worker, self._start)
        except TimeoutError:
            self._broken = f"the entry point {self._label} did not start within {START_TIMEOUT_S:g} s"
        except ProviderError as exc:
            self._broken = str(exc)
        except BaseException:
            _kill(worker)
            raise
        else:
            if reply.get("ready"):
                return worker
            self._broken = str(reply.get("error"))
        _kill(worker)
        raise ProviderError(self._broken)

    def give_back(self, worker: _Worker) -> None:
        self._idle.append(worker)

    async def aclose(self) -> None:
        for worker in self._all:
            _kill(worker)
            await worker.wait()
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
        breaker = breaker_for(f"python:{name}", self._breaker, self.clock, per_round=True)
        async with breaker.attempt() as admitted:
            worker = await workers.take()
            try:
                async with asyncio.timeout(self._timeout_s):
                    reply = await _exchange(worker, request.model_dump_json())
            except TimeoutError:
                _kill(worker)  # abandoned: the call may never return
                admitted.outcome = Outcome.UNREACHABLE
                raise ProviderError(
                    f"the entry point '{name}' gave no answer within {self._timeout_s:g} s"
                ) from None
            except BaseException:  # cancelled (the run is stopping) or the worker died: never reused
                _kill(worker)
                raise
            admitted.outcome = Outcome.ANSWERED
        workers.give_back(worker)
        if "raised" in reply:
            raise ProviderError(f"the entry point raised {reply['raised']}: {reply['detail']}")
        if "violation" in reply:
            raise ContractViolation(reply["violation"])
        return parse_answer(reply["answer"], request.mechanism)
