"""Per-tenant model tokens per minute (``policy.rate_limit_tpm``).

A requests-per-minute bucket (``gateway/proxy/ratelimit.py``) counts a one-token
question and a 100k-token document alike; what an upstream spends is tokens. With
``rate_limit_tpm`` set, each tenant has a second bucket in the same store (Redis,
PostgreSQL or this process), of ``tpm`` tokens refilled at ``tpm / 60`` a second:

* a request is admitted while the bucket holds at least one token, else refused with
  a 429 ``rate_limit_exceeded`` and ``Retry-After`` (whole seconds until it does);
* once the model's answer has ended, its ``prompt_tokens + completion_tokens`` are
  taken from the bucket, which may go below zero (down to ``-tpm``): the tenant's next
  requests wait while it refills, so over any stretch the tenant is held to ``tpm``
  a minute, and a full bucket is never more than two minutes away. A stream whose client
  left is charged the completion chunks it was sent (about a token each);
* a semantic hit costs nothing: no model ran. An embeddings request is charged its
  answer's ``usage.prompt_tokens``.

The count is taken after the answer because it is only known then (OpenAI estimates it
up front from ``max_tokens``; LiteLLM's ``tpm_limit`` counts after, as here), so
requests admitted together may overshoot the bucket by what they spend; the debt they
leave is paid before the next is admitted. Charges go to the store on the rate limiter's
own threads, after the answer, never delaying it; a store that fails lets requests
through, as for the request limit.

Answers to a tenant with a token limit carry OpenAI's ``x-ratelimit-limit-tokens``,
``x-ratelimit-remaining-tokens`` (whole tokens left, 0 while in debt) and
``x-ratelimit-reset-tokens`` (until the bucket is full again), in place of an upstream's.
"""

from __future__ import annotations

import json
import logging
import math
import re
from concurrent.futures import Executor

from gateway.errors import RateLimitError
from gateway.proxy.ratelimit import ALWAYS, RateLimiter, duration, token_bucket_key
from gateway.tenants import TenantContext

log = logging.getLogger("cachegate.gateway.ratelimit")

#: The token-limit headers a tenant with ``rate_limit_tpm`` gets from its own bucket only.
TOKEN_LIMIT_HEADERS = (
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
)


def token_headers(tpm: int, tokens: float | None) -> dict[str, str]:
    if tokens is None:  # the store was not asked: nothing is known
        return {}
    tokens = min(float(tpm), tokens)
    return {
        "x-ratelimit-limit-tokens": str(tpm),
        "x-ratelimit-remaining-tokens": str(max(0, math.floor(tokens))),
        "x-ratelimit-reset-tokens": duration((tpm - tokens) / (tpm / 60.0)),
    }


def check_tokens(limiter: RateLimiter, ctx: TenantContext) -> dict[str, str]:
    """Admit the request if the tenant's token bucket holds a token (taking none), or
    raise a 429; the headers saying where the bucket stands. Runs on a thread."""
    tpm = ctx.policy.rate_limit_tpm
    if tpm is None:
        return {}
    taken = limiter.store.take(token_bucket_key(ctx.tenant_id, ctx.namespace_id), tpm, 0.0)
    headers = token_headers(tpm, taken.tokens)
    if taken.allowed:
        return headers
    limiter.note_refused(ctx)  # counted with the request limit's refusals (admin stats)
    retry_after = max(1, math.ceil(taken.wait))
    raise RateLimitError(
        f"rate limit of {tpm} tokens per minute exceeded for tenant {ctx.tenant_id!r}; "
        f"retry after {retry_after} s",
        code="rate_limit_exceeded",
        headers=headers | {"Retry-After": str(retry_after)},
    )


class TokenCharger:
    """Takes a finished answer's tokens from its tenant's bucket, on ``pool``'s threads
    (the caller never waits); nothing for a tenant without a token limit."""

    def __init__(self, limiter: RateLimiter, pool: Executor) -> None:
        self.limiter, self.pool = limiter, pool

    def __call__(self, ctx: TenantContext, tokens: int) -> None:
        tpm = ctx.policy.rate_limit_tpm
        if tpm is None or tokens <= 0 or self.limiter.would_bypass():
            return
        key = token_bucket_key(ctx.tenant_id, ctx.namespace_id)
        try:
            self.pool.submit(self._charge, key, tpm, tokens)
        except RuntimeError:  # the pool is shut down: the process is stopping
            log.debug("token charge dropped: the rate-limit pool is closed")

    def _charge(self, key: str, tpm: int, tokens: int) -> None:
        try:
            self.limiter.store.take(key, tpm, float(tokens), ALWAYS)
        except Exception:  # a store failure is the breaker's (it fails open); never raise
            log.exception("charging tokens to a rate-limit bucket failed")


#: ``"usage": {...}`` as OpenAI, vLLM and TEI write it: after the vectors, at the end.
_USAGE = re.compile(rb'"usage"\s*:\s*(\{[^{}]*\})')


def embedding_tokens(raw: bytes) -> int:
    """An embeddings answer's ``usage.prompt_tokens`` (its ``total_tokens`` where that
    is all it says); 0 for a body that says neither, which is then not charged. Read
    from the body's tail: the vectors before it run to megabytes, not worth parsing on
    the event loop for one count."""
    found = _USAGE.search(raw[-4096:])
    try:
        usage = json.loads(found.group(1)) if found else None
    except ValueError:
        return 0
    if not isinstance(usage, dict):
        return 0
    for name in ("prompt_tokens", "total_tokens"):
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0
