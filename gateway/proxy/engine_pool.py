"""Several engine replicas behind one ``Upstream``: prefix-aware routing and failover.

Why route by prefix: each engine keeps its own KV block pool, so a shared system
prompt is only reused on the replica that already computed it. Requests are
placed on a consistent-hash ring (``gateway/proxy/hash_ring.py``) by their *route key*
so that requests sharing a prefix land on the same replica, and adding or losing
a replica moves only about 1/N of the prefixes.

Route key = the tenant's prefix namespace + the model + the first
``route_prefix_chars`` characters of the prompt as the engine will see it (chat:
each message's role and text in order; completions: the prompt string, or the
first tokens of a token-id prompt). The namespace is part of it because blocks
are never shared across namespaces anyway: two tenants' identical prompts gain
nothing from landing together, so they spread. Characters approximate the first
prefix blocks without loading a tokenizer in the gateway: 256 characters are about 64
tokens, 4 blocks of 16. Requests sharing a system prompt longer than ``route_prefix_chars``
always land together; requests that diverge earlier (a short system prompt, different
questions) may land on different replicas, each then caching its own copy of the shared part.

Failover (why each rule):

* Replicas are tried in ring preference order, so a dead replica's keys land on
  the same fallback from every gateway and stay cacheable there.
* A replica that fails before the pool has yielded anything (unreachable, its
  connection cut before the request was sent, 5xx, 503 overloaded or engine dead,
  even as an SSE error chunk, or a 429) is left for the next one; all but a 429 are marked down for
  ``cooldown_seconds``. Nothing has reached the client, so trying again cannot
  duplicate text.
* Never after the first event: the client has text, and a second replica would
  write it again. The error propagates as with a single upstream.
* A 4xx other than 429 (``BadRequestError``) is the client's fault and would fail on every
  replica: it propagates at once and marks nothing down.
* A 429 is a rate limit, not a dead replica: the next one is tried but the
  limited one is not marked down (nor counted as failed), so it is asked again as
  soon as the next request prefers it.
* When every replica failed and one of them answered 429 or 503, the last such
  answer goes back as it came (status, body, ``Retry-After``): the client can
  back off as asked, which "all replicas failed" (502) would not let it do.
* A timeout before the first event marks the replica down but is not retried:
  the replica may still be computing, and a second try would double the wait.
  Likewise a replica that read the request and dropped the connection without an
  answer (``upstream_dropped``): it may have run it, and a prompt that crashes an
  engine would otherwise crash every replica in turn.
* A replica marked down is skipped while others are up; when all are down they
  are all tried in order anyway, so the pool never refuses without trying.
* With several replicas each HTTP client retries at most once (a stale
  keep-alive connection), since the next replica is the real retry; a single
  replica keeps the configured retries and behaves like ``HttpUpstream``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.errors import (
    BadRequestError,
    GatewayError,
    NotFoundError,
    UpstreamError,
    UpstreamTimeoutError,
)
from gateway.metrics import GatewayMetrics
from gateway.proxy.hash_ring import HashRing
from gateway.proxy.http_upstream import DROPPED, HttpUpstream
from gateway.proxy.upstream import RELAYED_STATUSES, Done, Event, Upstream, UpstreamRequest
from gateway.settings import Settings

CHARS_PER_TOKEN = 4  # rough, for token-id prompts: 256 characters ≈ 64 tokens


def prompt_prefix(kind: str, body: dict[str, Any], chars: int) -> str:
    """The first ``chars`` characters of the prompt, rendered close to what the
    engine's chat template sees (role, then text), without a tokenizer."""
    if kind == "chat":
        parts: list[str] = []
        size = 0
        for message in body.get("messages") or []:
            if size >= chars:
                break
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            piece = f"{'system' if role == 'developer' else role}\n{_text(message)}\n"
            parts.append(piece)
            size += len(piece)
        return "".join(parts)[:chars]
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt[:chars]
    if isinstance(prompt, list):
        return json.dumps(prompt[: max(1, chars // CHARS_PER_TOKEN)])
    return ""


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def route_key(req: UpstreamRequest, chars: int) -> bytes:
    """Namespace, model and prompt prefix, serialized unambiguously (JSON list)."""
    model = req.body.get("model")
    prefix = prompt_prefix(req.kind, req.body, chars)
    return json.dumps([req.namespace, str(model), prefix]).encode()


def forward_key(path: str, body: dict[str, Any]) -> bytes:
    """A relayed request's place on the ring: its route, model and input (cut short:
    it orders, it need not be whole)."""
    given = body.get("input")
    if isinstance(given, list):
        given = given[:8]  # a batch of thousands is ordered by its first items
    given = json.dumps(given, default=str)[:4096]
    return json.dumps([path, str(body.get("model")), given]).encode()


@dataclass
class Replica:
    """One engine server and what the pool has seen of it."""

    url: str
    upstream: Upstream
    down_until: float = 0.0
    requests: int = 0  # tries sent to it
    failures: int = 0  # tries that failed through its fault
    failovers: int = 0  # requests that moved on from it to the next replica


class EnginePool:
    """An ``Upstream`` over engine replicas: routes by prefix, fails over before the first byte."""

    name = "http"
    engine = None

    def __init__(
        self,
        replicas: Sequence[tuple[str, Upstream]],
        *,
        route_prefix_chars: int = 256,
        cooldown_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not replicas:
            raise ValueError("an engine pool needs at least one replica")
        self.replicas = [Replica(url, upstream) for url, upstream in replicas]
        self._by_url = {r.url: r for r in self.replicas}
        self._index = {r.url: i for i, r in enumerate(self.replicas)}
        self.ring = HashRing([r.url for r in self.replicas])  # rejects duplicate URLs
        self.route_prefix_chars = route_prefix_chars
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock
        self.metrics: GatewayMetrics | None = None

    @classmethod
    def from_urls(
        cls,
        urls: Sequence[str],
        *,
        route_prefix_chars: int = 256,
        cooldown_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        **http_kwargs: Any,
    ) -> EnginePool:
        """One ``HttpUpstream`` per URL, built with ``http_kwargs`` (model, salt, keys,
        timeouts); with several URLs each retries at most once (see the module doc)."""
        urls = [u.strip().rstrip("/") for u in urls if u.strip()]
        if len(urls) > 1:
            http_kwargs = http_kwargs | {"retries": min(int(http_kwargs.get("retries", 2)), 1)}
        upstreams = [(url, HttpUpstream(url, **http_kwargs)) for url in urls]
        return cls(
            upstreams,
            route_prefix_chars=route_prefix_chars,
            cooldown_seconds=cooldown_seconds,
            clock=clock,
        )

    def bind_metrics(self, metrics: GatewayMetrics) -> None:
        """Count tries and failovers per replica in the gateway's registry."""
        self.metrics = metrics

    def engine_metrics(self) -> bytes:
        return b""  # each replica serves its own /metrics

    def models(self) -> list[str]:
        """Every replica's models, the first replica's first (replicas serve one model)."""
        return list(dict.fromkeys(m for r in self.replicas for m in r.upstream.models()))

    async def list_models(self, expect: str | None = None) -> list[dict[str, Any]] | None:
        """Every replica's model cards (refreshed when stale or lacking ``expect``), one
        card per model id; None while no replica's list is known."""
        listed = await asyncio.gather(
            *(r.upstream.list_models(expect) for r in self.replicas), return_exceptions=True
        )
        if not any(isinstance(result, list) for result in listed):
            return None
        cards: dict[str, dict[str, Any]] = {}
        for result in listed:
            for card in result if isinstance(result, list) else []:
                cards.setdefault(str(card.get("id")), card)
        return list(cards.values())

    def prime(self) -> None:
        """Each replica reads its model list (and dialect) once, before serving."""
        for r in self.replicas:
            prime = getattr(r.upstream, "prime", None)
            if prime is not None:
                prime()

    async def is_ready(self) -> bool:
        """Ready when any replica is: the pool fails over to it."""
        checks = await asyncio.gather(
            *(r.upstream.is_ready() for r in self.replicas), return_exceptions=True
        )
        return any(c is True for c in checks)

    async def aclose(self) -> None:
        await asyncio.gather(*(r.upstream.aclose() for r in self.replicas))

    def replica_states(self) -> list[dict[str, Any]]:
        now = self.clock()
        return [
            {
                "url": r.url,
                "is_up": r.down_until <= now,
                "requests": r.requests,
                "failures": r.failures,
                "failovers": r.failovers,
            }
            for r in self.replicas
        ]

    def order(self, req: UpstreamRequest) -> list[Replica]:
        """Replicas to try: ring preference order, those marked down moved out; all of
        them in preference order when every one is down."""
        preferred = [self._by_url[u] for u in self.ring.preference(self.key(req))]
        now = self.clock()
        up = [r for r in preferred if r.down_until <= now]
        return up or preferred

    def key(self, req: UpstreamRequest) -> bytes:
        return route_key(req, self.route_prefix_chars)

    async def stream(self, req: UpstreamRequest) -> AsyncIterator[Event]:
        candidates = self.order(req)
        relayed: GatewayError | None = None  # the last 429/503, to send back as it came
        for i, replica in enumerate(candidates):
            self._count(replica, "requests")
            started = False
            events = replica.upstream.stream(req)
            try:
                async for event in events:
                    if isinstance(event, Done):
                        # It answered: up again, even inside a cooldown. Marked before the
                        # yield: a streamed answer's consumer closes this generator once it
                        # has the Done (gateway/proxy/miss.py), so nothing after it runs.
                        replica.down_until = 0.0
                        # the URL for logs; the ordinal for the client (no topology leak)
                        where = {"replica": replica.url, "replica_index": self._index[replica.url]}
                        event = replace(event, extra=event.extra | where)
                    started = True
                    yield event
                return
            except BadRequestError as err:
                # The client's; but a 404 (a model this one lacks: the pool lists its
                # replicas' models as one) may be the next one's, and marks none down.
                if err.status != 404 or started or i == len(candidates) - 1:
                    raise
                self._count(replica, "failovers")
            except GatewayError as err:
                if err.status != 429:
                    self._mark_down(replica)
                if started or isinstance(err, UpstreamTimeoutError) or err.code == DROPPED:
                    raise
                if err.status in RELAYED_STATUSES:
                    relayed = err
                if i == len(candidates) - 1:
                    if len(candidates) == 1 or relayed is err:
                        raise
                    if relayed is not None:
                        raise relayed from err
                    # str(err): the gateway's words; an upstream's own (which may quote
                    # the client) are only its status there, never into a trace
                    raise UpstreamError(
                        f"all {len(candidates)} engine replicas failed; last: {err}",
                        code=err.code,
                    ) from err
                self._count(replica, "failovers")
            finally:
                await _close(events)

    async def forward(
        self, path: str, body: dict[str, Any], request_id: str
    ) -> tuple[int, bytes, dict[str, str]]:
        """A relayed request (``HttpUpstream.forward``, embeddings) to the first replica
        that answers, in the ring's order for its model and input, so the load spreads
        over the replicas as completions do and one input keeps to one replica; one
        that fails is marked down and the next tried; a 4xx is the client's, not retried."""
        preferred = [self._by_url[u] for u in self.ring.preference(forward_key(path, body))]
        now = self.clock()
        candidates = [r for r in preferred if r.down_until <= now] or preferred
        relayed: GatewayError | None = None  # the last 429/503, to send back as it came
        for i, replica in enumerate(candidates):
            forward = getattr(replica.upstream, "forward", None)
            if forward is None:
                break
            self._count(replica, "requests")
            try:
                answer: tuple[int, bytes, dict[str, str]] = await forward(path, body, request_id)
            except BadRequestError:
                raise
            except GatewayError as err:
                # An answer too large is the request's, not the replica's: every replica
                # would send it. A timeout may have done the work already (as in stream).
                if err.code == "upstream_response_too_large":
                    raise
                if err.status != 429:  # a rate limit is not a dead server (as in stream)
                    self._mark_down(replica)
                if isinstance(err, UpstreamTimeoutError) or err.code == DROPPED:
                    raise
                if err.status in RELAYED_STATUSES:
                    relayed = err
                if i == len(candidates) - 1:
                    if relayed is not None and relayed is not err:
                        raise relayed from err
                    raise
                self._count(replica, "failovers")
                continue
            replica.down_until = 0.0  # it answered: up again
            return answer
        raise NotFoundError("this upstream serves no embeddings", code="unsupported_endpoint")

    def _mark_down(self, replica: Replica) -> None:
        replica.failures += 1
        replica.down_until = self.clock() + self.cooldown_seconds

    def _count(self, replica: Replica, what: str) -> None:
        setattr(replica, what, getattr(replica, what) + 1)
        if self.metrics is None:
            return
        counter = (
            self.metrics.upstream_requests
            if what == "requests"
            else self.metrics.upstream_failovers
        )
        # The replica's ordinal, never its URL: /metrics may be read by more people than
        # should learn the engines' addresses.
        counter.labels(str(self._index[replica.url])).inc()


async def _close(events: AsyncIterator[Event]) -> None:
    """Close a replica's stream (an async generator) so its HTTP response is released."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


def build_upstream(settings: Settings, salt: str) -> EnginePool:
    """The HTTP upstream from settings: an ``EnginePool`` over ``upstream_urls()``,
    each replica built from the upstream settings, its models (and, with dialect
    ``auto``, its kind) read once before the gateway serves."""
    urls = settings.upstream_urls()
    if not urls:
        raise ValueError("no upstream URL configured (CACHEGATE_UPSTREAM_URL)")
    pool = EnginePool.from_urls(
        urls,
        route_prefix_chars=settings.route_prefix_chars,
        cooldown_seconds=settings.replica_cooldown_seconds,
        model=settings.upstream_model,
        dialect_name=settings.upstream_dialect,
        models_refresh_seconds=settings.models_refresh_seconds,
        api_key=settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else None,
        engine_key=settings.engine_key.get_secret_value() if settings.engine_key else None,
        salt=salt,
        connect_timeout=settings.upstream_connect_timeout,
        read_timeout=settings.upstream_read_timeout,
        response_timeout=settings.upstream_response_timeout,
        retries=settings.upstream_retries,
        max_connections=settings.upstream_max_connections,
        keepalive_seconds=settings.upstream_keepalive_seconds,
        max_body_bytes=settings.upstream_max_body_bytes,
        max_event_bytes=settings.upstream_max_event_bytes,
        cached_tokens=settings.upstream_cached_tokens,
    )
    pool.prime()
    return pool
