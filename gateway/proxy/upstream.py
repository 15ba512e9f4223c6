"""Where misses go: the in-process prefix engine or any OpenAI-compatible server over HTTP.

Both speak one small stream protocol: text ``Delta`` events, then one ``Done``
with the finish reason and usage (including the reused prefix tokens). The
gateway never trusts a client with the prefix namespace: it passes the
tenant's namespace itself (an argument in-process, a trusted header with the
engine key over HTTP).

Over HTTP the gateway is a faithful proxy: a streamed request is streamed
upstream and every chunk travels as ``Delta.raw`` to be forwarded as it came
(tool-call deltas, logprobs, reasoning content, the upstream's id); a request
that is not streamed is not streamed upstream either, and ``Done.body`` is the
upstream's response body, returned unchanged. What the gateway adds for itself
(``cache_salt``, a usage chunk) depends on the upstream's dialect
(``gateway/proxy/dialects.py``) and is removed again before the client sees it.

The upstream's own signals reach the client too: a 429 or 503 keeps its status,
its error body and its ``Retry-After`` (a client's back-off depends on them); an
allowlist of response headers (:func:`passed_headers`) travels with every answer;
an error event in a stream keeps the upstream's error object. Bytes the gateway
does not need to change are forwarded as bytes (``Done.raw``, ``Delta.line``), so
a body that Python's strict JSON encoder would refuse (``NaN``, a lone surrogate
escape) still reaches the client exactly as it was sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import httpx

from gateway.errors import (
    BadRequestError,
    GatewayError,
    UpstreamError,
    UpstreamTimeoutError,
)
from gateway.proxy.dialects import GENERIC, UNKNOWN, Dialect, detect, dialect, forward_body
from protocol.headers import KEY_HEADER, NAMESPACE_HEADER
from protocol.openai import ChatCompletionRequest, CompletionRequest

if TYPE_CHECKING:  # the engine (and torch) is imported only when it runs in this process
    from prefix.serve.engine import PrefixEngine

log = logging.getLogger("cachegate.gateway.upstream")
LIST_RETRY_SECONDS = 5.0  # a model list that failed is asked for again after this

# Upstream response headers the client gets: what an OpenAI client reads to pace
# itself (rate limits, back-off) or to report a problem (timing, version, the
# upstream's request id). Everything else the upstream says about itself (server,
# cookies, its addresses) stays behind the gateway.
PASSED_HEADERS = frozenset({"retry-after", "openai-processing-ms", "openai-version"})
PASSED_PREFIXES = ("x-ratelimit-",)
# The gateway's own X-Request-Id is the one the client sees; an upstream id that is
# not just ours echoed back travels under this name instead (for support tickets).
UPSTREAM_REQUEST_ID = "x-upstream-request-id"
MAX_PASSED_HEADERS = 16
MAX_PASSED_VALUE = 256
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
RELAYED_STATUSES = (429, 503)  # go back to the client as the upstream sent them


def passed_headers(response: httpx.Response, request_id: str) -> dict[str, str]:
    """The allowlisted headers of an upstream response, safe to put on the client's.

    Values must be short printable ASCII: anything else (a value that would not
    encode as Latin-1, or text long enough to be content) is dropped, not mended.
    """
    out: dict[str, str] = {}
    for raw_name, raw_value in response.headers.raw:
        name = raw_name.decode("latin-1").lower()
        if not set(name) <= _NAME_CHARS:
            continue
        if name == "x-request-id":
            name = UPSTREAM_REQUEST_ID
        elif name not in PASSED_HEADERS and not name.startswith(PASSED_PREFIXES):
            continue
        try:
            value = raw_value.decode("ascii").strip()
        except UnicodeDecodeError:
            continue
        if not value or len(value) > MAX_PASSED_VALUE or not value.isprintable():
            continue
        if name == UPSTREAM_REQUEST_ID and value == request_id:
            continue  # our own id echoed back: the client has it already
        if name not in out and len(out) < MAX_PASSED_HEADERS:
            out[name] = value
    return out


def encodable(payload: Any) -> bool:
    """Whether ``payload`` survives strict JSON (no NaN/Infinity) as UTF-8 (no lone
    surrogates): what an error body and a stored answer must be."""
    try:
        json.dumps(payload, allow_nan=False, ensure_ascii=False).encode()
    except (ValueError, UnicodeEncodeError):
        return False
    return True


class _UpstreamBody(GatewayError):
    """An error answered with the upstream's status and, when it sent one in the OpenAI
    shape, its own body (``payload``); else the gateway's body for the message."""

    def __init__(
        self, status: int, message: str, payload: dict[str, Any] | None, **kw: Any
    ) -> None:
        super().__init__(message, **kw)
        self.status = status
        self.payload = payload

    def body(self) -> dict[str, Any]:
        return self.payload if self.payload is not None else super().body()


class UpstreamRefusal(_UpstreamBody, BadRequestError):
    """A 4xx of the client's making (too long, bad parameter), with the upstream's body."""


class UpstreamStatusError(_UpstreamBody, UpstreamError):
    """An upstream failure relayed as it came: a 429 or 503 with its status, body and
    Retry-After, or a stream's error event before the first byte (502 unless its
    ``code`` is a 4xx) with the upstream's error object."""


class UpstreamStreamError(UpstreamError):
    """An error event after the client already had bytes: ``event`` is its ``data:``
    payload as the upstream wrote it, forwarded unchanged to end the stream."""

    def __init__(self, message: str, event: str) -> None:
        super().__init__(message)
        self.event = event


@dataclass(frozen=True)
class UpstreamRequest:
    kind: Literal["chat", "completion"]
    body: dict[str, Any]  # the client's body, validated; gateway-only fields removed
    namespace: str  # the tenant's prefix namespace (never from the client)
    request_id: str
    tenant_id: str | None = None
    kv_block_quota: int | None = None  # enforced by the in-process engine only
    # The body parsed once by the route; the in-process engine runs from it, HTTP
    # upstreams forward ``body``.
    parsed: ChatCompletionRequest | CompletionRequest | None = None
    # Sent upstream as they are (x-request-id, traceparent), already checked by the route.
    forward_headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Delta:
    text: str
    cached_tokens: int | None = None  # known early in-process; over HTTP only in Done
    # Over HTTP: the upstream's chunk, forwarded to the client as it came (its text may
    # be empty: a role, tool-call or logprobs delta). None in-process.
    raw: dict[str, Any] | None = None
    # The chunk's ``data:`` payload as the upstream wrote it, when the gateway did not
    # change the chunk: forwarded as is (a re-encoding could fail or alter it).
    line: str | None = None
    # The upstream's allowlisted response headers (passed_headers), on the first event.
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Done:
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # A request that was not streamed, over HTTP: the upstream's whole response body,
    # parsed (for the backfill) and as the bytes it sent (for the client).
    body: dict[str, Any] | None = None
    raw: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # as on Delta


Event = Delta | Done


class Upstream(Protocol):
    name: str

    @property
    def engine(self) -> PrefixEngine | None:
        """The engine when it runs in this process (reports, pool snapshots), else None."""
        ...

    def stream(self, req: UpstreamRequest) -> AsyncIterator[Event]:
        """Events of one request; raises a GatewayError before or during the stream."""
        ...

    async def is_ready(self) -> bool: ...

    def models(self) -> list[str]:
        """The model ids known now (no I/O)."""
        ...

    async def list_models(self) -> list[dict[str, Any]]:
        """The model cards, refreshed from the upstream when they are stale."""
        ...

    def engine_metrics(self) -> bytes:
        """The in-process engine's own /metrics series; empty for remote engines."""
        ...

    async def aclose(self) -> None: ...


def tenant_cache_salt(server_salt: str, namespace: str, client_salt: object) -> str:
    """HMAC of the tenant's namespace (and the client's salt) under the server secret."""
    message = json.dumps([namespace, client_salt if isinstance(client_salt, str) else None])
    return hmac.new(server_salt.encode(), message.encode(), hashlib.sha256).hexdigest()


class HttpUpstream:
    """An OpenAI-compatible server (our ``cachegate engine``, vLLM, SGLang, a cloud API…).

    Models come from its ``/v1/models``, cached for ``models_refresh_seconds``; the
    dialect (what it may be sent) is configured or, with ``auto``, read from the
    same listing. Connection failures are retried before the first byte only: once a
    token has been sent to the client a retry could duplicate text.
    """

    name = "http"
    engine = None

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        engine_key: str | None = None,
        connect_timeout: float = 2.0,
        read_timeout: float = 60.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
        salt: str = "",
        dialect_name: str = "auto",
        models_refresh_seconds: float = 60.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.salt = salt
        self.model = model  # used until the upstream's own list is known
        self.engine_key = engine_key
        self.retries = retries
        self.configured = dialect(dialect_name)  # None: auto
        self.detected: Dialect | None = None
        self.models_refresh_seconds = models_refresh_seconds
        self._cards: list[dict[str, Any]] = []
        self._fetched_at: float | None = None
        self._retry_at = 0.0
        self._probe: asyncio.Future[None] | None = None  # the model-list read in flight
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self.client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=self._headers,
            timeout=self._timeout,
            transport=transport,
        )

    def engine_metrics(self) -> bytes:
        return b""  # a remote engine serves its own /metrics

    @property
    def dialect(self) -> Dialect:
        return self.configured or self.detected or GENERIC

    def models(self) -> list[str]:
        ids = [str(c["id"]) for c in self._cards if isinstance(c.get("id"), str)]
        return ids or [self.model or "default"]

    async def list_models(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        fresh = (
            self._fetched_at is not None and now - self._fetched_at < self.models_refresh_seconds
        )
        if not fresh and now >= self._retry_at:
            # A failed listing is retried after a pause, not on every request.
            self._retry_at = now + min(LIST_RETRY_SECONDS, self.models_refresh_seconds)
            await self._read_models()
        return self._cards or [{"id": self.models()[0], "object": "model", "owned_by": "upstream"}]

    async def _read_models(self) -> None:
        try:
            r = await self.client.get("/v1/models", timeout=min(self._timeout.read or 5, 5))
        except httpx.HTTPError as exc:
            log.warning("could not list the upstream's models: %r", exc)
        else:
            self._learn(r.status_code, r.content)

    async def _request_dialect(self) -> Dialect | None:
        """The dialect for one request; None while ``auto`` still does not know it.

        Unknown is not generic: a cachegate engine sent the generic dialect would run
        every tenant in its shared namespace. So each request that finds the dialect
        unknown reads the model list once more itself, past the listing's retry
        pause; concurrent requests share one read in flight.
        """
        if self.configured is not None or self.detected is not None:
            return self.dialect
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._read_models())
        await asyncio.shield(self._probe)
        return self.detected

    def prime(self) -> None:
        """Read the model list once, synchronously (at startup, so the first request and
        the judge already know the models and the dialect). Failing is not fatal."""
        try:
            r = httpx.get(
                f"{self.base_url}/v1/models", headers=self._headers, timeout=self._timeout
            )
        except httpx.HTTPError as exc:
            log.warning("the upstream at %s did not list its models: %r", self.base_url, exc)
            return
        self._learn(r.status_code, r.content)

    def _learn(self, status: int, raw: bytes) -> None:
        if status != 200:
            log.warning("the upstream's /v1/models answered %s", status)
            if 400 <= status < 500 and status not in (408, 429) and self.detected is None:
                # Our engine always lists its models without auth: a server that
                # refuses the listing outright is some other (generic) server.
                self.detected = GENERIC
            return
        try:
            data = json.loads(raw).get("data")
        except (ValueError, AttributeError):
            data = None
        if not isinstance(data, list):
            log.warning("the upstream's /v1/models is not a model list")
            return
        self._cards = [c for c in data if isinstance(c, dict) and isinstance(c.get("id"), str)]
        self._fetched_at = time.monotonic()
        self.detected = detect(self._cards)

    async def is_ready(self) -> bool:
        try:
            r = await self.client.get("/v1/models", timeout=2.0)
        except httpx.HTTPError:
            return False
        self._learn(r.status_code, r.content)
        return r.status_code == 200

    async def aclose(self) -> None:
        await self.client.aclose()

    async def stream(self, req: UpstreamRequest) -> AsyncIterator[Event]:
        path = "/v1/chat/completions" if req.kind == "chat" else "/v1/completions"
        known = await self._request_dialect()
        # Still unknown: fail closed, as the dialect that isolates tenants everywhere it
        # can (dialects.UNKNOWN), never as the generic one.
        d = known or UNKNOWN
        # Every tenant's prefix reuse is narrowed by a salt only the gateway can compute,
        # so isolation holds on any upstream that honours `cache_salt` (ours, vLLM) even
        # without the engine key; a client's own salt is folded in and can only narrow.
        salt = tenant_cache_salt(self.salt, req.namespace, req.body.get("cache_salt"))
        body, added_usage = forward_body(req.body, d, salt)
        headers = {"x-request-id": req.request_id} | dict(req.forward_headers)
        # Unknown with an engine key: the namespace headers go too (a generic server
        # ignores headers it does not know; the key goes only to the URL it was
        # configured for), so a cachegate engine isolates every tenant.
        if self.engine_key and d.trusted_namespace:
            headers |= {NAMESPACE_HEADER: req.namespace, KEY_HEADER: self.engine_key}
        try:
            response = await self._open(path, body, headers)
        except UpstreamRefusal as err:
            if known is not None or not _refuses_salt(err, req.body):
                raise
            # Only a server that honours no salt refuses the field (ours and vLLM take
            # it): generic from now on, and this request is sent again without it.
            log.info("the upstream refused cache_salt: generic dialect")
            self.detected = GENERIC
            body, added_usage = forward_body(req.body, GENERIC, salt)
            response = await self._open(path, body, headers)
        passed = passed_headers(response, req.request_id)
        try:
            if body.get("stream") is True:
                async for event in self._events(response, req.kind, added_usage, passed):
                    yield event
            else:
                yield await self._whole(response, req.kind, passed)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError("the upstream stopped answering mid-stream") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError("the upstream stream broke") from exc
        finally:
            await response.aclose()

    async def _open(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        for attempt in range(self.retries + 1):
            try:
                request = self.client.build_request("POST", path, json=body, headers=headers)
                response = await self.client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if attempt == self.retries:
                    # The address and the cause go to the log and the exception chain,
                    # never into the client's error body.
                    raise UpstreamError(
                        "the upstream is unreachable", code="upstream_unreachable"
                    ) from exc
                await asyncio.sleep(0.05 * 2**attempt)
                continue
            except httpx.TimeoutException as exc:
                raise UpstreamTimeoutError("the upstream did not answer in time") from exc
            except httpx.TransportError as exc:
                # E.g. it closed the connection without a response: nothing reached the
                # client yet, so this is retried like a refused connection.
                if attempt == self.retries:
                    raise UpstreamError("the upstream failed before answering") from exc
                await asyncio.sleep(0.05 * 2**attempt)
                continue
            if response.status_code >= 400:
                raise await self._error(response, headers.get("x-request-id", ""))
            return response
        raise AssertionError("unreachable")

    @staticmethod
    async def _error(response: httpx.Response, request_id: str) -> GatewayError:
        status = response.status_code
        passed = passed_headers(response, request_id)
        try:
            raw = await response.aread()
        except httpx.HTTPError:
            raw = b""  # the status line is enough; a body that never comes is not
        finally:
            await response.aclose()
        payload: dict[str, Any] | None = None
        try:
            parsed = json.loads(raw)
            err = parsed["error"]
            message = str(err.get("message", raw[:200]))
            # The upstream's own OpenAI-shaped body goes back as it came, when the
            # strict encoder of the error response can write it.
            payload = parsed if encodable(parsed) else None
        except (ValueError, KeyError, TypeError, AttributeError):
            err, message = {}, raw[:200].decode("utf-8", "replace")
        param = err.get("param") if isinstance(err.get("param"), str) else None
        code = err.get("code") if isinstance(err.get("code"), str) else None
        if status in RELAYED_STATUSES:
            # A rate limit or an overloaded server is not a broken upstream: the client
            # must see it as such, with the back-off the upstream asked for.
            return UpstreamStatusError(
                status, f"the upstream answered {status}: {message}", payload,
                param=param, code=code, headers=passed,
            )  # fmt: skip
        if 400 <= status < 500:
            # The client's request is at fault (too long, bad parameter): say so as a 4xx.
            return UpstreamRefusal(status, message, payload, param=param, code=code, headers=passed)
        return UpstreamError(f"the upstream answered {status}: {message}")

    @staticmethod
    async def _whole(response: httpx.Response, kind: str, passed: Mapping[str, str]) -> Done:
        """A response that was not streamed: its body, kept whole for the client."""
        raw = await response.aread()
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise UpstreamError("the upstream sent a response that is not JSON") from exc
        if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
            raise UpstreamError("the upstream's response has no choices")
        choices = [c for c in payload["choices"] if isinstance(c, dict)]
        first = choices[0] if choices else {}
        return Done(
            finish_reason=str(first.get("finish_reason") or "unknown"),
            **usage_counts(payload.get("usage")),
            body=payload,
            raw=raw,
            headers=passed,
        )

    @staticmethod
    async def _events(
        response: httpx.Response, kind: str, added_usage: bool, passed: Mapping[str, str]
    ) -> AsyncIterator[Event]:
        finish_reason: str | None = None
        usage: dict[str, Any] = {}
        sent = False  # whether a chunk went out: after that, errors cannot change the status
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = json.loads(data)
            except ValueError as exc:
                # Not quoted: a chunk may carry the answer's (or the prompt's) text.
                raise UpstreamError("the upstream sent a chunk that is not JSON") from exc
            if not isinstance(chunk, dict):
                raise UpstreamError("the upstream sent a chunk that is not an object")
            if "error" in chunk:
                if sent:
                    raise UpstreamStreamError("the upstream failed mid-stream", data)
                raise _stream_error(chunk["error"], passed)
            usage = chunk.get("usage") or usage
            choices = chunk.get("choices") or []
            verbatim: str | None = data
            if added_usage and "usage" in chunk:
                # The client did not ask for usage: what the gateway asked for goes away.
                chunk.pop("usage")
                verbatim = None
                if not choices:
                    continue
            text = ""
            for choice in choices:
                if not isinstance(choice, dict):
                    continue
                if choice.get("index", 0) == 0:
                    piece = (
                        (choice.get("delta") or {}).get("content")
                        if kind == "chat"
                        else choice.get("text")
                    )
                    text = piece if isinstance(piece, str) else ""
                finish_reason = choice.get("finish_reason") or finish_reason
            yield Delta(text, raw=chunk, line=verbatim, headers={} if sent else passed)
            sent = True
        if finish_reason is None:
            # A stream cut short is not an answer: it must never be backfilled.
            raise UpstreamError("the upstream stream ended without a finish reason")
        yield Done(finish_reason=finish_reason, **usage_counts(usage))


def _refuses_salt(err: UpstreamRefusal, client_body: Mapping[str, Any]) -> bool:
    """Whether a 4xx refuses the ``cache_salt`` the gateway added (a strict server
    naming the field it does not know), not something of the client's own."""
    if err.status not in (400, 422) or "cache_salt" in json.dumps(client_body, default=str):
        # the client's own text naming the field, echoed in the error, must not turn
        # off every tenant's salt
        return False
    said = json.dumps(err.body()) if err.payload is not None else f"{err.message} {err.param}"
    return "cache_salt" in said


def _stream_error(err: Any, passed: Mapping[str, str]) -> GatewayError:
    """An error event before any chunk went out: its own status (its ``code`` when that
    is a 4xx number, else 502), the upstream's error object unchanged as the body."""
    err = err if isinstance(err, dict) else {"message": str(err)[:200]}
    code = err.get("code")
    status = code if isinstance(code, int) and 400 <= code < 500 else 502
    payload = {"error": err} if encodable({"error": err}) else None
    message = str(err.get("message") or "the upstream failed")[:200]
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


def usage_counts(usage: Any) -> dict[str, Any]:
    """Token counts for the metrics; a field the upstream left out or mangled (not an
    int, or negative: a Prometheus counter refuses to go down) counts 0."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}

    def count(value: Any) -> int:
        is_count = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return value if is_count else 0

    return {
        "prompt_tokens": count(usage.get("prompt_tokens")),
        "completion_tokens": count(usage.get("completion_tokens")),
        "cached_tokens": count(details.get("cached_tokens")),
    }
