"""Reading an HTTP upstream's bytes within bounds: bodies, SSE lines and events, JSON.

An upstream is trusted with its answers, not with the gateway's memory: a body is
read up to a cap and one SSE event up to another (the settings
``upstream_max_body_bytes`` and ``upstream_max_event_bytes``); past either the
reading stops and the caller gets an ``UpstreamError`` (``TOO_LARGE``, none of the
upstream's text). SSE lines end only at CR, LF or CRLF, as the SSE spec says: JSON
may carry U+2028, U+2029 or U+0085 unescaped (vLLM and our engine do), and a
``str.splitlines`` reader (httpx's ``aiter_lines``) would cut a chunk there.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.errors import UpstreamError

# Far above any real completion (logprobs included): a bound on what a broken or
# hostile upstream can make the gateway hold, not a limit on answers.
MAX_BODY_BYTES = 32 * 2**20
MAX_EVENT_BYTES = 8 * 2**20
# An error's body: any error object fits; more is not an error object, so not JSON.
MAX_ERROR_BYTES = 64 * 2**10
TOO_LARGE = "the upstream's response is too large"  # never any of the upstream's text
# Real answers nest a few levels; the parser takes ~1000 at the top of the stack, and
# what parsed there would break the encoders (error body, backfill) that run deeper.
MAX_JSON_DEPTH = 128
_EOL = re.compile(rb"\r\n|\r|\n")  # the SSE spec's line ends, and no others


async def read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    """The body's first ``cap`` bytes, and whether that is all of it. Reading stops
    there (the caller closes the response): the rest is never held."""
    parts: list[bytes] = []
    size = 0
    async for piece in response.aiter_bytes():
        if size + len(piece) > cap:
            parts.append(piece[: cap - size])
            return b"".join(parts), False
        parts.append(piece)
        size += len(piece)
    return b"".join(parts), True


def parse_json(raw: bytes | str) -> Any:
    """``json.loads``, with nesting deeper than ``MAX_JSON_DEPTH`` refused like any other
    bad JSON (a ``ValueError``): an upstream's odd body is its error, never a 500."""
    try:
        value = json.loads(raw)
    except RecursionError as exc:  # deeper than the parser goes
        raise ValueError("JSON nested too deeply") from exc
    opened = (
        raw.count(b"[") + raw.count(b"{")
        if isinstance(raw, bytes)
        else raw.count("[") + raw.count("{")
    )
    if opened > MAX_JSON_DEPTH and _too_deep(value):  # the count: a cheap bound first
        raise ValueError("JSON nested too deeply")
    return value


def _too_deep(value: Any) -> bool:
    """Whether containers nest past ``MAX_JSON_DEPTH``: level by level, each container
    visited once (a big logprobs body costs a fraction of its parse)."""
    level = [value] if type(value) is dict or type(value) is list else []
    for _ in range(MAX_JSON_DEPTH):
        deeper = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                if type(child) is dict or type(child) is list:
                    deeper.append(child)
        if not deeper:
            return False
        level = deeper
    return True


def too_large() -> UpstreamError:
    return UpstreamError(TOO_LARGE, code="upstream_response_too_large")


async def sse_lines(chunks: AsyncIterator[bytes], cap: int) -> AsyncIterator[bytes]:
    """The lines of an SSE body, without their ends; none longer than ``cap`` bytes."""
    pending = bytearray()  # a line's start, from the pieces before (grown in place)
    after_cr = False  # a CR ended the last piece: a LF opening the next belongs to it
    async for piece in chunks:
        if after_cr and piece[:1] == b"\n":
            piece = piece[1:]
        after_cr = False  # that CR's LF is taken: a LF after it is a line of its own
        if not piece:
            continue
        after_cr = piece[-1:] == b"\r"
        start = 0
        for end in _EOL.finditer(piece):
            line = piece[start : end.start()]
            if pending:
                line = bytes(pending + line)
                pending.clear()
            if len(line) > cap:
                raise too_large()
            yield line
            start = end.end()
        pending += piece[start:]
        if len(pending) > cap:
            raise too_large()
    if pending:
        yield bytes(pending)


@dataclass(frozen=True)
class SseComment:
    """A comment line (``: ping``), which upstreams send to keep idle timeouts from
    firing while a request queues or prefills. ``text`` is its text when short
    printable ASCII, else empty: it goes on to the client's stream. ``fields``: an
    event with ``event:``, ``id:`` or ``retry:`` lines and no data (a ``retry:`` alone
    sets the client's reconnection delay), those lines as :func:`sse_data` keeps them."""

    text: str
    fields: str = ""


MAX_COMMENT_CHARS = 64
#: The SSE fields besides data a client reads (EventSource keeps ``id`` as its
#: Last-Event-ID, ``event`` names the listener, ``retry`` its reconnection delay).
FIELDS = (b"event", b"id", b"retry")
MAX_FIELD_CHARS = 256


async def sse_data(
    response: httpx.Response, cap: int
) -> AsyncIterator[tuple[str, bool, str] | SseComment]:
    """Each event's data (its ``data:`` lines joined with LF, as the SSE spec does),
    whether it was one line (then it is the upstream's payload exactly), and its
    ``event:`` / ``id:`` / ``retry:`` lines as they came (``"id: 7\n"``; "" for none),
    which go on to the client with it; each comment line as an ``SseComment``, and an
    event of those fields alone as one with ``fields``. A field line that is not short
    printable text, and any other field (the SSE spec has clients ignore them), is
    dropped; an event's data past ``cap`` bytes is refused."""
    lines: list[str] = []
    fields = ""
    size = 0
    # a line holds its field name too: "data: " and a BOM on top of the event's cap
    async for raw in sse_lines(response.aiter_bytes(), cap + 16):
        if not raw:  # a blank line ends the event
            for event in _events(lines, fields):
                yield event
            lines, size, fields = [], 0, ""
            continue
        name, _, value = raw.removeprefix(b"\xef\xbb\xbf").partition(b":")
        if name == b"":
            yield SseComment(_comment_text(value))
            continue
        if name != b"data":
            fields += _field_line(name, value)
            continue
        size += len(value) + 1
        if size > cap:
            raise too_large()
        lines.append(value.removeprefix(b" ").decode("utf-8", "replace"))
    for event in _events(lines, fields):  # a last event without its blank line: the end closes it
        yield event


def _field_line(name: bytes, value: bytes) -> str:
    """An ``event:`` / ``id:`` / ``retry:`` line to pass on, or "" to drop it."""
    if name not in FIELDS:
        return ""
    text = value.removeprefix(b" ").decode("utf-8", "replace")
    if len(text) > MAX_FIELD_CHARS or not text.isprintable() or "\ufffd" in text:
        return ""
    return f"{name.decode()}: {text}\n"


def _comment_text(value: bytes) -> str:
    """A comment to pass on as it came, or "" to drop it: read as ASCII with
    replacement, a UTF-8 one reached the client with each byte a U+FFFD (a review,
    session 45); what is not UTF-8 or not printable is dropped, never mended."""
    try:
        text = value.strip().decode("utf-8")
    except UnicodeDecodeError:
        return ""
    return text if len(text) <= MAX_COMMENT_CHARS and text.isprintable() else ""


def _events(lines: list[str], fields: str = "") -> list[tuple[str, bool, str] | SseComment]:
    """One event's data lines as the events to handle. Joined, as the SSE spec says,
    unless they are chunks some server separated by one line end instead of two (each
    line JSON or ``[DONE]``, the whole none): those were each read on their own before
    the gateway read SSE as the spec does, and a working upstream stays working. The
    event's other fields go with its first piece."""
    if not lines:
        return [SseComment("", fields)] if fields else []
    if len(lines) == 1:
        return [(lines[0], True, fields)]
    joined = "\n".join(lines)
    if all(_is_chunk(line) for line in lines) and not _is_chunk(joined):
        return [(line, True, fields if i == 0 else "") for i, line in enumerate(lines)]
    return [(joined, False, fields)]


def _is_chunk(data: str) -> bool:
    if data.strip() == "[DONE]":
        return True
    try:
        parse_json(data)
    except ValueError:
        return False
    return True
