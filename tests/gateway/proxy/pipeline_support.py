"""What the pipeline tests (test_pipeline*.py) share: a real semantic cache over a
SQLite file, a tenant context, a chat request and answer, and the pipeline's two calls
run to completion."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateway.policy import TenantPolicy
from gateway.proxy.controls import CacheControl
from gateway.proxy.pipeline import Pipeline, SemanticDecision
from gateway.tenants import TenantContext
from migrations.runner import upgrade_database
from protocol.responses import response_body, usage
from semantic import Embedder, EntryStore, PartitionedIndex, SemanticCache
from validators import Validator

MODEL = "smollm2"
NO_CC = CacheControl()


@contextmanager
def real_cache(embedder: Embedder, db_file: Path) -> Iterator[SemanticCache]:
    """The real embedder and validators over a migrated SQLite file."""
    url = f"sqlite:///{db_file}"
    upgrade_database(url)
    store = EntryStore(url)
    try:
        yield SemanticCache(embedder, store, PartitionedIndex(embedder.dim), validator=Validator())
    finally:
        store.close()


def ctx(tenant: str = "acme", **policy: Any) -> TenantContext:
    return TenantContext(tenant, tenant, TenantPolicy(**policy), 1)


def body(question: Any, system: str = "Answer in one short sentence.", **extra: Any
         ) -> dict[str, Any]:  # fmt: skip
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    return {"model": MODEL, "messages": messages, "max_tokens": 32, "temperature": 0} | extra


def answer(text: str, finish_reason: str = "stop") -> dict[str, Any]:
    return response_body("chat", "chatcmpl-1", MODEL, text, finish_reason, usage(20, 6, 0))


def lookup(pipe: Pipeline, context: TenantContext, req: dict[str, Any], cc: CacheControl = NO_CC
           ) -> SemanticDecision:  # fmt: skip
    return asyncio.run(pipe.lookup(context, "chat", req, cc))


def backfill(
    pipe: Pipeline,
    context: TenantContext,
    decision: SemanticDecision,
    response: dict[str, Any],
    cc: CacheControl = NO_CC,
) -> str:
    return asyncio.run(pipe.backfill(context, decision, cc, response))


def questions(cache: SemanticCache) -> list[str]:
    return sorted(e.question for e in cache.entries.iter_entries())
