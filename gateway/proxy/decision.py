"""What the semantic layer decided for one request (``gateway/proxy/pipeline.py``
makes it; the routes, the miss path and the misfire sampler read it)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from semantic import SemanticQuery
from semantic.results import LookupResult
from semantic.trace import LookupTrace

log = logging.getLogger("cachegate.gateway")


@dataclass
class SemanticDecision:
    """What the semantic layer did for one request."""

    status: Literal["hit", "miss", "skipped"]
    reason: str | None  # lookup miss reason, or why the layer was skipped
    query: SemanticQuery | None = None  # set when the request is cacheable
    result: LookupResult | None = None
    trace: LookupTrace | None = None  # every step, when the lookup was traced (a dry run)
    #: The cosine threshold the lookup ran with: the policy's, or with the verifier on
    #: the retrieval threshold in force (the misfire sampler records it with a hit).
    threshold: float | None = None
    #: When the lookup began (the cache's clock): an invalidation of the tenant after it
    #: keeps this request's answer out of the cache (semantic/fences.py).
    asked_at: datetime | None = None

    @property
    def header(self) -> str:
        return self.status if self.reason is None else f"{self.status}:{self.reason}"


def unforeseen(exc: Exception, during: str, tr: LookupTrace) -> SemanticDecision:
    """Skip the semantic layer for a request it failed on unexpectedly: the request still
    reaches the model. The log names the exception's type only: its message or traceback
    can quote the body (a key, a value), and logs never hold user text."""
    log.error("semantic layer skipped a request: %s while %s", type(exc).__name__, during)
    tr.step("cacheable", False, f"unexpected {type(exc).__name__}")
    return SemanticDecision("skipped", "uncacheable:internal", trace=tr.result)
