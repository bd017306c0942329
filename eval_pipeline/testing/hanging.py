"""A service that accepts connections and never answers: what a hung team system looks like.

`hanging_server()` listens on 127.0.0.1, accepts every connection, reads what arrives and sends
nothing back, so each call ends in the client's timeout. It counts the connections it accepted
and the requests that reached it, for tests of the circuit breaker.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class HangingServer:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/retrieve"
        self._lock = threading.Lock()
        self._held: list[socket.socket] = []
        self._stopping = threading.Event()
        self.connections = 0
        self.requests = 0  # connections that sent a request line
        self._thread = threading.Thread(target=self._serve, name="hanging-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # the listener was closed: stopping
                return
            if self._stopping.is_set():  # stop()'s wake-up connection
                conn.close()
                return
            with self._lock:
                self.connections += 1
                self._held.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            if conn.recv(65536):
                with self._lock:
                    self.requests += 1
            while conn.recv(65536):  # hold the connection until the client gives up
                pass
        except OSError:
            return

    def stop(self) -> None:
        self._stopping.set()
        # Closing the listener does not wake an accept() blocked in another thread (Linux): the
        # join below waited out its whole timeout on every stop. A connection of our own does.
        with contextlib.suppress(OSError), socket.create_connection(self._listener.getsockname(), timeout=5):
            pass
        self._listener.close()
        with self._lock:
            for conn in self._held:
                conn.close()
        self._thread.join(timeout=5)


@contextmanager
def hanging_server() -> Iterator[HangingServer]:
    server = HangingServer()
    try:
        yield server
    finally:
        server.stop()
