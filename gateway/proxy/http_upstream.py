"""An OpenAI-compatible server over HTTP as the gateway's upstream.

The gateway is a faithful proxy here: a streamed request is streamed upstream and
every chunk travels as ``Delta.raw`` to be forwarded as it came (tool-call deltas,
logprobs, reasoning content, the upstream's id); a request that is not streamed is
not streamed upstream either, and ``Done.body`` is the upstream's response body,
returned unchanged (``gateway/proxy/relay.py`` reads the answers). What the gateway
adds for itself (``cache_salt``, a usage chunk) depends on the upstream's dialect
(``gateway/proxy/dialects.py``) and is removed again before the client sees it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import httpx

from gateway.errors import ServiceUnavailableError, UpstreamError, UpstreamTimeoutError
from gateway.proxy.cache_counts import hide_shared_headers
from gateway.proxy.dialects import (
    GENERIC,
    UNKNOWN,
    Dialect,
    dialect,
    forward_body,
    header_namespace,
)
from gateway.proxy.http_client import upstream_client
from gateway.proxy.media_type import json_media_type
from gateway.proxy.passed_headers import passed_headers
from gateway.proxy.relay import stream_events, upstream_error, whole_response
from gateway.proxy.request_keys import unique_suffix, upstream_request_id, with_unique_keys
from gateway.proxy.upstream import (
    Event,
    UpstreamRefusal,
    UpstreamRequest,
    tenant_cache_salt,
    tenant_digest,
)
from gateway.proxy.upstream_models import ModelListing
from gateway.proxy.upstream_read import (
    MAX_BODY_BYTES,
    MAX_EVENT_BYTES,
    read_capped,
    too_large,
)
from gateway.proxy.whole_stream import asks_for_usage, is_whole_json, whole_as_stream
from protocol.headers import (
    KEY_HEADER,
    KV_REUSE_HEADER,
    NAMESPACE_HEADER,
    QUOTA_HEADER,
    TENANT_HEADER,
)

log = logging.getLogger("cachegate.gateway.upstream")
MAX_CONNECTIONS = 1000  # concurrent upstream requests; httpx's own default is 100
PROBE_CONNECTIONS = 4  # model lists and readiness checks, on a pool of their own
# The code of an error whose request the upstream may have run (it read the request,
# then dropped the connection): sent again neither here nor by a pool of replicas.
DROPPED = "upstream_dropped"


class HttpUpstream(ModelListing):
    """An OpenAI-compatible server (our ``cachegate engine``, vLLM, SGLang, a cloud API…).

    Models come from its ``/v1/models``, cached for ``models_refresh_seconds``; the
    dialect (what it may be sent) is configured or, with ``auto``, read from the
    same listing. Only a request that cannot have reached the upstream is sent again
    (the connection was refused or timed out, or the request could not be written): one
    the upstream may have read and then dropped is not, since it may have run (a paid
    API bills it, a prompt that crashes the server would crash it again).

    Requests share a pool of ``max_connections`` (httpx's default of 100 turned the
    101st concurrent stream into a 504 that never reached the upstream); model lists
    and readiness checks have a small pool of their own, so a busy gateway stays
    ready. Neither keeps cookies.
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
        response_timeout: float | None = None,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
        salt: str = "",
        dialect_name: str = "auto",
        models_refresh_seconds: float = 60.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_event_bytes: int = MAX_EVENT_BYTES,
        cached_tokens: str = "auto",
        max_connections: int = MAX_CONNECTIONS,
        keepalive_seconds: float = 2.0,
    ) -> None:
        if cached_tokens not in ("auto", "pass", "hide"):
            raise ValueError(f"cached_tokens must be auto, pass or hide, not {cached_tokens!r}")
        self.cached_tokens = cached_tokens  # what clients are told of (cache_counts.py)
        self.base_url = base_url.rstrip("/")
        self.salt = salt
        self.model = model  # used until the upstream's own list is known
        self.engine_key = engine_key
        self.retries = retries
        # What one answer may hold in memory: a whole body, one SSE event (relay.py).
        self.max_body_bytes = max_body_bytes
        self.max_event_bytes = max_event_bytes
        self.configured = dialect(dialect_name)  # None: auto
        ModelListing.__init__(self, models_refresh_seconds)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        # A request that is not streamed gets no byte until its whole answer is ready:
        # it waits up to response_timeout (None: read_timeout) for it.
        self._whole_timeout = httpx.Timeout(
            response_timeout if response_timeout is not None else read_timeout,
            connect=connect_timeout,
        )
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        made = partial(upstream_client, self.base_url, self._headers, self._timeout, transport)
        self.client = made(max_connections, keepalive_seconds)
        self._probe_client = made(PROBE_CONNECTIONS, keepalive_seconds)

    def engine_metrics(self) -> bytes:
        return b""  # a remote engine serves its own /metrics

    async def aclose(self) -> None:
        await self.client.aclose()
        await self._probe_client.aclose()

    async def stream(self, req: UpstreamRequest) -> AsyncIterator[Event]:
        path = "/v1/chat/completions" if req.kind == "chat" else "/v1/completions"
        known = await self._request_dialect()
        # Still unknown: fail closed, as the dialect that isolates tenants everywhere it
        # can (dialects.UNKNOWN), never as the generic one.
        d = known or UNKNOWN
        # Every tenant's prefix reuse is narrowed by a salt only the gateway can compute,
        # so isolation holds on any upstream that honours `cache_salt` (ours, vLLM, SGLang) even
        # without the engine key; a client's own salt is folded in and can only narrow.
        salt = tenant_cache_salt(self.salt, req.namespace, req.body.get("cache_salt"))
        suffix = unique_suffix()  # the client's id is not an engine key (request_keys.py)
        client_body = with_unique_keys(req.body, suffix)
        body, added_usage = forward_body(client_body, d, salt)
        upstream_id = upstream_request_id(req.request_id, suffix)
        # (the client's trace headers hold its own id: the unique one replaces it)
        headers = dict(req.forward_headers) | {"x-request-id": upstream_id}
        # Unknown with an engine key: the namespace headers go too (a generic server
        # ignores headers it does not know; the key goes only to the URL it was
        # configured for), so a cachegate engine isolates every tenant.
        if self.engine_key and d.trusted_namespace:
            headers |= {
                NAMESPACE_HEADER: header_namespace(req.namespace),
                KEY_HEADER: self.engine_key,
            }
            # whose request (its running slots and queue share) and its KV block quota
            if req.tenant_id is not None:
                headers[TENANT_HEADER] = tenant_digest(self.salt, req.tenant_id)
            if req.kv_block_quota is not None:
                headers[QUOTA_HEADER] = str(req.kv_block_quota)
            if not req.cache_kv:  # KV no later request can reuse: not kept there
                headers[KV_REUSE_HEADER] = "off"
        timeout = self._timeout if body.get("stream") is True else self._whole_timeout
        # its cached counts and prompt time (a cache timer); its account's limits are
        # hidden whatever its cache (cache_counts.py)
        hide = self._hides_cached(d)
        try:
            response = await self._open(path, body, headers, timeout, hide)
        except UpstreamRefusal as err:
            if known is not None or not err.refuses_salt(req.body):
                raise
            # Only a server that honours no salt refuses the field (ours, vLLM and SGLang
            # take it): generic from now on, and this request is sent again without it.
            log.info("the upstream refused cache_salt: generic dialect")
            self.detected = d = GENERIC
            body, added_usage = forward_body(client_body, GENERIC, salt)
            hide = self._hides_cached(d)  # as the request went out (generic once refused)
            response = await self._open(path, body, headers, timeout, hide)
        passed = passed_headers(response, upstream_id)  # the id sent, echoed: not passed
        hide_shared_headers(passed, limits=self.hides_limits, timer=hide)
        asked = asks_for_usage(body, added_usage)  # a usage chunk, of the client's own
        try:
            if body.get("stream") is True:
                events = (
                    whole_as_stream(response, req.kind, passed, self.max_body_bytes, hide, asked)
                    if is_whole_json(response)
                    else stream_events(
                        response, req.kind, added_usage, passed, self.max_event_bytes, hide
                    )
                )
                async for event in events:
                    yield event
            else:
                yield await whole_response(response, req.kind, passed, self.max_body_bytes, hide)
        except httpx.TimeoutException as exc:
            where = "mid-stream" if body.get("stream") is True else "mid-answer"
            raise UpstreamTimeoutError(f"the upstream stopped answering {where}") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError("the upstream stream broke") from exc
        finally:
            await response.aclose()

    @property
    def hides_limits(self) -> bool:
        """Whether the upstream's ``x-ratelimit-*`` are kept from clients: they count the
        gateway's one account, every tenant's traffic, whatever its cache; ``pass`` alone
        passes them (cache_counts.py)."""
        return self.cached_tokens != "pass"

    def _hides_cached(self, d: Dialect) -> bool:
        """Whether clients are kept from what tells of other tenants' prompts (cached
        tokens, the prompt time: ``gateway/proxy/cache_counts.py``): ``auto``, where
        isolation is not known to hold (the account's limits: :attr:`hides_limits`)."""
        return not d.isolated if self.cached_tokens == "auto" else self.cached_tokens == "hide"

    async def forward(
        self, path: str, body: dict[str, Any], request_id: str
    ) -> tuple[int, bytes, dict[str, str]]:
        """A request the gateway only relays (``/v1/embeddings``): the client's body as
        it came, nothing added (no salt: no KV is reused; its request keys made unique,
        ``request_keys.py``), and the answer's status,
        bytes and allowlisted headers (and its JSON ``content-type``: media_type.py); an
        error status as for completions."""
        suffix = unique_suffix()  # the client's id is not an engine key (request_keys.py)
        body = with_unique_keys(body, suffix)
        upstream_id = upstream_request_id(request_id, suffix)
        headers = {"x-request-id": upstream_id}
        # the prompt time, where isolation is not known to hold (cache_counts.py)
        hide = self._hides_cached(await self._request_dialect() or UNKNOWN)
        response = await self._open(path, body, headers, self._whole_timeout, hide)
        try:
            passed = passed_headers(response, upstream_id)
            hide_shared_headers(passed, limits=self.hides_limits, timer=hide)
            raw, whole = await read_capped(response, self.max_body_bytes)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError("the upstream stopped answering") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError("the upstream's answer broke off") from exc
        finally:
            await response.aclose()
        if not whole:
            raise too_large()
        passed["content-type"] = json_media_type(response.headers)
        return response.status_code, raw, passed

    async def _open(
        self,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str],
        timeout: httpx.Timeout,
        hide_timer: bool,
    ) -> httpx.Response:
        for attempt in range(self.retries + 1):
            try:
                request = self.client.build_request(
                    "POST", path, json=body, headers=headers, timeout=timeout
                )
                response = await self.client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.WriteError) as exc:
                # Not delivered: refused, not connected in time, or the request could
                # not be written whole (a stale keep-alive connection), so nothing can
                # have run upstream and sending it again is safe.
                if attempt == self.retries:
                    # The address and the cause go to the log and the exception chain,
                    # never into the client's error body.
                    raise UpstreamError(
                        "the upstream is unreachable", code="upstream_unreachable"
                    ) from exc
                await asyncio.sleep(0.05 * 2**attempt)
                continue
            except httpx.PoolTimeout as exc:
                raise ServiceUnavailableError(
                    "the gateway's connections to the upstream are all in use",
                    code="upstream_connections_busy",
                ) from exc
            except httpx.TimeoutException as exc:
                raise UpstreamTimeoutError("the upstream did not answer in time") from exc
            except httpx.TransportError as exc:
                # E.g. it read the request and closed the connection without a response:
                # it may have run the request, so it is not sent again.
                raise UpstreamError("the upstream failed before answering", code=DROPPED) from exc
            if response.status_code >= 400:
                request_id = headers.get("x-request-id", "")
                raise await upstream_error(response, request_id, self.hides_limits, hide_timer)
            return response
        raise AssertionError("unreachable")
