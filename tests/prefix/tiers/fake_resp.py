"""A tiny fake Redis (RESP3) whose MGET answer misbehaves, for the L3 fault tests.

Everything but MGET answers as a real server would (SET "+OK", counts for
EXPIRE/DEL/EXISTS). MGET answers by ``mode``:

* ``short``: one element, whatever the number of keys (a confused proxy);
* ``int``: an integer per key instead of bulk strings (bytes(2**50) would allocate
  a petabyte);
* ``dribble``: a correct all-nil reply, one byte every ``byte_delay`` seconds: each
  byte lands well inside the client's socket timeout, the whole reply does not.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

HELLO = (
    b"%7\r\n+server\r\n+redis\r\n+version\r\n+7.2.0\r\n+proto\r\n:3\r\n+id\r\n:1\r\n"
    b"+mode\r\n+standalone\r\n+role\r\n+master\r\n+modules\r\n*0\r\n"
)


class FakeRedis:
    def __init__(self, mode: str, byte_delay: float = 0.1) -> None:
        self.mode = mode
        self.byte_delay = byte_delay
        self.mgets = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> FakeRedis:
        return self

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closed.set()
        self._sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _mget_reply(self, num_keys: int) -> bytes:
        if self.mode == "short":
            return b"*1\r\n_\r\n"
        if self.mode == "int":
            return b"*%d\r\n" % num_keys + b":1125899906842624\r\n" * num_keys
        return b"*%d\r\n" % num_keys + b"_\r\n" * num_keys

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            while not self._closed.is_set():
                line = reader.readline()
                if not line:
                    return
                args = []
                for _ in range(int(line[1:])):
                    size = int(reader.readline()[1:])
                    args.append(reader.read(size))
                    reader.read(2)
                cmd = args[0].upper()
                if cmd == b"MGET":
                    self.mgets += 1
                    reply = self._mget_reply(len(args) - 1)
                    if self.mode != "dribble":
                        conn.sendall(reply)
                        continue
                    for byte in reply:
                        if self._closed.is_set():
                            return
                        conn.sendall(bytes([byte]))
                        time.sleep(self.byte_delay)
                elif cmd == b"HELLO":  # redis-py 8 speaks RESP3 by default
                    conn.sendall(HELLO)
                elif cmd == b"PING":
                    conn.sendall(b"+PONG\r\n")
                elif cmd in (b"EXPIRE", b"DEL", b"EXISTS"):
                    conn.sendall(b":1\r\n")
                else:  # SET, SELECT, CLIENT SETINFO …
                    conn.sendall(b"+OK\r\n")
        except OSError:  # the client hung up (or was interrupted) mid-reply
            pass
        finally:
            conn.close()
