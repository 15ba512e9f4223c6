"""Hiding an upstream's prefix-cache counts (``gateway/proxy/cache_counts.py``): which
dialects hide them, and what is hidden in each server's answer; through the gateway
in test_cache_counts_gateway.py."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.proxy.cache_counts import hide_cache_counts
from gateway.proxy.dialects import DIALECTS, GENERIC, UNKNOWN
from gateway.proxy.http_upstream import HttpUpstream


def test_which_dialects_hide() -> None:
    auto = HttpUpstream("http://127.0.0.1:9")
    assert [auto._hides_cached(DIALECTS[n]) for n in ("cachegate", "vllm")] == [False, False]
    assert auto._hides_cached(DIALECTS["sglang"])  # salted, but not known to honour it
    assert auto._hides_cached(GENERIC) and auto._hides_cached(UNKNOWN)
    assert not HttpUpstream("http://127.0.0.1:9", cached_tokens="pass")._hides_cached(GENERIC)
    assert HttpUpstream("http://127.0.0.1:9", cached_tokens="hide")._hides_cached(DIALECTS["vllm"])
    with pytest.raises(ValueError, match="cached_tokens"):
        HttpUpstream("http://127.0.0.1:9", cached_tokens="sometimes")


def test_hide_cache_counts_per_server() -> None:
    openai: dict[str, Any] = {
        "usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}
    }
    assert hide_cache_counts(openai) == {
        "usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 0}}
    }
    assert openai["usage"]["prompt_tokens_details"]["cached_tokens"] == 32  # not mutated
    moonshot = {"usage": {"prompt_tokens": 50, "cached_tokens": 32}}
    assert hide_cache_counts(moonshot) == {"usage": {"prompt_tokens": 50, "cached_tokens": 0}}
    deepseek = {"usage": {"prompt_tokens": 50, "prompt_cache_hit_tokens": 32,
                          "prompt_cache_miss_tokens": 18}}  # fmt: skip
    assert hide_cache_counts(deepseek) == {
        "usage": {"prompt_tokens": 50, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 50}
    }
    # llama.cpp: cache_n, and rates from which it follows (prompt_ms / per-token ms), and
    # the progress a client can ask for: the objects go whole.
    llama = {"choices": [], "timings": {"cache_n": 30, "prompt_n": 4, "prompt_ms": 8.0,
             "prompt_per_token_ms": 2.0}, "prompt_progress": {"total": 34, "cache": 30},
             "__verbose": {"tokens_cached": 30}}  # fmt: skip
    assert hide_cache_counts(llama) == {"choices": []}
    assert hide_cache_counts({"choices": [], "timings": {"cache_n": 0}}) == {"choices": []}


def test_hide_cache_counts_leaves_cold_answers_alone() -> None:
    assert hide_cache_counts({"usage": {"prompt_tokens_details": {"cached_tokens": 0}}}) is None
    assert hide_cache_counts({"usage": {"prompt_tokens_details": {"cached_tokens": None}}}) is None
    assert hide_cache_counts({"usage": {"prompt_tokens": 5, "cached_tokens": 0}}) is None
    assert hide_cache_counts({"usage": {"prompt_tokens_details": None}}) is None
    assert hide_cache_counts({"usage": None, "choices": []}) is None
    assert hide_cache_counts({"choices": []}) is None


def test_odd_counts_cannot_be_read_back_from_what_is_left() -> None:
    # A hit that is no count is still a hit: set to 0, and the miss count becomes what
    # a cold cache says, else prompt_tokens - miss would give the hit back.
    odd = {"usage": {"prompt_tokens": 10, "prompt_cache_hit_tokens": "7",
                     "prompt_cache_miss_tokens": 3}}  # fmt: skip
    assert hide_cache_counts(odd) == {
        "usage": {"prompt_tokens": 10, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 10}
    }
    no_total = {"usage": {"prompt_cache_hit_tokens": 7.0, "prompt_cache_miss_tokens": 3}}
    assert hide_cache_counts(no_total) == {"usage": {"prompt_cache_hit_tokens": 0}}
    flagged = {"usage": {"prompt_tokens_details": {"cached_tokens": True}}}
    assert hide_cache_counts(flagged) == {"usage": {"prompt_tokens_details": {"cached_tokens": 0}}}
