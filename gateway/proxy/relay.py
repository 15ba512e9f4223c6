"""Reading an upstream's HTTP answer: its error, its whole body, its SSE stream.

What the client gets back is the upstream's own, as far as the gateway can keep it:
a 429 or 503 keeps its status, its error body and its ``Retry-After`` (a client's
back-off depends on them); any other error keeps its OpenAI-shaped body and its
allowlisted headers, and its status (a 4xx, or a 500, 502 or 504; another 5xx is
a 502); an allowlist of response headers (:func:`passed_headers`) travels with
every answer; an error event in a stream keeps the upstream's error object. A 401,
403 or 407 refuses the gateway's own upstream credentials, not the client's (whose
key the gateway already accepted): a 502 ``upstream_auth_failed`` with the gateway's
words, since the upstream's may quote part of the operator's key. An error body in
the flat shape of SGLang and vLLM before 0.10 (``{"object": "error", "message":
…}``) is put in OpenAI's nesting field by field; one with only a string to say
(TGI's ``{"error": "…"}``, FastAPI's ``{"detail": "…"}``) gets the gateway's body
with that string as its message; any other JSON (FastAPI's validation list, which
quotes the request) gets a fixed message, never a rendering of it. An error body
that is not JSON becomes the message of the gateway's own error body, cut to 200
characters: the upstream's words back to the client who asked, never into a log
line, a header or a trace (``UpstreamRefusal`` and ``UpstreamStatusError`` read as
their status alone). Bytes the gateway does not
need to change are forwarded as bytes (``Done.raw``, ``Delta.line``), so a body
that Python's strict JSON encoder would refuse (``NaN``, a lone surrogate escape)
still reaches the client as it was sent.

A stream's chunks are read in two layers. The frame is the gateway's to route: a
chunk must be a JSON object, since the gateway has to see whether it is an error
event and take out the usage it asked for itself. A chunk that is not JSON or not
an object is an upstream protocol error: a 502 in the OpenAI error shape before the
first byte, after it an error event in that shape and ``data: [DONE]``. What is
inside the object (``choices``, each choice, its ``delta``, its text, its
``finish_reason``) the gateway only reads, for its metrics and to put the answer
back together for the backfill. A field there of the wrong type (``"choices": 5``,
a choice that is not an object, ``"delta": "x"``, ``"content": 5``) is read as
absent and the chunk is forwarded as it came: a client that copes with it keeps
working, one that does not would have failed against the upstream the same way, and
the answer is not stored, since the gateway could not read all of it
(``gateway/proxy/passthrough.py``). ``error`` is read as OpenAI's own SDK reads it:
only a truthy value is an error event (``null``, ``false``, ``0``, ``""`` and ``{}``
on an ordinary chunk are none). An error event before the first byte whose ``error``
is not an object gets the gateway's body in the OpenAI shape (type
``upstream_error``): the upstream's text as its message when it sent a string, cut
to 200 characters, else a fixed one, never a rendering of what it sent. After the
first byte any error event goes to the client as the upstream wrote it.

What it holds of the answer is bounded (``gateway/proxy/upstream_read.py``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from gateway.errors import GatewayError, UpstreamError
from gateway.proxy.cache_counts import hide_cache_counts, hide_shared_headers
from gateway.proxy.media_type import json_media_type, success_status
from gateway.proxy.passed_headers import passed_headers
from gateway.proxy.upstream import (
    RELAYED_STATUSES,
    Delta,
    Done,
    Event,
    KeepAlive,
    UpstreamRefusal,
    UpstreamStatusError,
    UpstreamStreamError,
    encodable,
    usage_counts,
)
from gateway.proxy.upstream_read import (
    MAX_BODY_BYTES,
    MAX_ERROR_BYTES,
    MAX_EVENT_BYTES,
    SseComment,
    parse_json,
    read_capped,
    sse_data,
    too_large,
)
from protocol.http import header_int

KEPT_5XX = (500, 502, 504)  # upstream 5xx statuses the client gets as they are (else 502)
CREDENTIAL_STATUSES = (401, 403, 407)  # the gateway's own upstream key or proxy refused
MAX_SAID_CHARS = 2000  # of an upstream's error string put in the gateway's own body


async def upstream_error(
    response: httpx.Response,
    request_id: str,
    hide_limits: bool = False,
    hide_timer: bool = False,
) -> GatewayError:
    """The upstream's error answer as the client gets it. ``hide_limits`` /
    ``hide_timer``: its account's limits / prompt time are kept from the client
    (cache_counts.py) unless the error is the refusal they explain (a 429 or 503)."""
    status = response.status_code
    passed = passed_headers(response, request_id)
    if status not in RELAYED_STATUSES:
        hide_shared_headers(passed, limits=hide_limits, timer=hide_timer)
    try:
        raw, whole = await read_capped(response, MAX_ERROR_BYTES)
    except httpx.HTTPError:
        raw, whole = b"", True  # the status line is enough; a body that never comes is not
    finally:
        await response.aclose()
    if status in CREDENTIAL_STATUSES:
        # The client's key was accepted by the gateway; the upstream refused the
        # gateway's. Its body may show part of the operator's key: not passed on.
        return UpstreamError(
            f"the upstream refused the gateway's credentials ({status})",
            code="upstream_auth_failed",
        )
    payload: dict[str, Any] | None = None
    parsed: Any = None
    try:
        if not whole:
            raise ValueError("cut short: not an error object")
        parsed = parse_json(raw)
        err, message, payload = _error_object(parsed, status)
    except ValueError:
        err, message = {}, raw[:200].decode("utf-8", "replace")
    said = f"the upstream answered {status}" + (f": {message}" if message.strip() else "")
    # A body that goes back as it was parsed goes back as its bytes (charset and all).
    verbatim = raw if payload is not None and payload is parsed else None
    param = err.get("param") if isinstance(err.get("param"), str) else None
    code = err.get("code") if isinstance(err.get("code"), str) else None
    if status in RELAYED_STATUSES:
        # A rate limit or an overloaded server is not a broken upstream: the client
        # must see it as such, with the back-off the upstream asked for.
        return _verbatim(UpstreamStatusError(
            status, said, payload, param=param, code=code, headers=passed,
        ), verbatim, response)  # fmt: skip
    if 400 <= status < 500:
        # The client's request is at fault (too long, bad parameter): say so as a 4xx
        # (an empty body says nothing: the status does).
        message = message if message.strip() else said
        refusal = UpstreamRefusal(status, message, payload, param=param, code=code, headers=passed)
        return _verbatim(refusal, verbatim, response)
    # A server error: its OpenAI-shaped body and allowlisted headers go back as they
    # came, and its status when it is one a client knows how to treat (500, 502, 504:
    # SDKs retry them); any other (501, 505, a CDN's 52x) is a 502.
    return _verbatim(UpstreamStatusError(
        status if status in KEPT_5XX else 502, said, payload,
        param=param, code=code, headers=passed,
    ), verbatim, response)  # fmt: skip


def _verbatim(err: GatewayError, raw: bytes | None, response: httpx.Response) -> GatewayError:
    err.raw, err.media_type = raw, json_media_type(response.headers)
    return err


def _error_object(parsed: Any, status: int) -> tuple[dict[str, Any], str, dict[str, Any] | None]:
    """The error object, its message, and the body the client gets (None: the gateway
    writes its own) of an upstream's JSON error body, as the module's docstring says."""
    if not isinstance(parsed, dict):
        return {}, f"the upstream refused the request ({status})", None
    nested = parsed.get("error")
    if isinstance(nested, dict):
        # OpenAI's own shape goes back as it came, when the strict encoder can write it.
        message = nested.get("message")
        said = message if isinstance(message, str) else f"the upstream answered {status}"
        return nested, said, parsed if encodable(parsed) else None
    if isinstance(parsed.get("message"), str):
        # SGLang's and older vLLM's flat shape: the same fields, one level up.
        err = {k: parsed.get(k) for k in ("message", "type", "param", "code")}
        body = {"error": err}
        return err, parsed["message"], body if encodable(body) else None
    for key in ("error", "detail"):
        if isinstance(parsed.get(key), str) and encodable(parsed[key]):
            return {}, parsed[key][:MAX_SAID_CHARS], None
    return {}, f"the upstream refused the request ({status})", None


async def whole_response(
    response: httpx.Response,
    kind: str,
    passed: Mapping[str, str],
    max_body: int = MAX_BODY_BYTES,
    hide_cached: bool = False,
) -> Done:
    """A response that was not streamed: its body, kept whole for the client (with its
    cache-hit counts at zero when ``hide_cached``: ``gateway/proxy/cache_counts.py``)."""
    length = header_int(response.headers.get("content-length"))
    if length is not None and length > max_body:
        raise too_large()  # said up front: nothing needs to be read
    raw, whole = await read_capped(response, max_body)
    if not whole:
        raise too_large()
    try:
        payload = parse_json(raw)
    except ValueError as exc:
        raise UpstreamError("the upstream sent a response that is not JSON") from exc
    if isinstance(payload, dict) and payload.get("error") and "choices" not in payload:
        # An error object under a 200 (some servers and proxies do this): read as an
        # error event before the first chunk, so the client gets the upstream's object.
        raise stream_error(payload["error"], passed)
    if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
        raise UpstreamError("the upstream's response has no choices")
    choices = [c for c in payload["choices"] if isinstance(c, dict)]
    first = choices[0] if choices else {}
    counts = usage_counts(payload.get("usage"))
    hidden = hide_cache_counts(payload) if hide_cached else None
    if hidden is not None:
        # Re-encoded (the same JSON values, non-ASCII as \u escapes, NaN as it was
        # read); only a body that reports a cache hit pays this, one that reports none
        # goes out as the upstream's bytes.
        payload, raw = hidden, json.dumps(hidden, separators=(",", ":")).encode()
    return Done(
        finish_reason=str(first.get("finish_reason") or "unknown"),
        **counts,
        usage_known=payload.get("usage") is not None,
        body=payload,
        raw=raw,
        status=success_status(response.status_code),
        media_type=json_media_type(response.headers),
        headers=passed,
        cached_hidden=hide_cached,
    )


async def stream_events(
    response: httpx.Response,
    kind: str,
    added_usage: bool,
    passed: Mapping[str, str],
    max_event: int = MAX_EVENT_BYTES,
    hide_cached: bool = False,
) -> AsyncIterator[Event]:
    finish_reason: str | None = None
    usage: Any = None  # None: no chunk carried usage (a generic server, not asked)
    sent = False  # whether anything went out (a chunk, a comment): the status is fixed
    ended = False  # the upstream said [DONE]: the stream is whole
    chunked = False  # whether a chunk (not only a comment) went out
    async for item in sse_data(response, max_event):
        if isinstance(item, SseComment):
            yield KeepAlive(item.text, headers={} if sent else passed, fields=item.fields)
            sent = True  # the client's response has started: its status is 200
            continue
        data, one_line, fields = item
        if data.strip() == "[DONE]":
            ended = True
            break
        try:
            chunk = parse_json(data)
        except ValueError as exc:
            # Not quoted: a chunk may carry the answer's (or the prompt's) text.
            raise UpstreamError("the upstream sent a chunk that is not JSON") from exc
        if not isinstance(chunk, dict):
            raise UpstreamError("the upstream sent a chunk that is not an object")
        # An event of several data: lines is re-encoded: its payload as one SSE line
        # would carry a line end.
        verbatim: str | None = data if one_line else None
        if isinstance(chunk.get("usage"), dict):  # else no usage: the answer is not stored
            usage = chunk["usage"]
        hidden = hide_cache_counts(chunk) if hide_cached else None
        if hidden is not None:  # an error event too: nothing of the cache gets out
            chunk, verbatim = hidden, None
        # As OpenAI's SDK reads it: `"error": null` (or false, 0, "", {}) is no error.
        if chunk.get("error"):
            if sent:
                event = verbatim or json.dumps(chunk, separators=(",", ":"))
                raise UpstreamStreamError("the upstream failed mid-stream", event, fields)
            raise stream_error(chunk["error"], passed)
        choices = chunk.get("choices")
        if added_usage and chunk.get("usage") is not None:
            # The client did not ask for usage: what the gateway asked for goes away
            # (SGLang's `"usage": null` on every chunk it sends anyway: kept, verbatim).
            chunk.pop("usage")
            verbatim = None
            if not choices:
                continue
        text = ""
        # Read only: a field of the wrong type is absent here, and forwarded as it came
        # (the module's docstring); StreamAssembly refuses to store such an answer.
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            if choice.get("index", 0) == 0:
                text = choice_text(choice, kind)
            reason = choice.get("finish_reason")
            if reason:
                finish_reason = reason if isinstance(reason, str) else "unknown"
        yield Delta(text, raw=chunk, line=verbatim, headers={} if sent else passed, fields=fields)
        sent = chunked = True
    if finish_reason is None:
        if not ended or not chunked:
            # A stream cut short (or one with no chunk at all) is not an answer: it
            # must never be backfilled.
            raise UpstreamError("the upstream stream ended without a finish reason")
        # Whole ([DONE]) but no chunk said why it stopped: the client gets it as sent, and
        # the answer, finished for no known reason, is not stored (cacheability.py).
        finish_reason = "unknown"
    # The usage itself goes along too: taken out of the client's stream when the gateway
    # asked for it, its details (completion_tokens_details, ...) are still the answer's.
    said = {} if usage is None else {"usage": usage}
    if hide_cached and usage is not None:
        # The usage stored with the answer is the one the client may see (miss.py).
        said = hide_cache_counts(said) or said
    yield Done(
        finish_reason=finish_reason,
        **usage_counts(usage),
        usage_known=usage is not None,
        extra=said,
        cached_hidden=hide_cached,
        ended=ended,
    )


def choice_text(choice: dict[str, Any], kind: str, part: str = "delta") -> str:
    """The text of one choice (a streamed one's ``delta``, a whole answer's ``message``);
    "" where it has none a client could read."""
    if kind == "chat":
        delta = choice.get(part)
        piece = delta.get("content") if isinstance(delta, dict) else None
    else:
        piece = choice.get("text")
    return piece if isinstance(piece, str) else ""


def stream_error(err: Any, passed: Mapping[str, str]) -> GatewayError:
    """An error event before any chunk went out: its own status (its ``code`` when that
    is a 4xx number, else 502), the upstream's error object unchanged as the body.

    An ``error`` that is not an object (``"overloaded"``, ``true``) is a 502 with the
    gateway's body in the OpenAI shape: the upstream's string as its message (cut to
    200 characters, as for an error body that is not JSON) when strict JSON can write
    it, else a fixed message: nothing else the upstream sent is rendered into it."""
    if not isinstance(err, dict):
        text = err.strip()[:200] if isinstance(err, str) and encodable(err) else ""
        return UpstreamStatusError(
            502, f"the upstream failed: {text or 'it sent an error event'}", None,
            headers=dict(passed),
        )  # fmt: skip
    code = err.get("code")
    status = code if isinstance(code, int) and 400 <= code < 500 else 502
    payload = {"error": err} if encodable({"error": err}) else None
    said = err.get("message")
    message = said[:200] if isinstance(said, str) and said.strip() else "the upstream failed"
    param = err.get("param") if isinstance(err.get("param"), str) else None
    code_name = code if isinstance(code, str) else None
    if 400 <= status < 500 and status != 429:
        return UpstreamRefusal(
            status, message, payload, param=param, code=code_name, headers=dict(passed)
        )
    return UpstreamStatusError(
        status, f"the upstream failed: {message}", payload, param=param, code=code_name,
        headers=dict(passed),
    )  # fmt: skip
