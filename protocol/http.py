"""HTTP plumbing shared by the engine server and the gateway: bounded JSON body reading,
SSE events, and an SSE response that always closes its generator."""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncGenerator
from typing import Any

import anyio
from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from protocol.errors import ApiError
from protocol.openai import ChatCompletionRequest, CompletionRequest

__all__ = ["ApiError", "EventStream", "header_int", "read_json", "sse"]


class EventStream(StreamingResponse):
    """SSE response that always closes its generator (and so aborts the engine request).

    Starlette cancels the body iterator when the client disconnects, but an iterator
    abandoned while suspended at a ``yield`` is only closed by the garbage
    collector; this closes it deterministically, shielded from the cancellation.
    """

    def __init__(
        self,
        events: AsyncGenerator[str, None],
        request_id: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        headers = {
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "X-Request-Id": request_id,
        } | (headers or {})
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._events.aclose()


#: The deepest nesting of arrays and objects a request body may have: a chat body needs 4
#: (body → messages → message → content parts), a JSON schema in ``response_format`` or
#: ``tools`` a few dozen at most. ``json`` itself parses ~1,000 levels, but every walk
#: over the body after it (the partition key's serialization, re-encoding it for an
#: HTTP upstream) recurses too, and a body just under json's own limit overflowed them.
MAX_JSON_DEPTH = 64


_ASCII_DIGITS = re.compile(r"[0-9]+")

#: Where :func:`header_int` stops counting: 2**31 seconds, the bound RFC 9111 §1.2.2 sets
#: for a delta-seconds value, far above any body size or age the gateway compares with.
HEADER_INT_CAP = 2**31


def header_int(value: str | None, cap: int = HEADER_INT_CAP) -> int | None:
    """A header's non-negative decimal number, at most ``cap``; None unless the value is
    ASCII digits only. ``str.isdigit()`` also accepts "²" or "٣", which ``int()`` then
    refuses or reads as a number no HTTP peer meant; a value longer than ``int()``'s own
    digit limit would raise too. A longer run of digits is ``cap`` without being parsed.
    """
    if value is None or not _ASCII_DIGITS.fullmatch(value):
        return None
    digits = value.lstrip("0") or "0"
    return cap if len(digits) > len(str(cap)) else min(int(digits), cap)


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_json_value(body: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise a 400 ApiError unless ``body`` (as ``json.loads`` returned it) can be
    written back as strict JSON and walked without deep recursion.

    ``json.loads`` accepts what ``json.dumps`` and UTF-8 cannot give back: a number
    too large for a float (``1e400`` becomes ``inf``) and a lone surrogate (``"\\ud800"``,
    or its bytes in the body), which only failed later, as a 500, when the body was
    forwarded or hashed. Iterative, so the depth check itself cannot overflow the stack.
    The messages name what is wrong, never the text; ``param`` names the top-level field
    it is in only when that is a field of the API (any other key is client text too).
    """
    if not isinstance(body, dict):
        _check_value(body, 1, max_depth, None)
        return
    for key, value in body.items():
        _check_text(key, None)
        _check_value(value, 2, max_depth, key if key in _API_FIELDS else None)


#: Top-level fields a refusal may name in ``param``.
_API_FIELDS = frozenset(ChatCompletionRequest.model_fields) | frozenset(
    CompletionRequest.model_fields
)


def _check_value(value: Any, depth: int, max_depth: int, param: str | None) -> None:
    # json.loads makes exact dicts, lists, strs and floats, so ``type() is`` is enough; the
    # loop runs over every value of every body (a few microseconds for a chat request).
    isfinite = math.isfinite
    if type(value) is str:
        _check_text(value, param)
    elif type(value) is float and not isfinite(value):
        raise _not_finite(param)
    if type(value) is not dict and type(value) is not list:
        return
    stack: list[tuple[Any, int]] = [(value, depth)]
    try:
        while stack:
            container, depth = stack.pop()
            if depth > max_depth:
                raise _too_deep(max_depth, param)
            if type(container) is dict:
                for key in container:
                    key.encode("utf-8")
                items = container.values()
            else:
                items = container
            for item in items:
                kind = type(item)
                if kind is str:
                    item.encode("utf-8")
                elif kind is dict or kind is list:
                    stack.append((item, depth + 1))
                elif kind is float and not isfinite(item):
                    raise _not_finite(param)
    except UnicodeEncodeError:
        raise _not_unicode(param) from None


def _not_finite(param: str | None) -> ApiError:
    return ApiError(400, "the request body has a number too large for a JSON number", param=param)


def _not_unicode(param: str | None) -> ApiError:
    return ApiError(
        400, "the request body has text that is not valid Unicode (a lone surrogate)", param=param
    )


def _too_deep(max_depth: int, param: str | None = None) -> ApiError:
    return ApiError(
        400, f"the request body nests arrays and objects more than {max_depth} deep", param=param
    )


def _check_text(text: str, param: str | None) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _not_unicode(param) from None


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'), ensure_ascii=False)}\n\n"


_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress"})


#: Seconds a client has to send a whole request body once its headers are in. Without a
#: deadline a client that declares a body and sends a byte now and then holds its
#: connection and a task for good (uvicorn times out neither), and a few hundred of them
#: hold every connection a server has.
BODY_TIMEOUT_SECONDS = 30.0


async def read_body(
    request: Request, limit: int, timeout: float | None = BODY_TIMEOUT_SECONDS
) -> bytes:
    """The body's bytes, at most ``limit`` of them, else a 413 :class:`ApiError` (a body
    up to 8× the limit is drained first, so the client can read the answer; a larger
    one, or one declared larger, is refused at once and its connection closed), or a
    408 when the whole body has not arrived ``timeout`` seconds after the read began
    (the server then closes the connection: the rest of the body is never read)."""
    try:
        with anyio.fail_after(timeout):
            return await _read_capped(request, limit)
    except TimeoutError:
        raise ApiError(
            408,
            f"the request body did not arrive within {timeout:g} seconds",
            code="request_timeout",
            # the rest of the body may still come: the connection cannot carry another
            headers={"Connection": "close"},
        ) from None


async def _read_capped(request: Request, limit: int) -> bytes:
    too_large = ApiError(
        413,
        f"the request body is larger than the limit of {limit} bytes",
        code="request_too_large",
    )
    declared = header_int(request.headers.get("content-length"), cap=8 * limit + 1)
    if declared is not None and declared > 8 * limit:
        raise too_large  # not worth draining: the connection will be closed
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > 8 * limit:
            raise too_large
        if size <= limit:
            chunks.append(chunk)
    if size > limit:  # drained, so the client can read the answer
        raise too_large
    return b"".join(chunks)


async def read_json(
    request: Request, limit: int, timeout: float | None = BODY_TIMEOUT_SECONDS
) -> dict[str, Any]:
    """The body as a JSON object, or an ApiError (compressed, empty, not JSON, too
    large, not an object, not all there within ``timeout`` seconds, or not writable back
    as strict JSON: see :func:`check_json_value`)."""
    # Every Content-Encoding line, each a list: a second line can name a coding too.
    codings = [
        c.strip().lower()
        for line in request.headers.getlist("content-encoding")
        for c in line.split(",")
    ]
    encoding = next((c for c in codings if c not in ("", "identity")), "identity")
    if encoding != "identity":
        # As vLLM and the OpenAI API: bodies come uncompressed. Said up front, instead of
        # a JSON error about byte 0x8b; the header's value is named only when it is one
        # of the codings HTTP defines (it is the client's text otherwise).
        named = f" ({encoding})" if encoding in _CODINGS else ""
        raise ApiError(
            415,
            f"compressed request bodies{named} are not supported; send the JSON uncompressed",
            code="unsupported_content_encoding",
        )
    raw = await read_body(request, limit, timeout)
    if not raw.strip():
        raise ApiError(400, "the request body is empty; expected a JSON object")
    try:
        body = json.loads(raw, parse_constant=reject_constant)
    except RecursionError:  # deeper than json's own limit: the same refusal as past ours
        raise _too_deep(MAX_JSON_DEPTH) from None
    except json.JSONDecodeError as e:  # where, not what: the text may be the client's
        said = f"{e.msg.removesuffix(' at')} at char {e.pos}"
        raise ApiError(400, f"the request body is not valid JSON: {said}") from None
    except UnicodeDecodeError as e:  # its str() quotes the byte found
        raise ApiError(400, f"the request body is not UTF-8 (at byte {e.start})") from None
    except ValueError as e:  # NaN / Infinity, or a number past int()'s digit limit
        said = str(e) if str(e).endswith("is not valid JSON") else "a number has too many digits"
        raise ApiError(400, f"the request body is not valid JSON: {said}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    check_json_value(body)
    return body
