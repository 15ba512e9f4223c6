"""Real misbehaving peers for the failure tests (test_failures.py): a closed port,
a raw TCP upstream that answers as scripted (hang up, stall, cut mid-stream)
and a stoppable TCP forwarder in front of PostgreSQL.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RawUpstream:
    """A TCP server that plays a broken upstream, one of:

    * ``silent``: accepts and never answers;
    * ``hangup``: accepts, reads the request and closes without a response;
    * ``stall``: answers 200 with an SSE head and one chunk, then goes quiet;
    * ``cut``: answers 200 with an SSE head and one chunk, then closes;
    * ``error-stall``: answers 500 announcing a body it never sends.
    """

    HEAD = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        b'data: {"choices":[{"index":0,"delta":{"content":"Paris"},"finish_reason":null}]}\n\n'
    )

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.conns: list[socket.socket] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.conns.append(conn)
            if self.mode == "silent":
                continue
            conn.settimeout(5)
            with contextlib.suppress(OSError):
                conn.recv(65536)  # the request (small: fits one read)
                if self.mode in ("stall", "cut"):
                    conn.sendall(self.HEAD)
                if self.mode == "error-stall":
                    conn.sendall(
                        b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 99\r\n\r\n{"
                    )
                if self.mode in ("hangup", "cut"):
                    conn.close()

    def __enter__(self) -> RawUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.listener.close()
        for conn in self.conns:
            conn.close()


class TcpForwarder:
    """127.0.0.1:<port> → target, with threads and real sockets; stop() cuts every
    connection and stops listening, start() listens again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.listener: socket.socket | None = None
        self.sockets: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = int(listener.getsockname()[1])
        self.listener = listener
        self.stopped = threading.Event()
        thread = threading.Thread(target=self._accept, args=(listener, self.stopped), daemon=True)
        thread.start()
        self.threads = [thread]

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(5)
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self.sockets.clear()

    def _accept(self, listener: socket.socket, stopped: threading.Event) -> None:
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ)
        while not stopped.is_set():
            if not sel.select(timeout=0.05):
                continue
            client, _ = listener.accept()
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self.lock:
                self.sockets |= {client, server}
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()
        sel.close()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> TcpForwarder:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
