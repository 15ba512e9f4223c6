"""What ``create_app()`` builds from settings in its lifespan, each part of which a test
may hand in ready-made (:class:`Components`): the engine or HTTP upstream, the semantic
cache and its embedder, the pair verifier; and the development tenant it prints."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.admin.service import TenantAdmin
from gateway.proxy.engine_pool import build_upstream
from gateway.proxy.upstream import Upstream
from gateway.settings import Settings
from gateway.tenants import TenantStore
from gateway.verification import GatewayVerifier, Verification, load_verifier
from prefix.config import EngineConfig
from semantic import EntryStore, PartitionedIndex, SemanticCache
from semantic.embedder_base import CoveringEmbedder
from semantic.embedders import build_embedder
from validators import Validator

if TYPE_CHECKING:  # torch comes in only when the engine runs in this process
    from prefix.model.loader import LoadedModel
    from prefix.serve.engine import PrefixEngine

log = logging.getLogger("cachegate.gateway")


@dataclass
class Components:
    """Ready-made parts for ``create_app``; anything left None is built from settings."""

    engine: PrefixEngine | None = None
    upstream: Upstream | None = None
    embedder: CoveringEmbedder | None = None
    semantic_cache: SemanticCache | None = None
    verifier: GatewayVerifier | None = None  # the loaded pair verifier (tests share one)
    tracer_provider: Any = None  # an opentelemetry TracerProvider; None: from settings


def engine_config(settings: Settings, salt: str, **overrides: Any) -> EngineConfig:
    """The engine configuration from settings (the gateway's and ``cachegate engine``'s)."""
    mib = 1024 * 1024
    values: dict[str, Any] = {
        "model_path": settings.model_path,
        "device": settings.device,
        "dtype": settings.dtype,
        "block_size": settings.block_size,
        "kv_cache_bytes": settings.kv_cache_mib * mib,
        "host_tier_bytes": settings.host_tier_mib * mib,
        "kv_disk_path": str(settings.kv_disk_path) if settings.kv_disk_path else None,
        "kv_disk_bytes": settings.kv_disk_mib * mib,
        "kv_redis_url": settings.kv_redis_url,
        "kv_redis_ttl_seconds": settings.kv_redis_ttl_seconds,
        "kv_tier_timeout_s": settings.kv_tier_timeout_seconds,
        "kv_tier_write_buffer_bytes": settings.kv_tier_write_buffer_mib * mib,
        "eviction_policy": settings.eviction_policy,
        "max_num_seqs": settings.max_num_seqs,
        "max_num_seqs_per_tenant": settings.max_num_seqs_per_tenant or None,
        "max_num_waiting": settings.max_num_waiting,
        "max_num_waiting_per_tenant": settings.max_num_waiting_per_tenant or None,
        "num_threads": settings.engine_threads or None,
        "pack_linears": settings.engine_pack_linears,
        "kernels": settings.engine_kernels,
        "enable_prefix_caching": settings.enable_prefix_caching,
        "server_salt": salt,
    }
    return EngineConfig(**(values | {k: v for k, v in overrides.items() if v is not None}))


def build_engine(settings: Settings, salt: str, loaded: LoadedModel | None = None) -> PrefixEngine:
    """The in-process engine from settings; ``loaded`` shares weights already in memory."""
    from prefix.serve.engine import PrefixEngine

    return PrefixEngine(engine_config(settings, salt), loaded=loaded)


def model_revisions(settings: Settings, upstream: Upstream) -> dict[str, str]:
    """Each served model's weights revision for the semantic partition: the operator's
    (``CACHEGATE_MODEL_REVISIONS``, for HTTP upstreams), and the in-process engine's own
    weights digest, which no setting can contradict."""
    revisions = dict(settings.model_revisions)
    engine = upstream.engine  # the in-process engine, None for remote ones
    if engine is not None:
        revisions[upstream.models()[0]] = engine.fingerprint.weights_digest[:16]
    return revisions


def dev_tenant(settings: Settings, tenants: TenantStore, model: str | None = None) -> None:
    if not settings.dev_tenant:
        return
    fixed = settings.dev_api_key.get_secret_value() if settings.dev_api_key else None
    # Through the admin service, the one writer of tenants and keys (audited, logged for
    # the other replicas); creating needs no semantic cache or rate limiter.
    admin = TenantAdmin(tenants, None, None)
    new_key = admin.ensure_dev_tenant(settings.dev_tenant, fixed)
    if new_key is None:
        return
    base = f"http://{settings.host}:{settings.port}/v1"
    # the real model id, so the curl works as pasted (it was "<see /v1/models>", a 404);
    # max_tokens, since without it the engine writes to the end of its window (minutes
    # on a CPU at temperature 1: a quickstart that looked hung, session 45's review)
    print(
        f"\ncachegate: development tenant {settings.dev_tenant!r}, API key (shown once):\n"
        f"  {new_key}\n\n"
        f"  curl {base}/chat/completions -H 'Authorization: Bearer {new_key}' \\\n"
        f"    -H 'Content-Type: application/json' \\\n"
        f'    -d \'{{"model": "{model or "<see /v1/models>"}", "max_tokens": 128, "messages": '
        f'[{{"role": "user", "content": "Hello"}}]}}\'\n\n'
        f"  from openai import OpenAI\n"
        f"  client = OpenAI(base_url='{base}', api_key='{new_key}')\n",
        flush=True,
    )


def build_upstream_from(settings: Settings, parts: Components, salt: str) -> Upstream:
    if settings.upstream_url:
        return build_upstream(settings, salt)  # one engine, or a ring of replicas
    from gateway.proxy.inprocess import InProcessUpstream  # torch only for a local engine

    engine = parts.engine or build_engine(settings, salt)
    return InProcessUpstream(engine)


def build_cache(settings: Settings, parts: Components, url: str) -> SemanticCache:
    path = Path(settings.embedder_path) if settings.embedder_path else None
    embedder = parts.embedder or build_embedder(
        settings.embedder,
        path,
        backend=settings.embedder_backend,
        english_only=settings.embedder_english_only,
    )
    store = EntryStore(
        url, memo_size=settings.entry_cache_size, memo_seconds=settings.entry_cache_seconds
    )
    return SemanticCache(embedder, store, PartitionedIndex(embedder.dim), validator=Validator())


def build_verification(
    settings: Settings, parts: Components, cache: SemanticCache, db: Any
) -> Verification:
    """Load the pair verifier (unless handed in) and put it on the cache's hit path."""
    verifier = parts.verifier or load_verifier(settings.verifier_threads)
    cache.verifier = verifier
    log.info("pair verifier on (CACHEGATE_VERIFIER=on)")
    return Verification.build(verifier, db, cache.embedder, settings.verifier_calibration_seconds)
