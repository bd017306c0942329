"""A service that accepts connections and never finishes answering: what a hung team system
looks like.

`hanging_server()` listens on 127.0.0.1, accepts every connection and reads what arrives. What it
sends back depends on `behaviour`: nothing (`silent`); the headers of a 200 and then nothing
(`headers`); or those headers and then the promised body one byte every `drip_s` seconds
(`drip`), so that no single read ever waits long and only an overall deadline ends the call. It
counts the connections it accepted and the requests that reached it, for tests of the circuit
breaker and of call deadlines.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

Behaviour = Literal["silent", "headers", "drip"]
BODY_BYTES = 1_000_000  # promised and never all sent
HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {BODY_BYTES}\r\n\r\n".encode()
)


class HangingServer:
    def __init__(self, behaviour: Behaviour = "silent", drip_s: float = 1.0) -> None:
        self.behaviour = behaviour
        self.drip_s = drip_s
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
                if self.behaviour != "silent":
                    conn.sendall(HEADERS)
                if self.behaviour == "drip":
                    self._drip(conn)
            while conn.recv(65536):  # hold the connection until the client gives up
                pass
        except OSError:
            return

    def _drip(self, conn: socket.socket) -> None:
        """One byte of whitespace (a JSON body's padding) every `drip_s`, until the client goes."""
        for _ in range(BODY_BYTES - 1):
            if self._stopping.wait(self.drip_s):
                return
            conn.sendall(b" ")

    def stop(self) -> None:
        self._stopping.set()
        # Closing the listener does not wake an accept() blocked in another thread (Linux); a
        # connection of our own does.
        with contextlib.suppress(OSError), socket.create_connection(self._listener.getsockname(), timeout=5):
            pass
        self._listener.close()
        with self._lock:
            for conn in self._held:
                conn.close()
        self._thread.join(timeout=5)


@contextmanager
def hanging_server(behaviour: Behaviour = "silent", drip_s: float = 1.0) -> Iterator[HangingServer]:
    server = HangingServer(behaviour, drip_s)
    try:
        yield server
    finally:
        server.stop()
