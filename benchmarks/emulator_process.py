"""The API emulator in a child process of its own, for benchmarks that time the client.

In-process, the emulator's handler threads would share the client's interpreter lock, and its CPU
time (parsing, answering) would count as the client's. A real API's CPU is not ours.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

from eval_pipeline.testing.emulator.server import start_emulator


class EmulatorProcess:
    """`start_emulator(**config)` in a child process: `.base_url`, `.voyage_base_url`, `.stats`,
    `.reset()`, `.reconfigure(**changes)`, `.stop()` as on `EmulatorHandle`."""

    def __init__(self, **config: Any) -> None:
        context = multiprocessing.get_context("spawn")  # no threads or sockets inherited by a fork
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, config), name="api-emulator")
        self._process.start()
        child.close()
        self.base_url: str = self._conn.recv()
        self.voyage_base_url = f"{self.base_url}/v1"

    def _ask(self, op: str, changes: dict[str, Any] | None = None) -> Any:
        self._conn.send((op, changes or {}))
        return self._conn.recv()

    @property
    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self._ask("stats")
        return stats

    def reset(self) -> None:
        self._ask("reset")

    def reconfigure(self, **changes: Any) -> None:
        self._ask("reconfigure", changes)

    def stop(self) -> None:
        if self._process.is_alive():
            self._ask("stop")
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()


def _serve(conn: Connection, config: dict[str, Any]) -> None:
    handle = start_emulator(**config)
    try:
        conn.send(handle.base_url)
        while (request := conn.recv())[0] != "stop":
            op, changes = request
            if op == "stats":
                conn.send(handle.stats)
                continue
            if op == "reset":
                handle.reset()
            else:
                handle.reconfigure(**changes)
            conn.send(None)
    finally:
        handle.stop()
    conn.send(None)
    conn.close()
