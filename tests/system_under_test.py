"""A team's system as a test double, behind both targets (docs/http_target.md): it answers every
mechanism correctly, except for the faults it is told to make.

Correct means: state, pattern and always answers computed from the KB and pattern rules (it
borrows eval_pipeline's own mechanisms to do so, which is fine for a double); semantic answers
the bank's expected entities for the message. Faults, named by test id: one state test gets a
handler it must not get, one crisis message goes undetected, one test's answer breaks the contract.

Over HTTP: `serve(system)` starts a real server on 127.0.0.1 (ephemeral port); it counts the
requests it receives per mechanism (`system.calls`), and while `system.outage` is set it answers a
seeded share of them with HTTP 500 (a partial outage). As a Python entry point:
`tests.system_under_test:EnvSystem`, configured from the environment (`SUT_*`), because an entry
point is instantiated without arguments.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.contract import SystemRequest
from eval_pipeline.core.inputs.kb import LoadMode
from eval_pipeline.core.inputs.loading import Problem, load_banks, load_kb
from eval_pipeline.core.mechanisms.always import always_loaded
from eval_pipeline.core.mechanisms.pattern import PatternMatcher
from eval_pipeline.core.mechanisms.state import triggered_handlers
from eval_pipeline.core.scoring.registry import PATTERN, STATE

Answer = dict[str, Any]


@dataclass(frozen=True)
class Outage:
    """A partial outage: a request fails (HTTP 500) with chance `rate`, decided by the seed and the
    request's content, so the same tests fail whatever order they arrive in."""

    rate: float
    seed: int

    def hits(self, request: SystemRequest) -> bool:
        return random.Random(f"{self.seed}:{request.model_dump_json()}").random() < self.rate


class ReferenceSystem:
    """One method per mechanism, each taking a `SystemRequest` and returning an answer dict."""

    def __init__(
        self,
        kb: Path,
        banks_dir: Path,
        *,
        wrong_handler_test: str | None = None,
        missed_crisis_test: str | None = None,
        malformed_test: str | None = None,
    ) -> None:
        problems: list[Problem] = []
        found = load_kb(kb, problems)
        assert found is not None and not problems, problems
        self.kb = found
        self.banks = load_banks(banks_dir, problems)
        assert not problems and self.banks.rules is not None, problems
        self.matcher = PatternMatcher(self.banks.rules)
        state_tests = {t.test_id: t for t in STATE.tests(self.banks)}
        pattern_tests = {t.test_id: t for t in PATTERN.tests(self.banks)}
        self.wrong = state_tests[wrong_handler_test] if wrong_handler_test else None
        self.missed = pattern_tests[missed_crisis_test] if missed_crisis_test else None
        self.malformed_state = state_tests.get(malformed_test or "")
        self.outage: Outage | None = None
        self.calls: Counter[str] = Counter()  # requests received over HTTP, per mechanism
        self._calls_lock = threading.Lock()

    def received(self, request: SystemRequest) -> bool:
        """Count a request served over HTTP; whether the outage fails it."""
        with self._calls_lock:
            self.calls[request.mechanism.value] += 1
        return self.outage is not None and self.outage.hits(request)

    def failure_body(self, request: SystemRequest) -> bytes:
        """The body of a failed request's HTTP 500."""
        return b'{"error": "outage"}'

    def semantic(self, request: SystemRequest) -> Answer:
        test = next(t for t in self.banks.semantic_tests if t.prompt == request.message)
        picks = list(dict.fromkeys([*test.expected_primary, *test.expected_secondary]))[: request.top_k]
        return {
            "candidates": [{"entity_id": e, "score": 1.0 - i / 100} for i, e in enumerate(picks)],
            "selections": [{"entity_id": e} for e in picks],
        }

    def state(self, request: SystemRequest) -> Answer:
        if self.malformed_state is not None and request.user_state == self.malformed_state.user_state:
            return {"triggered_handlers": "not a list"}
        fired = triggered_handlers(request.user_state, self.kb.with_mode(LoadMode.STATE))
        if self.wrong is not None and request.user_state == self.wrong.user_state:
            fired = [*fired, self.wrong.not_expected_handlers[0]]
        return {"triggered_handlers": fired}

    def pattern(self, request: SystemRequest) -> Answer:
        matches = [
            {"entity_id": e, "kind": m.kind, "pattern": m.pattern, "matched_text": m.matched_text}
            for m in self.matcher.match(request.message)
            for e in m.entities
        ]
        if self.missed is not None and request.message == self.missed.prompt:
            matches = [m for m in matches if m["entity_id"] not in self.missed.expected_matches]
        return {"pattern_matches": matches}

    def always(self, request: SystemRequest) -> Answer:
        assert request.user_type is not None
        return {"always_loaded": always_loaded(request.user_type, self.kb.entities)}

    def answer(self, request: SystemRequest) -> Answer:
        handler = getattr(self, request.mechanism.value)
        answer: Answer = handler(request)
        return answer


class EnvSystem(ReferenceSystem):
    """The double as a Python entry point: paths and faults from SUT_* environment variables."""

    def __init__(self) -> None:
        env = os.environ
        super().__init__(
            Path(env["SUT_KB"]),
            Path(env["SUT_BANKS"]),
            wrong_handler_test=env.get("SUT_WRONG_HANDLER_TEST"),
            missed_crisis_test=env.get("SUT_MISSED_CRISIS_TEST"),
            malformed_test=env.get("SUT_MALFORMED_TEST"),
        )


async def async_state(request: SystemRequest) -> Answer:
    """An async entry point for one mechanism (configured as `{state: ...}`)."""
    return EnvSystem().state(request)


def crash(request: SystemRequest) -> Answer:
    """An entry point that takes down the process evaluating the model (the parent of the worker
    it answers in), as a crashing native library in it would."""
    os.kill(os.getppid(), signal.SIGKILL)
    threading.Event().wait()  # ended with it (its input closes)
    raise AssertionError("unreachable")


@contextmanager
def serve(system: ReferenceSystem) -> Iterator[str]:
    """The double behind a real HTTP server; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = SystemRequest.model_validate_json(body)
            if system.received(request):
                reply = system.failure_body(request)
                self.send_response(500)
            else:
                reply = json.dumps(system.answer(request)).encode()
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/answer"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


MECHANISMS = [m.value for m in Mechanism]
