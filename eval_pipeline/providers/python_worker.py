"""A Python entry point loaded, and the process it answers in
(`python -m eval_pipeline.providers.python_worker`; what an entry point is: `python_target`).

The team's code runs here, so that a call that never returns can be abandoned. The protocol is one
JSON object a line: the first line in names the entry point and the module path, answered by
`{"ready": true}` or `{"error": reason}`; then each request in is answered by `{"answer": ...}`
(validated here), `{"violation": reason}` or `{"raised": type, "detail": message}`. The team's
prints go to stderr: stdout carries the protocol. The worker ends when its input ends, even inside
a call that never returns (a thread watches stdin), so a killed parent leaves no worker behind; it
ignores SIGINT, which a terminal sends to the whole process group.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.contract import ContractViolation, SystemAnswer, SystemRequest, parse_answer

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


def _lines(source: IO[str], into: queue.Queue[str]) -> None:
    for line in source:
        into.put(line)
    os._exit(0)  # the parent has gone or closed us: end now, whatever call is still running


def _outcome(handler: Any, loop: asyncio.AbstractEventLoop, request: SystemRequest) -> dict[str, Any]:
    try:
        payload = handler(request)
        if inspect.isawaitable(payload):
            payload = loop.run_until_complete(payload)
    except Exception as exc:  # the team's failure is the test's outcome
        return {"raised": type(exc).__name__, "detail": " ".join(str(exc).split())[:MAX_REASON]}
    try:
        answer = parse_answer(payload, request.mechanism)
    except ContractViolation as exc:
        return {"violation": str(exc)}
    return {"answer": answer.model_dump(mode="json", exclude_unset=True)}


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    inbox: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(sys.stdin, inbox), daemon=True).start()

    def say(message: dict[str, Any]) -> None:
        print(json.dumps(message), file=out, flush=True)

    start = json.loads(inbox.get())
    sys.path[:] = start["path"]
    try:
        handlers = load_handlers(start["entrypoint"], [Mechanism(m) for m in start["mechanisms"]])
    except EntrypointError as exc:
        say({"error": str(exc)})
        return
    # Built now, not inside the first call's timeout (the models defer building their validators).
    SystemRequest.model_rebuild(force=True)
    SystemAnswer.model_rebuild(force=True)
    say({"ready": True})
    loop = asyncio.new_event_loop()  # one for every call, as async team code may keep clients on it
    while True:
        request = SystemRequest.model_validate_json(inbox.get())
        say(_outcome(handlers[request.mechanism], loop, request))


if __name__ == "__main__":
    main()
