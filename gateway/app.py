"""``create_app()``: the gateway as an ASGI app. Heavy objects (model, embedder,
indexes, DB, HTTP client) are built in the lifespan, never at import, and each
can be handed in ready-made (tests swap them)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from sqlalchemy import create_engine

from gateway.admin.routes import router as admin_router
from gateway.app_parts import (
    Components,
    build_cache,
    build_engine,
    build_upstream_from,
    build_verification,
    dev_tenant,
    engine_config,
    model_revisions,
)
from gateway.db_rest import Probe
from gateway.error_handlers import install_error_handlers
from gateway.index_snapshots import SnapshotWriter, schema_tag, start_index
from gateway.metrics import GatewayMetrics
from gateway.metrics_auth import require_metrics_token
from gateway.ops import start_operations
from gateway.proxy.concurrency import ReleaseSlots, TenantConcurrency
from gateway.proxy.concurrency_stores import build_slot_store
from gateway.proxy.engine_pool import EnginePool
from gateway.proxy.judge import UpstreamJudge
from gateway.proxy.openapi_docs import document_openai_routes
from gateway.proxy.pipeline import Pipeline
from gateway.proxy.ratelimit import RateLimiter
from gateway.proxy.ratelimit_shared import build_bucket_store
from gateway.proxy.routes import router
from gateway.proxy.token_limit import TokenCharger
from gateway.proxy.upstream import Upstream
from gateway.readiness import db_ok_within, readiness
from gateway.recovery import RecoveryWatch, Waiter
from gateway.reports.api import model_shape, report_router
from gateway.request_log import RequestObserver
from gateway.review.api import review_router
from gateway.saved_metrics import SavedCounter
from gateway.settings import Settings, get_settings
from gateway.state import GatewayState
from gateway.sync.feed import ChangeFeed
from gateway.tenants import TenantStore, enforce_foreign_keys
from gateway.tracing import gateway_tracer, instrument
from gateway.trailing_slash import StripTrailingSlash
from gateway.verification import warm_chinese
from migrations.runner import upgrade_database
from semantic import EntryStore
from semantic.store_db import postgres_connect_args
from semantic.store_rows import StoreRows

if TYPE_CHECKING:  # torch comes in only when the engine runs in this process
    pass

#: What a browser's script may read of an answer (CORS): ids, the cache's verdict, the
#: limits and when to retry.
CORS_EXPOSED = [
    "x-request-id",
    "x-cachegate-cache",
    "x-cachegate-semantic",
    "x-cachegate-backfill",
    "x-cachegate-similarity",
    "x-cachegate-cached-tokens",
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "retry-after",
    "etag",
]

log = logging.getLogger("cachegate.gateway")

#: Re-exported: tests and the engine command build these from ``gateway.app``.
__all__ = ["CORS_EXPOSED", "Components", "build_engine", "create_app", "engine_config"]


def create_app(settings: Settings | None = None, components: Components | None = None) -> FastAPI:
    settings = settings or get_settings()
    parts = components or Components()
    tracer = gateway_tracer(settings.otlp_endpoint, parts.tracer_provider)  # None: no tracing
    db_probe = Probe()  # /ready's pings and the recovery watch's: one out at a time

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = settings.resolved_database_url()
        if url.startswith("sqlite:///"):
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(upgrade_database, url)
        # A PostgreSQL host that drops packets would hold each read for the OS's TCP
        # timeout (minutes) on a worker thread, and a table lock held elsewhere (another
        # replica's migration) every authentication: the store's connect timeout, TCP
        # keepalives and lock_timeout (semantic/store_db.py). No engine-wide
        # statement_timeout (reports aggregate through it); authentication sets its own.
        postgres = url.startswith("postgresql")
        db = create_engine(
            url,
            pool_pre_ping=True,
            connect_args=postgres_connect_args(url, connect_timeout=5) if postgres else {},
            hide_parameters=True,  # bound values (prompts, answers) never in an error's text
        )
        enforce_foreign_keys(db)  # SQLite: the tenant tables' ON DELETE CASCADE
        tenants = TenantStore(db)
        salt = (
            settings.server_salt.get_secret_value()
            if settings.server_salt
            else await asyncio.to_thread(tenants.server_secret, "prefix_salt")
        )
        upstream: Upstream
        if parts.upstream is not None:
            upstream = parts.upstream
        else:
            upstream = await asyncio.to_thread(build_upstream_from, settings, parts, salt)
        # the in-process engine's model id goes in the printed snippets (an HTTP
        # upstream's would cost a request here: its snippet says where to read it)
        model = upstream.models()[0] if upstream.engine is not None else None
        await asyncio.to_thread(dev_tenant, settings, tenants, model)
        # Replica sync (gateway/sync/feed.py): marked before the rebuild, so nothing another
        # replica commits meanwhile is missed; started once the index is built.
        feed = ChangeFeed(url, poll_seconds=settings.sync_poll_seconds)
        cache = parts.semantic_cache
        snapshots: SnapshotWriter | None = None
        if cache is None and settings.semantic_enabled:
            cache = await asyncio.to_thread(build_cache, settings, parts, url)
            feed.cache = cache
            # Snapshot replayed forward, or marked and rebuilt (gateway/index_snapshots.py).
            schema = await asyncio.to_thread(schema_tag)
            how = await asyncio.to_thread(
                start_index, cache, feed, settings.index_snapshot_dir, schema
            )
            log.info("semantic index: %s", how)
            if settings.index_snapshot_dir is not None:
                snapshots = SnapshotWriter(
                    cache,
                    feed,
                    settings.index_snapshot_dir,
                    schema,
                    settings.index_snapshot_seconds,
                )
                snapshots.start()
        else:
            await asyncio.to_thread(feed.mark)
        feed.cache = cache
        # The layer off here, the rows shared: admin invalidations and tenant deletes
        # still fence and delete them (semantic/store_rows.py).
        rows = None if cache is not None else StoreRows(EntryStore(url, memo_size=0))
        app.state.semantic_rows = rows
        # Only the named tenants' keys (all of them after a rebuild: none named), so the
        # other keys keep working from memory if the database goes away meanwhile.
        feed.on_tenant_change(lambda changed: tenants.auth_cache.invalidate(changed))
        app.state.sync = feed
        verification = None
        warming: threading.Thread | None = None
        app.state.warming = None
        if cache is not None and settings.verifier == "on":
            verification = await asyncio.to_thread(build_verification, settings, parts, cache, db)
            # Off the request path: the first Chinese lookup need not wait for its model.
            warming = warm_chinese(verification.verifier, cache.embedder)
            app.state.warming = warming  # /ready waits for it
            calibrator = verification.calibrator
            # A tenant deleted (or its policy changed) on any replica: its cut is recomputed
            # (every cut after a rebuild, when the feed names no tenant).
            feed.on_tenant_change(lambda changed: calibrator.invalidate(*changed))
        # Tenant labels are keyed by a secret every replica shares: stable on dashboards,
        # not a hash anyone can compute from a guessed tenant id.
        label_key = await asyncio.to_thread(tenants.server_secret, "metrics_label")
        metrics = GatewayMetrics(settings.metrics_tenant_labels, label_key)
        if isinstance(upstream, EnginePool):
            upstream.bind_metrics(metrics)
        app.state.gateway = GatewayState(
            tenants=tenants,
            pipeline=Pipeline(
                cache,
                metrics,
                UpstreamJudge(upstream, upstream.models()[0]),
                verification,
                lookup_threads=settings.lookup_threads,
                inline=settings.lookup_inline,
                model_revisions=model_revisions(settings, upstream),
                minted_id=tenants.namespace_id,
            ),
            upstream=upstream,
            metrics=metrics,
            max_body_bytes=settings.body_limit(),
            body_timeout=settings.request_body_timeout,
            charge_tokens=TokenCharger(app.state.rate_limiter),
            forward_unlisted_models=settings.upstream_unlisted_models == "forward",
        )
        # Entries an earlier embedder wrote move over as their partitions are asked for.
        await asyncio.to_thread(app.state.gateway.pipeline.start_migrations)
        app.state.gateway.saved = SavedCounter(
            metrics,
            settings.price_per_million_prompt_tokens,
            settings.price_per_million_completion_tokens,
            model_shape(app.state.gateway),  # None behind an HTTP upstream: cost only
        )
        metrics.watch_feed(feed)  # cachegate_replica_sync_lag_seconds
        app.state.rate_limiter.bind_metrics(metrics.registry)  # cachegate_ratelimit_store_*
        app.state.concurrency.bind_metrics(metrics.registry)  # cachegate_concurrency_store_*
        if verification is not None:  # cachegate_verifier_calibration_database_away
            metrics.watch_calibrator(verification.calibrator)
        if tracer is not None:
            instrument(app.state.gateway, tracer)  # spans around each step (gateway/tracing.py)
        app.state.db = db
        ops = start_operations(settings, app.state.gateway, db)  # stats, snapshots, sampling
        # A tenant deleted on any replica: its recent prompts (anti-pattern report) go.
        prompts = ops.stats.prompts
        feed.on_tenant_change(partial(prompts.forget_deleted, namespace_id=tenants.namespace_id))
        # ... and its metric series (a tenant re-created under its id starts from zero).
        feed.on_tenant_change(partial(metrics.forget_deleted, namespace_id=tenants.namespace_id))
        # ... and a changed policy's target reaches the misfire-rate alert's series.
        feed.on_tenant_change(partial(metrics.follow_targets, target_of=tenants.target_of))
        # Started once every callback is in: a tenant deleted meanwhile reaches them all
        # (it replays from the mark above, so nothing committed since is missed).
        feed.start()
        # After a hang, the rests end once the database answers, not when they run out.
        waiters: list[Waiter] = [(lambda: not tenants.rest.is_ok, tenants.rest.succeeded)]
        if verification is not None:
            calibration = verification.calibrator
            waiters.append((calibration.waits_for_database, calibration.retry_now))
        recovery = RecoveryWatch(
            waiters,
            partial(db_ok_within, db_probe, db),
            lambda: app.state.gateway.pipeline.store_ok,
            app.state.gateway.pipeline.check_store,
        )
        recovery.start()
        app.state.recovery = recovery
        try:
            yield
        finally:
            await recovery.aclose()
            if warming is not None:  # native code must not run on as the process exits
                await asyncio.to_thread(warming.join, 60)
            await asyncio.to_thread(feed.stop)
            if snapshots is not None:
                await asyncio.to_thread(snapshots.stop)
            await ops.aclose()
            await asyncio.to_thread(app.state.gateway.pipeline.close)
            await upstream.aclose()
            await asyncio.to_thread(app.state.concurrency.close)  # queued lease releases
            if cache is not None:
                await asyncio.to_thread(cache.close)  # the last batched hit counts first
                cache.entries.close()
            if rows is not None:
                rows.close()
            db.dispose()

    app = FastAPI(title="cachegate", version="0.1.0", lifespan=lifespan)
    app.include_router(router)
    app.include_router(admin_router)
    document_openai_routes(app)  # the /v1 request bodies in /openapi.json
    app.include_router(review_router())  # /admin/review (gateway/review/api.py)
    app.include_router(report_router())  # /admin/reports (gateway/reports/api.py)
    app.state.settings = settings
    app.state.admin_token = settings.admin_token  # None: the admin routes answer 403
    app.state.admin_max_body_bytes = settings.admin_max_body_bytes  # admin/body_check.py
    app.state.body_timeout = settings.request_body_timeout  # and their deadline
    # Shared by the replicas through Redis or PostgreSQL (gateway/proxy/ratelimit_shared.py).
    app.state.rate_limiter = RateLimiter(store=build_bucket_store(settings))
    # policy max_concurrent_requests, shared by the replicas (gateway/proxy/concurrency.py)
    app.state.concurrency = TenantConcurrency(build_slot_store(settings))
    install_error_handlers(app)
    # Gives back the slot a request took, whatever ended it (gateway/proxy/concurrency.py).
    app.add_middleware(ReleaseSlots)
    # One access line (and root span) per /v1 completion request (gateway/request_log.py).
    app.add_middleware(
        RequestObserver,
        content=settings.log_content,
        tenant_ids=settings.log_tenant_ids,
        tracer=tracer,
    )
    # A /v1 path is routed, logged and traced without its trailing slash.
    app.add_middleware(StripTrailingSlash)
    if settings.cors_origin_list():  # outermost: a preflight is answered before the rest
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list(),
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["*"],
            expose_headers=CORS_EXPOSED,
            max_age=600,
        )

    @app.get("/health")
    async def health() -> Response:
        return JSONResponse({"status": "ok"})

    # /ready: upstream, database, semantic store, verifier warm-up (gateway/readiness.py)
    app.add_api_route("/ready", partial(readiness, db_probe), methods=["GET"])

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        # Behind CACHEGATE_METRICS_TOKEN when set (gateway/metrics_auth.py); open otherwise,
        # which `cachegate doctor` and the README flag as fit for local development only.
        require_metrics_token(request, settings.metrics_token)
        gw: GatewayState = request.app.state.gateway
        body = gw.metrics.render()
        body += gw.upstream.engine_metrics()
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    return app
