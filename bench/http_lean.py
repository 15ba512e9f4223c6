"""A lean keep-alive HTTP/1.1 client for load generation (bench/gateway_load.py phase 2).

A load generator that shares the 2 cores with the server takes its CPU from the
server: httpx's ``AsyncClient`` costs 0.9-1.7 ms of CPU per request here (URL
parsing, header models, its connection pool), as much as a semantic hit costs the
gateway. This client writes pre-encoded requests to one connection per worker and
reads the status line, the headers and a ``Content-Length`` or chunked body, no
more, as ``wrk``-style generators do. It is for benchmarks against our own
server, not a general client: no redirects, TLS, proxies or compression.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from urllib.parse import urlsplit


class LeanHttpError(Exception):
    """The connection closed or the server sent something this client cannot read."""


@dataclass(frozen=True)
class LeanResponse:
    status: int
    headers: dict[str, str]  # lower-cased names; a repeated header keeps the last value
    body: bytes


class LeanConnection:
    """One keep-alive connection; requests are sent one at a time (no pipelining)."""

    def __init__(self, base_url: str, headers: dict[str, str] | None = None) -> None:
        url = urlsplit(base_url)
        if url.scheme != "http" or url.hostname is None:
            raise ValueError("only plain http://host:port URLs are supported")
        self.host, self.port = url.hostname, url.port or 80
        fixed = {"Host": f"{self.host}:{self.port}", **(headers or {})}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def request_bytes(self, method: str, path: str, body: bytes = b"") -> bytes:
        """The whole request, encoded once so a load loop can resend it."""
        head = f"{method} {path} HTTP/1.1\r\nContent-Length: {len(body)}\r\n".encode("latin-1")
        return head + self._fixed + b"\r\n" + body

    async def send(self, request: bytes) -> LeanResponse:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        self._writer.write(request)
        try:
            return await self._read_response(self._reader)
        except (asyncio.IncompleteReadError, ConnectionError, LeanHttpError):
            await self.close()  # the next send reconnects
            raise

    async def _read_response(self, reader: asyncio.StreamReader) -> LeanResponse:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise LeanHttpError("malformed status line")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = await self._read_chunked(reader)
        else:
            raise LeanHttpError("a response without Content-Length or chunked encoding")
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return LeanResponse(int(parts[1]), headers, body)

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers from our servers
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
