"""A service that accepts connections and never finishes answering: what a hung team system
looks like. It reads what arrives and sends back, by `behaviour`: nothing (`silent`); the headers
of a 200 and then nothing (`headers`); or those headers and then the promised body one byte every
`drip_s` seconds (`drip`), so that no single read ever waits long and only an overall deadline ends
the call. It counts the requests that reached it (tests of the circuit breaker and call deadlines).
"""

from __future__ import annotations

import socket
import socketserver
import threading
from typing import Literal

from eval_pipeline.testing import LoopbackServer

Behaviour = Literal["silent", "headers", "drip"]
BODY_BYTES = 1_000_000  # promised and never all sent
HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {BODY_BYTES}\r\n\r\n".encode()
)


class HangingServer(LoopbackServer):
    def __init__(self, behaviour: Behaviour = "silent", drip_s: float = 1.0) -> None:
        self.behaviour = behaviour
        self.drip_s = drip_s
        self.lock = threading.Lock()
        self.held: list[socket.socket] = []
        self.requests = 0  # connections that sent a request line
        super().__init__(0, _Hang, "hanging-server")
        self.url = f"http://127.0.0.1:{self.port}/retrieve"

    def stop(self) -> None:
        super().stop()
        with self.lock:
            for conn in self.held:
                conn.close()


class _Hang(socketserver.BaseRequestHandler):
    server: HangingServer

    def handle(self) -> None:
        server, conn = self.server, self.request
        with server.lock:
            server.held.append(conn)
        try:
            if conn.recv(65536):
                with server.lock:
                    server.requests += 1
                if server.behaviour != "silent":
                    conn.sendall(HEADERS)
                if server.behaviour == "drip":
                    # One byte of whitespace (a JSON body's padding) every `drip_s`, until the client goes.
                    for _ in range(BODY_BYTES - 1):
                        if server.stopping.wait(server.drip_s):
                            return
                        conn.sendall(b" ")
            while conn.recv(65536):  # hold the connection until the client gives up
                pass
        except OSError:
            return
