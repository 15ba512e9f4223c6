"""Where misses go: the in-process prefix engine or any OpenAI-compatible server over HTTP.

Both speak one small stream protocol: text ``Delta`` events, then one ``Done``
with the finish reason and usage (including the reused prefix tokens). The
gateway never trusts a client with the prefix namespace: it passes the
tenant's namespace itself (an argument in-process, a trusted header with the
engine key over HTTP).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import httpx

from gateway.errors import (
    BadRequestError,
    GatewayError,
    UpstreamError,
    UpstreamTimeoutError,
)
from protocol.headers import KEY_HEADER, NAMESPACE_HEADER
from protocol.openai import ChatCompletionRequest, CompletionRequest

if TYPE_CHECKING:  # the engine (and torch) is imported only when it runs in this process
    from prefix.serve.engine import PrefixEngine

log = logging.getLogger("cachegate.gateway.upstream")


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


@dataclass(frozen=True)
class Delta:
    text: str
    cached_tokens: int | None = None  # known early in-process; over HTTP only in Done


@dataclass(frozen=True)
class Done:
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


Event = Delta | Done


class Upstream(Protocol):
    name: str
    # The engine when it runs in this process (reports, pool snapshots), else None.
    engine: PrefixEngine | None

    def stream(self, req: UpstreamRequest) -> AsyncIterator[Event]:
        """Events of one request; raises a GatewayError before or during the stream."""
        ...

    async def is_ready(self) -> bool: ...

    def models(self) -> list[str]: ...

    def engine_metrics(self) -> bytes:
        """The in-process engine's own /metrics series; empty for remote engines."""
        ...

    async def aclose(self) -> None: ...


def tenant_cache_salt(server_salt: str, namespace: str, client_salt: object) -> str:
    """HMAC of the tenant's namespace (and the client's salt) under the server secret."""
    message = json.dumps([namespace, client_salt if isinstance(client_salt, str) else None])
    return hmac.new(server_salt.encode(), message.encode(), hashlib.sha256).hexdigest()


class HttpUpstream:
    """An OpenAI-compatible server (our ``cachegate engine``, vLLM, SGLang, llama.cpp…).

    Always asks for a stream (with a final usage chunk), so a gateway miss can
    stream to its client and still collect the whole answer for backfill.
    Connection failures are retried before the first byte only: once a token has
    been sent to the client a retry could duplicate text.
    """

    name = "http"
    engine = None

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        engine_key: str | None = None,
        connect_timeout: float = 2.0,
        read_timeout: float = 60.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
        salt: str = "",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.salt = salt
        self.model = model
        self.engine_key = engine_key
        self.retries = retries
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            transport=transport,
        )

    def engine_metrics(self) -> bytes:
        return b""  # a remote engine serves its own /metrics

    def models(self) -> list[str]:
        return [self.model]

    async def is_ready(self) -> bool:
        try:
            r = await self.client.get("/v1/models", timeout=2.0)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    async def aclose(self) -> None:
        await self.client.aclose()

    async def stream(self, req: UpstreamRequest) -> AsyncIterator[Event]:
        path = "/v1/chat/completions" if req.kind == "chat" else "/v1/completions"
        body = dict(req.body) | {"stream": True, "stream_options": {"include_usage": True}}
        # Every tenant's prefix reuse is narrowed by a salt only the gateway can compute,
        # so isolation holds on any upstream that honours `cache_salt` (ours, vLLM) even
        # without the engine key; a client's own salt is folded in and can only narrow.
        body["cache_salt"] = tenant_cache_salt(self.salt, req.namespace, body.get("cache_salt"))
        headers = {"x-request-id": req.request_id}
        if self.engine_key:
            headers |= {NAMESPACE_HEADER: req.namespace, KEY_HEADER: self.engine_key}
        response = await self._open(path, body, headers)
        try:
            async for event in self._events(response, req.kind):
                yield event
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
                raise await self._error(response)
            return response
        raise AssertionError("unreachable")

    @staticmethod
    async def _error(response: httpx.Response) -> GatewayError:
        try:
            raw = await response.aread()
        except httpx.HTTPError:
            raw = b""  # the status line is enough; a body that never comes is not
        finally:
            await response.aclose()
        try:
            err = json.loads(raw)["error"]
            message = str(err.get("message", raw[:200]))
        except (ValueError, KeyError, TypeError, AttributeError):
            err, message = {}, raw[:200].decode("utf-8", "replace")
        if 400 <= response.status_code < 500 and response.status_code != 429:
            # The client's request is at fault (too long, bad parameter): say so as a 4xx.
            error = BadRequestError(message, param=err.get("param"), code=err.get("code"))
            error.status = response.status_code
            return error
        return UpstreamError(f"the upstream answered {response.status_code}: {message}")

    @staticmethod
    async def _events(response: httpx.Response, kind: str) -> AsyncIterator[Event]:
        finish_reason: str | None = None
        usage: dict[str, Any] = {}
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = json.loads(data)
            except ValueError as exc:
                raise UpstreamError(f"the upstream sent invalid JSON: {data[:100]!r}") from exc
            if "error" in chunk:
                raise UpstreamError(f"the upstream failed mid-stream: {chunk['error']}")
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content") if kind == "chat" else None
                text = choice.get("text") if kind != "chat" else text
                if text:
                    yield Delta(text)
                finish_reason = choice.get("finish_reason") or finish_reason
        if finish_reason is None:
            # A stream cut short is not an answer: it must never be backfilled.
            raise UpstreamError("the upstream stream ended without a finish reason")
        details = usage.get("prompt_tokens_details") or {}
        yield Done(
            finish_reason=finish_reason,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
        )
