"""PythonTarget: how an entry point is found (object with methods, one callable, one per
mechanism), sync and async code, and failures that become a test's reason; calls run in worker
processes, so one that never returns is abandoned (its process killed) and the next one answered.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.contract import ContractViolation, SystemRequest
from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.circuit import BreakerSettings
from eval_pipeline.providers.python_target import PythonTarget
from eval_pipeline.providers.python_worker import EntrypointError, load_handlers
from eval_pipeline.providers.system_target import ask_all
from eval_pipeline.runtime.run_monitor import process_start
from tests.hung_entry_point import own_breaker_cooldown
from tests.providers.conftest import RecordingClock

pytestmark = pytest.mark.anyio
HERE = "tests.providers.test_python_target"
ALL = list(Mechanism)


class Methods:
    """One method per mechanism, some async."""

    def semantic(self, request: SystemRequest) -> dict[str, Any]:
        return {"candidates": [], "selections": [{"entity_id": request.message}]}

    async def state(self, request: SystemRequest) -> dict[str, Any]:
        return {"triggered_handlers": sorted(request.user_state)}

    def pattern(self, request: SystemRequest) -> dict[str, Any]:
        return {"pattern_matches": [{"entity_id": "crisis", "matched_text": request.message}]}

    def always(self, request: SystemRequest) -> dict[str, Any]:
        return {"always_loaded": [f"persona_{request.user_type}"]}


def answer_all(request: SystemRequest) -> dict[str, Any]:
    """One callable for every mechanism."""
    return {"triggered_handlers": [request.mechanism.value], "always_loaded": []}


def broken(request: SystemRequest) -> dict[str, Any]:
    raise ValueError(f"index offline\nfor {request.mechanism.value}")


async def stuck(request: SystemRequest) -> dict[str, Any]:
    await asyncio.Event().wait()
    return {}


def hangs_on_request(request: SystemRequest) -> dict[str, Any]:
    """Never returns to the message "hang"; names its process in every other answer."""
    if request.message == "hang":
        threading.Event().wait()
    return {"triggered_handlers": [str(os.getpid())]}


def exits(request: SystemRequest) -> dict[str, Any]:
    os._exit(3)


def _request(mechanism: Mechanism, **fields: Any) -> SystemRequest:
    return SystemRequest(
        mechanism=mechanism,
        message=fields.get("message", ""),
        user_type=fields.get("user_type"),
        user_state=fields.get("user_state", {}),
    )


async def test_an_object_with_one_method_per_mechanism_sync_or_async() -> None:
    target = PythonTarget(f"{HERE}:Methods", ALL, timeout_s=5)
    state = await target.ask(_request(Mechanism.STATE, user_state={"b": 1, "a": 2}))
    assert state.triggered_handlers == ["a", "b"]
    pattern = await target.ask(_request(Mechanism.PATTERN, message="help"))
    assert pattern.pattern_matches is not None
    assert [(m.entity_id, m.kind, m.matched_text) for m in pattern.pattern_matches] == [
        ("crisis", "crisis", "help")
    ]
    always = await target.ask(_request(Mechanism.ALWAYS, user_type="T"))
    assert always.always_loaded == ["persona_T"]


async def test_one_callable_for_all_and_one_per_mechanism() -> None:
    target = PythonTarget(f"{HERE}:answer_all", [Mechanism.STATE], timeout_s=5)
    assert (await target.ask(_request(Mechanism.STATE))).triggered_handlers == ["state"]
    handlers = load_handlers({Mechanism.STATE: f"{HERE}:answer_all"}, [Mechanism.STATE])
    assert handlers == {Mechanism.STATE: answer_all}


async def test_failures_become_the_tests_reason() -> None:
    requests = [("t1", _request(Mechanism.STATE)), ("t2", _request(Mechanism.ALWAYS, user_type="T"))]
    raised = await ask_all(PythonTarget(f"{HERE}:broken", ALL, timeout_s=5), requests, 2)
    assert [(o.test_id, o.error) for o in raised] == [
        ("t1", "target: the entry point raised ValueError: index offline for state"),
        ("t2", "target: the entry point raised ValueError: index offline for always"),
    ]
    with pytest.raises(ProviderError, match=r"no answer within 0\.05 s"):
        await PythonTarget(f"{HERE}:stuck", ALL, timeout_s=0.05).ask(_request(Mechanism.STATE))
    # answer_all gives no pattern part: a pattern request it cannot answer is a contract violation.
    with pytest.raises(ContractViolation, match="pattern_matches: required for a pattern request"):
        await PythonTarget(f"{HERE}:answer_all", ALL, timeout_s=5).ask(_request(Mechanism.PATTERN))


@pytest.mark.parametrize(
    ("spec", "mechanisms", "problem"),
    [
        (
            f"{HERE}:nothing_here",
            ALL,
            "cannot import 'tests.providers.test_python_target:nothing_here': AttributeError",
        ),
        ("tests.no_such_module:x", ALL, "ModuleNotFoundError: No module named 'tests.no_such_module'"),
        (f"{HERE}:HERE", ALL, "is neither callable nor has methods named after the mechanisms"),
    ],
)
def test_an_entry_point_that_cannot_answer_is_named(
    spec: str, mechanisms: list[Mechanism], problem: str
) -> None:
    with pytest.raises(EntrypointError, match=problem):
        load_handlers(spec, mechanisms)


class OnlyState:
    def state(self, request: SystemRequest) -> dict[str, Any]:
        return {"triggered_handlers": []}


def test_an_object_missing_a_method_for_an_assigned_mechanism_is_named() -> None:
    with pytest.raises(EntrypointError, match="OnlyState' has no method pattern, always"):
        load_handlers(f"{HERE}:OnlyState", [Mechanism.STATE, Mechanism.PATTERN, Mechanism.ALWAYS])


async def test_a_call_that_never_returns_is_abandoned_and_the_next_one_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUNG_MARK_DIR", str(tmp_path))
    patient = BreakerSettings(failures=100)
    # Two seconds: time enough, on a loaded machine, for the call to reach the entry point.
    target = PythonTarget("tests.hung_entry_point:never_returns", ALL, timeout_s=2, breaker=patient)
    with pytest.raises(ProviderError) as info:
        await target.ask(_request(Mechanism.STATE))
    assert (
        str(info.value) == "the entry point 'tests.hung_entry_point:never_returns' gave no answer within 2 s"
    )
    (hung,) = [int(p.name) for p in tmp_path.iterdir()]
    assert hung != os.getpid()  # the call ran in a worker process, not in this one
    await target.aclose()
    assert process_start(hung) is None  # abandoned: its process was killed, not left running
    # Nothing of this process is inside the call: no thread that would keep it from exiting.
    assert all(t.daemon for t in threading.enumerate() if t is not threading.main_thread())

    clock = RecordingClock()
    other = PythonTarget(f"{HERE}:hangs_on_request", ALL, timeout_s=0.5, clock=clock, breaker=patient)
    first = await other.ask(_request(Mechanism.STATE))
    with pytest.raises(ProviderError, match=r"gave no answer within 0\.5 s"):
        await other.ask(_request(Mechanism.STATE, message="hang"))
    # That call was a whole round (one call at a time): the breaker opened; after its cooldown
    # one probe goes.
    with pytest.raises(ProviderError, match=r"service down: python:"):
        await other.ask(_request(Mechanism.STATE))
    clock.t += patient.cooldown_s
    after = await other.ask(_request(Mechanism.STATE))
    await other.aclose()
    # The worker that answered first was the one abandoned; a fresh one answered after it.
    assert first.triggered_handlers and after.triggered_handlers
    assert first.triggered_handlers != after.triggered_handlers


@pytest.mark.parametrize(("concurrency", "cut"), [(1, 1), (3, 3), (4, 2)])
async def test_a_round_of_calls_that_never_return_opens_the_entry_points_breaker(
    concurrency: int, cut: int
) -> None:
    # Every call in flight timed out: the rest fail at once. `failures` (2 here) still bounds a
    # round: four calls in flight, the breaker opens at the second timeout.
    spec = "tests.hung_entry_point:never_returns"
    breaker = BreakerSettings(failures=2 if concurrency == 4 else 5, cooldown_s=own_breaker_cooldown())
    target = PythonTarget(spec, ALL, timeout_s=0.2, breaker=breaker)
    requests = [(f"t{i}", _request(Mechanism.STATE)) for i in range(8)]
    outputs = await ask_all(target, requests, concurrency)
    late = f"target: service down: python:{spec} ({cut} call{'s' if cut > 1 else ''} in a row unreachable)"
    assert [o.error for o in outputs] == [
        *[f"target: the entry point '{spec}' gave no answer within 0.2 s"] * concurrency,
        *[late] * (8 - concurrency),
    ]


async def test_an_entry_point_whose_process_ends_errors_the_call() -> None:
    target = PythonTarget(f"{HERE}:exits", ALL, timeout_s=5)
    with pytest.raises(ProviderError, match=r"the entry point's process ended \(exit 3\)"):
        await target.ask(_request(Mechanism.STATE))
    await target.aclose()
