"""The upstream stream's line reader (gateway/proxy/upstream_read.py ``sse_lines``): a
line end split across reads is one line end, and a read that is only a CRLF's LF
takes nothing more (the relay tests in test_upstream_sse.py read whole streams)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from gateway.proxy.upstream_read import sse_lines


def test_line_ends_split_across_reads() -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for piece in [b"a\r", b"\nb\r", b"", b"\r", "c\u2028".encode(), b"d\n"]:
            yield piece

    async def lines() -> list[bytes]:
        return [line async for line in sse_lines(pieces(), 1024)]

    # CRLF across two reads is one line end; CR then CR is two.
    assert asyncio.run(lines()) == [b"a", b"b", b"", "c\u2028d".encode()]


def test_a_read_that_is_only_a_crlfs_lf_leaves_the_next_lf_its_own() -> None:
    """A CR at one read's end, its LF alone in the next, and the blank line that ends the
    event opening the third: the blank line is kept (before, the third read's LF was
    taken for the CR's too, and two events ran together; a review, session 43)."""

    async def lines(parts: list[bytes]) -> list[bytes]:
        async def pieces() -> AsyncIterator[bytes]:
            for piece in parts:
                yield piece

        return [line async for line in sse_lines(pieces(), 1024)]

    whole = [b"data: A", b"", b"data: B", b""]
    assert asyncio.run(lines([b"data: A\r\n\ndata: B\n\n"])) == whole  # one read: control
    assert asyncio.run(lines([b"data: A\r", b"\n", b"\ndata: B\n\n"])) == whole
    assert asyncio.run(lines([b"data: A\r", b"\n", b"", b"\ndata: B\n\n"])) == whole
