"""What an upstream's answer says about its own prefix cache, and hiding it.

An upstream whose prefix cache is shared by every tenant of the gateway (a cloud
API keyed by the gateway's one account, a server that ignores ``cache_salt``)
reports in each answer how many prompt tokens it found cached. Behind the gateway
that count is an oracle across tenants: a tenant sends a guess at another tenant's
system prompt and reads ``cached_tokens`` to learn whether someone sent it first
(the attack of Gu et al., "Auditing Prompt Caching in Language Model APIs", 2025).
Where isolation is not known to hold the gateway reports those counts to the client
as a cold cache would (``gateway/proxy/dialects.py`` says where it holds;
``CACHEGATE_UPSTREAM_CACHED_TOKENS`` overrides). The fields, by server:

=============================================  ========================================
field                                          hidden as
=============================================  ========================================
``usage.prompt_tokens_details.cached_tokens``  0 (OpenAI, vLLM, SGLang, OpenRouter)
``usage.cached_tokens``                        0 (Moonshot)
``usage.prompt_cache_hit_tokens``              0, and ``prompt_cache_miss_tokens`` =
                                               ``prompt_tokens`` (DeepSeek)
``timings``, ``prompt_progress``,              removed (llama.cpp: its per-token rates
``__verbose``                                  and progress give the cached count back)
=============================================  ========================================

Headers too: the upstream's ``openai-processing-ms`` (its prompt time: a sharper cache
timer), where the counts are hidden, and, on answers that are not its own refusal, its
``x-ratelimit-*`` headers, which count the gateway's one account: every tenant's
requests and tokens, so a tenant read the others' traffic from them (a review, session
41). Those are dropped whatever the upstream's cache (since session 50: an isolated
dialect had passed them, and a managed endpoint in front of vLLM sends them); only
``CACHEGATE_UPSTREAM_CACHED_TOKENS=pass`` (one tenant, or tenants that may see each
other) passes them. A 429/503 of the upstream keeps them (they explain the refusal;
gateway/proxy/relay.py ``upstream_error``).

``prompt_tokens`` is never touched. What this cannot see: a field of another server's
that names the count differently, a price that reflects a cache discount (OpenRouter's
``usage.cost``), and the time to the first token, which differs between a cached and
a cold prompt; only the upstream can close those (a salt it honours, or no cache).
"""

from __future__ import annotations

from typing import Any

#: Whole objects of llama.cpp's that report the cache: its timings (``cache_n``, and
#: per-token rates from which the cached count follows), the streamed prompt progress
#: a client may ask for (``return_progress``), and a verbose server's echo.
REMOVED = ("timings", "prompt_progress", "__verbose")


def hide_shared_headers(passed: dict[str, str], *, limits: bool, timer: bool) -> None:
    """Drop, from the headers an answer passes on, what tells of other tenants: the
    account's ``limits`` and the prompt's ``timer`` (the module docstring)."""
    if limits:
        for name in [n for n in passed if n.startswith("x-ratelimit-")]:
            del passed[name]
    if timer:
        passed.pop("openai-processing-ms", None)


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def _is_hit(part: dict[str, Any], field: str) -> bool:
    """Whether ``field`` reports cached tokens (absent, null or 0: a cold cache)."""
    value = part.get(field)
    return value is not None and value is not False and value != 0


def _usage(usage: dict[str, Any]) -> dict[str, Any] | None:
    out = dict(usage)
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and _is_hit(details, "cached_tokens"):
        out["prompt_tokens_details"] = details | {"cached_tokens": 0}
    if _is_hit(usage, "cached_tokens"):
        out["cached_tokens"] = 0
    if _is_hit(usage, "prompt_cache_hit_tokens"):
        out["prompt_cache_hit_tokens"] = 0
        # What a cold cache says: every prompt token missed. Without a sound total the
        # miss count goes too, since prompt_tokens - miss would give the hit back.
        prompt = _count(usage.get("prompt_tokens"))
        if prompt is not None:
            out["prompt_cache_miss_tokens"] = prompt
        else:
            out.pop("prompt_cache_miss_tokens", None)
    return out if out != usage else None


def hide_cache_counts(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of a response body or stream chunk with its cache-hit counts at zero (and
    llama.cpp's cache reports removed), or None when it reports none: then it goes to
    the client as it came, byte for byte."""
    out = {k: v for k, v in payload.items() if k not in REMOVED}
    usage = payload.get("usage")
    hidden = _usage(usage) if isinstance(usage, dict) else None
    if hidden is not None:
        out["usage"] = hidden
    return out if len(out) != len(payload) or hidden is not None else None
