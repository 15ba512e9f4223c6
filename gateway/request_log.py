"""The gateway's access line: one log record per ``/v1`` completion request.

Logger ``cachegate.gateway.access``, at INFO, with every value also as a structured
``extra`` field (the JSON formatter of ``gateway/logging_setup.py`` writes them as
one object): ``request_id``, ``tenant`` (the tenant's keyed digest, the same as its
``/metrics`` label, ``gateway/metrics.py`` ``tenant_label``; the id itself only with
``CACHEGATE_LOG_TENANT_IDS=true``), ``endpoint``, ``outcome`` (semantic-hit |
prefix-hit | miss | bypass | error | client_disconnected), ``semantic`` (what the
semantic layer did, with its reason), ``score``, ``prompt_tokens``, ``cached_tokens``
(prompt tokens reused from a cache), ``completion_tokens``, ``ttft_ms``,
``duration_ms``, ``status`` and ``stream``. Prompt and answer text (``prompt``,
``answer``) only with ``CACHEGATE_LOG_CONTENT=true``.

:class:`RequestObserver` is an ASGI middleware: it opens the request's
:class:`Observation` (a context variable, so the route and the streaming body that
runs after it fill in the same one), opens the request's root span when tracing is
on (``gateway/tracing.py``) and writes the line once the response has ended,
whatever ended it. The routes report what they know with :func:`note_request`
next to each ``RequestRecord`` they build and :func:`authenticated` for the tenant;
a request that never reaches that point (an error, a broken stream) logs
``outcome=error``.

A client that disconnects before its response has ended (while the route works,
``gateway/proxy/disconnect.py``, or mid-stream) logs ``outcome=client_disconnected``
and ``status=499`` (nginx's "client closed request"), whatever status was sent, and
counts in ``cachegate_client_disconnects_total`` for its tenant. The middleware sees
it as the ``http.disconnect`` that the route or Starlette's streaming response read
from ``receive()`` before the last body message went out.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.metrics import tenant_label
from gateway.reports.recorder import RequestRecord, prompt_text
from gateway.tracing import server_span, span

if TYPE_CHECKING:
    from gateway.metrics import GatewayMetrics
    from gateway.tenants import TenantContext

access_log = logging.getLogger("cachegate.gateway.access")

#: The access line's status for a client that left first (nginx's "client closed request").
CLIENT_CLOSED_REQUEST = 499

#: The request paths that get an access line (and a root span).
LOGGED_PATHS = frozenset({"/v1/chat/completions", "/v1/completions"})


@dataclass
class Observation:
    """What is known about one request so far."""

    endpoint: str
    tracer: Any = None  # an opentelemetry Tracer when tracing is on
    started: float = field(default_factory=time.perf_counter)
    status: int | None = None
    request_id: str | None = None
    tenant_id: str | None = None
    tenant_digest: str | None = None  # keyed (gateway/metrics.py): no guessable hash of an id
    method: str = "POST"
    record: RequestRecord | None = None
    body: Mapping[str, Any] | None = None  # read for its text only when content is logged
    answer: str | Mapping[str, Any] | None = None
    metrics: GatewayMetrics | None = None  # counts a disconnect for the tenant
    ended: bool = False  # the response's last body message went out
    client_left: bool = False  # http.disconnect came before that

    @property
    def outcome(self) -> str:
        if self.client_left:
            return "client_disconnected"
        if self.record is None or self.status is None or self.status >= 400:
            return "error"
        return self.record.cache

    def fields(self, *, content: bool, tenant_ids: bool) -> dict[str, Any]:
        row = self.record
        tenant = self.tenant_id if tenant_ids else self.tenant_digest
        out: dict[str, Any] = {
            "request_id": self.request_id,
            "tenant": tenant,
            "endpoint": self.endpoint,
            "outcome": self.outcome,
            "semantic": row.semantic[:200] if row else None,
            "score": None if row is None or row.score is None else round(row.score, 4),
            "prompt_tokens": row.prompt_tokens if row else None,
            "cached_tokens": row.cached_tokens if row else None,
            "completion_tokens": row.completion_tokens if row else None,
            "ttft_ms": None if row is None or row.ttft_ms is None else round(row.ttft_ms, 2),
            "duration_ms": round((time.perf_counter() - self.started) * 1000, 2),
            "status": CLIENT_CLOSED_REQUEST if self.client_left else self.status,
            "stream": row.stream if row else None,
        }
        if content:
            answer = self.answer
            out |= {
                "prompt": None if self.body is None else prompt_text(self.body),
                "answer": answer if answer is None or isinstance(answer, str) else _text(answer),
            }
        return out


_current: ContextVar[Observation | None] = ContextVar("cachegate_request", default=None)


def note_request(
    row: RequestRecord, body: Mapping[str, Any], answer: str | Mapping[str, Any]
) -> None:
    """The finished request's outcome (the row its statistics get) for the access line;
    ``answer`` is the answer's text or its OpenAI response body."""
    obs = _current.get()
    if obs is None:
        return
    obs.record, obs.body, obs.answer = row, body, answer


async def authenticated(
    auth: Awaitable[TenantContext], metrics: GatewayMetrics | None = None
) -> TenantContext:
    """``await auth`` inside the ``auth`` span; remembers the tenant (and its digest,
    keyed as ``metrics`` keys it) for the access line, and ``metrics`` to count a
    disconnect in."""
    obs = _current.get()
    with span(obs.tracer if obs else None, "auth"):
        ctx = await auth
    if obs is not None:
        digest: Callable[[str], str] = metrics.digest if metrics is not None else tenant_label
        obs.tenant_id, obs.tenant_digest = ctx.tenant_id, digest(ctx.tenant_id)
        obs.metrics = metrics
    return ctx


class RequestObserver:
    """ASGI middleware: the access line (and root span) of every logged request."""

    def __init__(
        self, app: ASGIApp, *, content: bool = False, tenant_ids: bool = False, tracer: Any = None
    ) -> None:
        self.app, self.content, self.tenant_ids, self.tracer = app, content, tenant_ids, tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in LOGGED_PATHS:
            await self.app(scope, receive, send)
            return
        obs = Observation(scope["path"], self.tracer, method=scope.get("method", "POST"))
        token = _current.set(obs)

        async def observed_receive() -> Message:
            message = await receive()
            # uvicorn also answers http.disconnect once the response has ended: not a
            # client that left, so the end is marked before the last message goes out.
            if message["type"] == "http.disconnect" and not obs.ended:
                obs.client_left = True
            return message

        async def observed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                obs.status = int(message["status"])
                for name, value in message.get("headers", []):
                    if name.lower() == b"x-request-id":
                        obs.request_id = value.decode("latin-1")
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                obs.ended = True
            await send(message)

        try:
            with server_span(self.tracer, scope) as root:
                try:
                    await self.app(scope, observed_receive, observed_send)
                except BaseException:
                    obs.status = obs.status or 500  # handled by the outermost error middleware
                    raise
                finally:
                    if root is not None:
                        _annotate(root, obs, self.tenant_ids)
        finally:
            _current.reset(token)
            self._log(obs)
            if obs.client_left and obs.metrics is not None and obs.tenant_id is not None:
                with contextlib.suppress(Exception):  # like the line: never fails a request
                    obs.metrics.client_disconnects.labels(obs.tenant_id).inc()

    def _log(self, obs: Observation) -> None:
        with contextlib.suppress(Exception):  # a log line must never fail a request
            fields = obs.fields(content=self.content, tenant_ids=self.tenant_ids)
            text = " ".join(
                f"{k}={v}" for k, v in fields.items() if v is not None and k != "endpoint"
            )
            access_log.info("%s %s %s", obs.method, obs.endpoint, text, extra=fields)


def _annotate(root: Any, obs: Observation, tenant_ids: bool) -> None:
    fields = obs.fields(content=False, tenant_ids=tenant_ids)
    for key in ("request_id", "tenant", "outcome", "semantic", "cached_tokens", "status"):
        if fields[key] is not None:
            name = "http.response.status_code" if key == "status" else f"cachegate.{key}"
            root.set_attribute(name, fields[key])
    if obs.outcome == "error" and (obs.status or 500) >= 500:
        from opentelemetry.trace import Status, StatusCode

        root.set_status(Status(StatusCode.ERROR))


def _text(body: Mapping[str, Any]) -> str | None:
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else {}
    if not isinstance(choice, dict):
        return None
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else choice.get("text")
    return text if isinstance(text, str) else None
