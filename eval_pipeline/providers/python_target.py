"""The team's system as a Python entry point (`system: {kind: python, entrypoint: pkg.mod:attr}`).

The entry point is imported from the environment eval-pipeline runs in (the working directory
first, as `python -m` would). It is either one callable that answers every mechanism, or an
object (a class is instantiated without arguments) with one method per mechanism named after it
(`semantic`, `state`, `pattern`, `always`); `entrypoint` may also map each mechanism to its own
callable. Each receives a `SystemRequest` and returns a `SystemAnswer` or a dict of the same
shape, synchronously or as a coroutine. Sync callables run in worker threads, up to the model's
`concurrency` at once. The answer is validated exactly like an HTTP answer.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.contract import SystemAnswer, SystemRequest, parse_answer
from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.models import ConfigError, ModelConfig

# The retry machinery (tenacity) loads with a target, not with the check every run makes.
if TYPE_CHECKING:
    from eval_pipeline.providers.ratelimit import Clock

Handler = Callable[[SystemRequest], Any]
MAX_REASON = 200


class EntrypointError(BadInput):
    """The entry point cannot be imported or does not answer the mechanisms it is given."""


def _import(spec: str) -> Any:
    module_name, _, attr_path = spec.partition(":")
    if os.getcwd() not in sys.path:  # the team's package beside its models file, as `python -m` finds it
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
        for attr in attr_path.split("."):
            found = getattr(found, attr)
    except Exception as exc:  # any import-time failure of the team's code is a configuration problem
        raise EntrypointError(f"cannot import '{spec}': {type(exc).__name__}: {exc}") from None
    return found


def load_handlers(
    spec: str | Mapping[Mechanism, str], mechanisms: Sequence[Mechanism]
) -> dict[Mechanism, Handler]:
    """One handler per mechanism, from an entry point spec (see the module docstring)."""
    if not isinstance(spec, str):
        handlers = {m: _import(spec[m]) for m in mechanisms}
        bad = [spec[m] for m, h in handlers.items() if not callable(h)]
        if bad:
            raise EntrypointError(f"'{bad[0]}' is not callable")
        return handlers
    found = _import(spec)
    if inspect.isclass(found):
        try:
            found = found()
        except Exception as exc:
            raise EntrypointError(f"cannot instantiate '{spec}': {type(exc).__name__}: {exc}") from None
    methods = {m: getattr(found, m.value) for m in Mechanism if callable(getattr(found, m.value, None))}
    if methods:
        missing = [m.value for m in mechanisms if m not in methods]
        if missing:
            raise EntrypointError(f"'{spec}' has no method {', '.join(missing)}")
        return {m: methods[m] for m in mechanisms}
    if callable(found):
        return dict.fromkeys(mechanisms, found)
    raise EntrypointError(f"'{spec}' is neither callable nor has methods named after the mechanisms")


def require_entrypoint(cfg: ModelConfig, models_file: Path) -> None:
    """Fail before any run (one line naming the file, the model and the field) when the model's
    Python entry point cannot be loaded."""
    if cfg.system is None or cfg.system.entrypoint is None:
        return
    try:
        load_handlers(cfg.system.entrypoint, cfg.system.mechanisms)
    except EntrypointError as exc:
        raise ConfigError(f"{models_file}: model '{cfg.key}': field 'system.entrypoint': {exc}") from None


class PythonTarget:
    """Answers requests by calling the team's Python code in this process."""

    def __init__(
        self,
        spec: str | Mapping[Mechanism, str],
        mechanisms: Sequence[Mechanism],
        timeout_s: float,
        clock: Clock | None = None,
    ) -> None:
        self._handlers = load_handlers(spec, mechanisms)
        self._timeout_s = timeout_s
        from eval_pipeline.providers.ratelimit import REAL_CLOCK

        self.clock = clock or REAL_CLOCK

    async def aclose(self) -> None:
        """Nothing to close: the team's code owns its resources."""

    async def ask(self, request: SystemRequest) -> SystemAnswer:
        """One request; raises ProviderError when the code fails or is too slow, and
        ContractViolation for an answer that breaks the contract."""
        handler = self._handlers[request.mechanism]
        try:
            async with asyncio.timeout(self._timeout_s):
                if inspect.iscoroutinefunction(handler):
                    payload = await handler(request)
                else:
                    payload = await asyncio.to_thread(handler, request)
                    if inspect.isawaitable(payload):
                        payload = await payload
        except TimeoutError:
            raise ProviderError(f"no answer within {self._timeout_s:g} s") from None
        except Exception as exc:
            detail = " ".join(str(exc).split())[:MAX_REASON]
            raise ProviderError(f"the entry point raised {type(exc).__name__}: {detail}") from None
        return parse_answer(payload, request.mechanism)
