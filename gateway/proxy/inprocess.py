"""The default upstream: our prefix engine in this process, driven through its AsyncEngine.

The tenant's prefix namespace is an argument here, so no header can forge it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import generate_latest

from gateway.errors import (
    BadRequestError,
    GatewayError,
    RateLimitError,
    ServiceUnavailableError,
    UpstreamError,
)
from gateway.proxy.upstream import Delta, Done, Event, UpstreamRequest
from prefix.errors import NoFreeBlocksError, QueueFullError, RequestError
from prefix.serve.async_engine import AsyncEngine, EngineDeadError
from prefix.serve.engine import PrefixEngine
from prefix.serve.metrics import EngineMetrics
from prefix.serve.openai_adapter import engine_error, to_engine_request
from protocol.errors import ApiError
from protocol.openai import parse_request


def _gateway_error(err: ApiError) -> GatewayError:
    error: GatewayError
    if err.status == 429:  # the engine's waiting queue is full
        error = RateLimitError(err.message, code=err.code, headers=err.headers)
    elif err.status == 503:
        error = ServiceUnavailableError(err.message, code=err.code)
    elif err.status >= 500:
        error = UpstreamError(err.message, code=err.code)
    else:
        error = BadRequestError(err.message, param=err.param, code=err.code)
        error.status = err.status
    return error


class InProcessUpstream:
    name = "in-process"

    def __init__(self, engine: PrefixEngine, served_model_name: str | None = None) -> None:
        self.engine = engine
        self.model = served_model_name or engine.loaded.model_id
        self.created = int(time.time())
        self.metrics = EngineMetrics(engine)  # the engine's prefix_* series, on /metrics
        self.async_engine = AsyncEngine(engine, on_output=self.metrics.observe)
        self.async_engine.start()

    def engine_metrics(self) -> bytes:
        return generate_latest(self.metrics.registry)

    def models(self) -> list[str]:
        return [self.model]

    async def list_models(self, expect: str | None = None) -> list[dict[str, Any]]:
        return [
            {
                "id": self.model,
                "object": "model",
                "created": self.created,
                "owned_by": "cachegate",
                "max_model_len": self.engine.max_model_len,
            }
        ]

    async def is_ready(self) -> bool:
        return self.async_engine.is_alive

    async def aclose(self) -> None:
        await asyncio.to_thread(self.async_engine.shutdown)

    async def stream(self, req: UpstreamRequest) -> AsyncIterator[Event]:
        prompt_param = "messages" if req.kind == "chat" else "prompt"
        try:
            parsed = req.parsed or parse_request(req.body, req.kind == "chat")
            engine_req = await to_engine_request(
                self.engine,
                parsed,
                req.namespace,
                # The client's X-Request-Id is for its logs, not an engine key: the
                # engine delivers output by id, so a reused id (another tenant's, or
                # one whose abort the engine has not yet handled) would get another
                # request's tokens. The client's id stays in front for correlation.
                request_id=f"{req.request_id}.{uuid.uuid4().hex}",
                kv_block_quota=req.kv_block_quota,
                quota_key=req.tenant_id,
                cache_kv=req.cache_kv,
            )
            outputs = await self.async_engine.submit(engine_req)
        except ApiError as err:
            raise _gateway_error(err) from None
        except (RequestError, QueueFullError, EngineDeadError) as exc:
            raise _gateway_error(engine_error(exc, prompt_param)) from None
        try:
            async for out in outputs:
                if out.delta:
                    yield Delta(out.delta, out.cached_tokens)
                if out.finished:
                    yield Done(
                        finish_reason=out.finish_reason or "stop",
                        prompt_tokens=out.prompt_tokens,
                        completion_tokens=out.completion_tokens,
                        cached_tokens=out.cached_tokens,
                    )
        except (RequestError, NoFreeBlocksError, EngineDeadError) as exc:
            raise _gateway_error(engine_error(exc)) from None
        finally:
            await outputs.aclose()  # aborts the engine request unless it finished
