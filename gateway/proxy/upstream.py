"""Where misses go: the in-process prefix engine or any OpenAI-compatible server over HTTP.

Both speak one small stream protocol: text ``Delta`` events, then one ``Done``
with the finish reason and usage (including the reused prefix tokens). The
gateway never trusts a client with the prefix namespace: it passes the
tenant's namespace itself (an argument in-process, a trusted header with the
engine key over HTTP).

The two implementations: ``gateway/proxy/inprocess.py`` (the engine in this
process) and ``gateway/proxy/http_upstream.py`` (any server over HTTP, whose
answers ``gateway/proxy/relay.py`` reads). This module holds what both share and
what the routes see: the request, the events, the errors an upstream raises.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from gateway.errors import BadRequestError, GatewayError, UpstreamError
from protocol.openai import ChatCompletionRequest, CompletionRequest

if TYPE_CHECKING:  # the engine (and torch) is imported only when it runs in this process
    from prefix.serve.engine import PrefixEngine

RELAYED_STATUSES = (429, 503)  # go back to the client as the upstream sent them


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
        # The message carries the upstream's words, which may quote the client's input:
        # they go back to that client in the body, never into a log line or a trace (an
        # exception recorded on a span is its str(), a logged one its repr()).
        self.args = (f"the upstream answered {status}",)

    def body(self) -> dict[str, Any]:
        return self.payload if self.payload is not None else super().body()


class UpstreamRefusal(_UpstreamBody, BadRequestError):
    """A 4xx of the client's making (too long, bad parameter), with the upstream's body."""

    def refuses_salt(self, client_body: Mapping[str, Any]) -> bool:
        """Whether it refuses the ``cache_salt`` the gateway added (a strict server
        naming the field it does not know), not something of the client's own."""
        if self.status not in (400, 422) or "cache_salt" in json.dumps(client_body, default=str):
            # the client's own text naming the field, echoed in the error, must not turn
            # off every tenant's salt
            return False
        said = (
            json.dumps(self.body()) if self.payload is not None else f"{self.message} {self.param}"
        )
        return "cache_salt" in said


class UpstreamStatusError(_UpstreamBody, UpstreamError):
    """An upstream failure relayed as it came: a 429 or 503 with its status, body and
    Retry-After, another 5xx with its body and headers (``relay.upstream_error``), or a
    stream's error event before the first byte (502 unless its ``code`` is a 4xx) with
    the upstream's error object."""


class UpstreamStreamError(UpstreamError):
    """An error event after the client already had bytes: ``event`` is its ``data:``
    payload as the upstream wrote it, forwarded unchanged to end the stream, after its
    SSE ``event:`` / ``id:`` lines (``fields``, as on :class:`Delta`)."""

    def __init__(self, message: str, event: str, fields: str = "") -> None:
        super().__init__(message)
        self.event, self.fields = event, fields


@dataclass(frozen=True)
class UpstreamRequest:
    kind: Literal["chat", "completion"]
    body: dict[str, Any]  # the client's body, validated; gateway-only fields removed
    namespace: str  # the tenant's prefix namespace (never from the client)
    request_id: str
    tenant_id: str | None = None
    kv_block_quota: int | None = None  # by our engine (in process, or sent it with the key)
    # The body parsed once by the route; the in-process engine runs from it, HTTP
    # upstreams forward ``body``.
    parsed: ChatCompletionRequest | CompletionRequest | None = None
    # Sent upstream as they are (x-request-id, traceparent), already checked by the route.
    forward_headers: Mapping[str, str] = field(default_factory=dict)
    # False: the namespace is this request's alone (an anonymous end user of a tenant
    # whose prefix_scope is "user"): engines that can be told keep none of its KV.
    cache_kv: bool = True


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
    # The chunk's SSE ``event:`` / ``id:`` / ``retry:`` lines as the upstream sent them
    # ("id: 7\n"), written before its data line (upstream_read.sse_data).
    fields: str = ""


@dataclass(frozen=True)
class Done:
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # Whether the upstream said what the answer cost: False when it sent no usage (a
    # generic server streaming to a client that did not ask for include_usage). Such an
    # answer is not stored, since its hits would report (and count as saved) 0 tokens.
    usage_known: bool = True
    # A request that was not streamed, over HTTP: the upstream's whole response body,
    # parsed (for the backfill) and as the bytes it sent (for the client).
    body: dict[str, Any] | None = None
    raw: bytes | None = None
    # With ``raw``: the upstream's 2xx status and JSON Content-Type (charset kept),
    # which the client gets as they came (``gateway/proxy/media_type.py``).
    status: int = 200
    media_type: str = "application/json"
    # A stream: whether the upstream ended it with ``data: [DONE]``. One that stopped
    # after its finish reason but before [DONE] (its usage chunk, another choice may be
    # missing) ends the same way for the client, without a [DONE], and is not stored.
    ended: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)  # as on Delta
    # The client is not told ``cached_tokens``: the upstream's prefix cache is not known
    # to be narrowed per tenant (``dialects.py``), so the count would tell a tenant what
    # another one sent. ``cached_tokens`` stays the upstream's, for the operator's metrics.
    cached_hidden: bool = False

    @property
    def shown_cached_tokens(self) -> int:
        """The prefix-cached prompt tokens the client may be told of."""
        return 0 if self.cached_hidden else self.cached_tokens


@dataclass(frozen=True)
class KeepAlive:
    """An SSE comment from an HTTP upstream (``: ping``), forwarded to a streaming
    client: upstreams send them so that a client's or a balancer's idle timeout does
    not fire while a request queues or prefills. Before the first chunk it also starts
    the client's response (status 200, the upstream's headers), as the upstream had."""

    comment: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)  # as on Delta
    # An SSE event of ``event:`` / ``id:`` / ``retry:`` lines and no data, passed on as it
    # came (a ``retry:`` sets the client's reconnection delay); then ``comment`` is "".
    fields: str = ""

    def sse(self) -> str:
        """The event as the client's stream carries it."""
        if self.fields:
            return self.fields + "\n"
        return f": {self.comment}\n\n" if self.comment else ":\n\n"


Event = Delta | Done | KeepAlive


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

    async def list_models(self, expect: str | None = None) -> list[dict[str, Any]] | None:
        """The model cards, refreshed from the upstream when they are stale or lack the
        model ``expect`` (a request's); None while they are not known (an HTTP upstream
        whose listing never answered)."""
        ...

    def engine_metrics(self) -> bytes:
        """The in-process engine's own /metrics series; empty for remote engines."""
        ...

    async def aclose(self) -> None: ...


def tenant_cache_salt(server_salt: str, namespace: str, client_salt: object) -> str:
    """HMAC of the tenant's namespace (and the client's salt) under the server secret."""
    message = json.dumps([namespace, client_salt if isinstance(client_salt, str) else None])
    return hmac.new(server_salt.encode(), message.encode(), hashlib.sha256).hexdigest()


def tenant_digest(server_salt: str, tenant_id: str) -> str:
    """Who a request to a cachegate engine is, opaque (HMAC under the server secret):
    the engine shares its slots and queue per tenant and never needs the id itself."""
    message = json.dumps(["tenant", tenant_id])
    return hmac.new(server_salt.encode(), message.encode(), hashlib.sha256).hexdigest()[:32]


#: The largest token count believed: no server sends more, and the statistics table's
#: INTEGER columns hold no more (PostgreSQL's are 32-bit).
MAX_TOKEN_COUNT = 2**31 - 1


def usage_counts(usage: Any) -> dict[str, Any]:
    """Token counts for the metrics; a field the upstream left out or mangled (not an
    int, negative: a Prometheus counter refuses to go down, or above
    :data:`MAX_TOKEN_COUNT`) counts 0. Above it, a count broke what read it: a float
    conversion (``10**400``) failed the miss after its answer was stored and then
    every hit on that answer, and one past 64 bits lost the statistics batch it was in."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}

    def count(value: Any) -> int:
        is_count = isinstance(value, int) and not isinstance(value, bool)
        return value if is_count and 0 <= value <= MAX_TOKEN_COUNT else 0

    return {
        "prompt_tokens": count(usage.get("prompt_tokens")),
        "completion_tokens": count(usage.get("completion_tokens")),
        "cached_tokens": count(details.get("cached_tokens")),
    }
