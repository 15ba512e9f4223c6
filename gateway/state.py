"""``GatewayState``: the running gateway's shared parts, kept on ``app.state.gateway``.

Its own module because every wing reads it (the proxy routes, the admin API, the
reports, the operations started in :mod:`gateway.ops`): defining it beside the
proxy routes made the admin and the reports import the proxy's request path to
name one dataclass. Built once in the app's lifespan (:mod:`gateway.app`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.metrics import GatewayMetrics
from gateway.proxy.pipeline import Pipeline
from gateway.proxy.upstream import Upstream
from gateway.tenants import TenantContext, TenantStore

if TYPE_CHECKING:
    # Only for the annotations: both start background work the state does not own.
    from gateway.reports.recorder import StatsRecorder
    from gateway.review.sampling import MisfireSampler
    from gateway.saved_metrics import SavedCounter


@dataclass
class GatewayState:
    tenants: TenantStore
    pipeline: Pipeline
    upstream: Upstream
    metrics: GatewayMetrics
    max_body_bytes: int = 32 * 2**20  # CACHEGATE_MAX_BODY_BYTES
    body_timeout: float = 30.0  # CACHEGATE_REQUEST_BODY_TIMEOUT
    forward_unlisted_models: bool = False  # CACHEGATE_UPSTREAM_UNLISTED_MODELS=forward
    stats: StatsRecorder | None = None  # one row per finished request (gateway/reports/recorder.py)
    review: MisfireSampler | None = None  # samples semantic hits for review
    saved: SavedCounter | None = None  # FLOPs and dollars saved, per request (saved_metrics.py)
    # Takes an answer's model tokens from its tenant's rate_limit_tpm bucket
    # (gateway/proxy/token_limit.py TokenCharger); None: not counted.
    charge_tokens: Callable[[TenantContext, int], None] | None = None
