"""What an upstream's answer says about its own prefix cache, and hiding it.

An upstream whose prefix cache is shared by every tenant of the gateway (a cloud
API keyed by the gateway's one account, a server that honours no ``cache_salt``)
reports in each answer how many prompt tokens it found cached. Behind the gateway
that count is an oracle across tenants: a tenant sends a guess at another tenant's
system prompt and reads ``cached_tokens`` to learn whether someone sent it first
(the attack of Gu et al., "Auditing Prompt Caching in Language Model APIs", 2025).
Where isolation is not known to hold the gateway reports those counts to the client
as a cold cache would (``gateway/proxy/dialects.py`` says where it holds;
``CACHEGATE_UPSTREAM_CACHED_TOKENS`` overrides). The fields, by server:

==================================================  ==============================
field                                               hidden as
==================================================  ==============================
``usage.prompt_tokens_details.cached_tokens``       0 (OpenAI, vLLM, SGLang)
``usage.prompt_cache_hit_tokens`` / ``..._miss_..``  0 / hit + miss (DeepSeek)
``timings.cache_n`` / ``timings.prompt_n``          0 / cache_n + prompt_n (llama.cpp)
==================================================  ==============================

Totals are kept (``prompt_tokens`` is never touched; a miss count absorbs the hits),
so a client's accounting still adds up. Time to first token still differs between
a cached and a cold prompt; that channel only the upstream can close.
"""

from __future__ import annotations

from typing import Any


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def _moved(part: Any, hit: str, rest: str | None) -> dict[str, Any] | None:
    """``part`` with ``hit`` set to 0 (its tokens moved to ``rest``), or None when it
    reports no hit. A count that is not a count (a string, negative) is set to 0 too,
    ``rest`` then left as it was: there is nothing sound to add."""
    if not isinstance(part, dict) or hit not in part or part[hit] == 0:
        return None
    out = dict(part)
    out[hit] = 0
    moved, before = _count(part[hit]), (_count(part.get(rest)) if rest else None)
    if rest is not None and moved is not None and before is not None:
        out[rest] = before + moved
    return out


def hide_cache_counts(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of a response body or stream chunk with its cache-hit counts at zero,
    or None when it reports none (then it goes to the client as it came)."""
    out = dict(payload)
    changed = False
    usage = payload.get("usage")
    if isinstance(usage, dict):
        new_usage = dict(usage)
        details = _moved(usage.get("prompt_tokens_details"), "cached_tokens", None)
        if details is not None:
            new_usage["prompt_tokens_details"] = details
        deepseek = _moved(usage, "prompt_cache_hit_tokens", "prompt_cache_miss_tokens")
        if deepseek is not None:
            new_usage |= {k: deepseek[k] for k in deepseek if k.startswith("prompt_cache_")}
        if details is not None or deepseek is not None:
            out["usage"] = new_usage
            changed = True
    timings = _moved(payload.get("timings"), "cache_n", "prompt_n")
    if timings is not None:
        out["timings"] = timings
        changed = True
    return out if changed else None
