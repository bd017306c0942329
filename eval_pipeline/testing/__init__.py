"""Test servers: the API emulator, a hanging service, embedded Postgres."""

from __future__ import annotations

import socketserver
import threading


class LoopbackServer(socketserver.ThreadingTCPServer):
    """Serves on 127.0.0.1 (`port=0`: any free port) from a background thread until `stop()`;
    also a context manager."""

    daemon_threads = True
    allow_reuse_address = True  # a standalone emulator restarted on its port at once
    # socketserver's default listen backlog of 5 drops concurrent connects, which the client
    # retries a second later: a 16-way burst would stall on it.
    request_queue_size = 128

    def __init__(self, port: int, handler: type[socketserver.BaseRequestHandler], name: str) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.stopping = threading.Event()
        self.port = int(self.server_address[1])
        # poll_interval: how long stop() waits for the serving loop to notice
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.02}, name=name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)

    def __exit__(self, *exc: object) -> None:
        self.stop()
