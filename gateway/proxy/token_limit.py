"""Per-tenant model tokens per minute (``policy.rate_limit_tpm``).

A requests-per-minute bucket (``gateway/proxy/ratelimit.py``) counts a one-token
question and a 100k-token document alike; what an upstream spends is tokens. With
``rate_limit_tpm`` set, each tenant has a second bucket in the same store (Redis,
PostgreSQL or this process), of ``tpm`` tokens refilled at ``tpm / 60`` a second:

* a request is admitted while the bucket holds at least one token, else refused with
  a 429 ``rate_limit_exceeded`` and ``Retry-After`` (whole seconds until it does);
* once the model's answer has ended, its ``prompt_tokens + completion_tokens`` are
  taken from the bucket, which may go below zero (down to an hour of ``tpm``,
  ``ratelimit.DEBT_MINUTES``; one minute before session 44, which let answers costing
  more than a minute's tokens overshoot the limit many times over): the tenant's next
  requests wait while it refills, so over any stretch the tenant is held to ``tpm`` a
  minute, and a full bucket is never more than 61 minutes away. An answer whose
  upstream said no ``usage``, and one cut short (its client left, its upstream broke),
  is charged its prompt estimated at 4 characters a token plus the chunks it was sent
  (about a token each); an answer is charged once, whatever ends after its count came;
* a semantic hit costs nothing: no model ran. An embeddings request is charged its
  answer's ``usage.prompt_tokens``.

The count is taken after the answer because it is only known then (OpenAI estimates it
up front from ``max_tokens``; LiteLLM's ``tpm_limit`` counts after, as here), so
requests admitted together may overshoot the bucket by what they spend; the debt they
leave is paid before the next is admitted. Charges go to the store on the rate limiter's
own threads (not the admission checks'), after the answer, never delaying it; a store
that fails lets requests through, as for the request limit.

Answers to a tenant with a token limit carry OpenAI's ``x-ratelimit-limit-tokens``,
``x-ratelimit-remaining-tokens`` (whole tokens left, 0 while in debt) and
``x-ratelimit-reset-tokens`` (until the bucket is full again), in place of an upstream's.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

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


def token_standing(limiter: RateLimiter, ctx: TenantContext) -> dict[str, str]:
    """The token bucket's headers, nothing taken (for a 429 of another limit); none for
    a tenant without ``rate_limit_tpm``. Runs on a thread."""
    tpm = ctx.policy.rate_limit_tpm
    if tpm is None:
        return {}
    read = limiter.store.take(token_bucket_key(ctx.tenant_id, ctx.namespace_id), tpm, 0.0, ALWAYS)
    return token_headers(tpm, read.tokens)


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
    # counted with the request limit's refusals (the admin API's rate_limited)
    raise limiter.refusal(ctx, f"{tpm} tokens", taken.wait, headers)


#: Threads that write charges, apart from the admission checks' (access.py): a backlog
#: of charges on a slow store must not delay a check past its deadline, which opens
#: the breaker and switches every tenant's limits off.
CHARGE_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cachegate-tpm-charge")
#: Charges waiting for a thread past which new ones are dropped (and counted): a store
#: that crawls must not grow the gateway's memory without bound.
MAX_PENDING_CHARGES = 1000


class TokenCharger:
    """Takes a finished answer's tokens from its tenant's bucket on :data:`CHARGE_POOL`
    (the caller never waits); nothing for a tenant without a token limit, nothing while
    the store's breaker is open (as its checks), nothing past a backlog of
    :data:`MAX_PENDING_CHARGES` (``dropped`` counts those)."""

    def __init__(self, limiter: RateLimiter, pool: Executor = CHARGE_POOL) -> None:
        self.limiter, self.pool = limiter, pool
        self.pending = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def __call__(self, ctx: TenantContext, tokens: int) -> None:
        tpm = ctx.policy.rate_limit_tpm
        # is_open, not would_bypass: a charge skipped is no request let through
        if tpm is None or tokens <= 0 or getattr(self.limiter.store, "is_open", False):
            return
        with self._lock:
            if self.pending >= MAX_PENDING_CHARGES:
                self.dropped += 1
                first = self.dropped == 1
            else:
                self.pending += 1
                first = None
        if first is not None:
            if first:
                log.warning("token charges dropped: %d wait for the rate-limit store", self.pending)
            return
        key = token_bucket_key(ctx.tenant_id, ctx.namespace_id)
        try:
            self.pool.submit(self._charge, key, tpm, tokens)
        except RuntimeError:  # the pool is shut down: the process is stopping
            self._done()

    def _charge(self, key: str, tpm: int, tokens: int) -> None:
        try:
            self.limiter.store.take(key, tpm, float(tokens), ALWAYS)
        except Exception:  # a store failure is the breaker's (it fails open); never raise
            log.exception("charging tokens to a rate-limit bucket failed")
        finally:
            self._done()

    def _done(self) -> None:
        with self._lock:
            self.pending -= 1


#: Characters a token, on average, in English text (OpenAI's rule of thumb): what an
#: answer is charged for its prompt when its upstream did not count it. Chinese,
#: Japanese and Korean characters count a token each (BPE vocabularies give them one
#: or more), not a quarter.
CHARS_PER_TOKEN = 4
_CJK = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


#: What a model reads besides the messages' text: tool and function definitions, a
#: JSON schema, a completion's suffix (before session 44 not counted, so a request whose
#: prompt was mostly tools, cut short before its first byte, cost about a token: a review).
_READ_FIELDS = ("tools", "functions", "tool_choice", "response_format", "suffix")


def _dumped(value: Any) -> str:
    """``value`` as the JSON text a model would read of it."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a cycle cannot come from a JSON body; just in case
        return ""


def estimate_prompt_tokens(body: Mapping[str, Any]) -> int:
    """The prompt's tokens as characters / 4, a CJK character as one, a token id as
    itself: for an answer whose upstream said no ``usage`` (a generic upstream's stream
    without ``include_usage``), and one that ended before its count came (the client
    left). Tools, schemas and a message's tool calls count as their JSON text."""
    chars, cjk, ids = 0, 0, 0
    prompt = body.get("prompt")
    prompts = prompt if isinstance(prompt, list) else [prompt]
    texts: list[str] = []
    for item in prompts:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, int):
            ids += 1
        elif isinstance(item, list):
            ids += len(item)
    messages = body.get("messages")
    texts += [_dumped(body[name]) for name in _READ_FIELDS if body.get(name) is not None]
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(message, dict):  # tool calls, a name, a tool's id: read too
            rest = {k: v for k, v in message.items() if k not in ("role", "content")}
            texts += [_dumped(rest)] if rest else []
        parts = content if isinstance(content, list) else [content]
        for part in parts:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    for text in texts:
        wide = len(text) - len(_CJK.sub("", text))
        cjk += wide
        chars += len(text) - wide
    return ids + cjk + math.ceil(chars / CHARS_PER_TOKEN)


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
