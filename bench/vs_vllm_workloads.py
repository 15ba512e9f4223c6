"""The three workloads of bench/vs_vllm.py, run against one server.

(a) TTFT with ``max_tokens=1`` for a long prefix of random token ids + a
    suffix: cold (the prefix never seen) and prefix-hit (the same prefix, a new
    suffix), median over ``ttft_repeats`` distinct prefixes;
(b) one stream over a warmed shared prefix + a question, ``decode_tokens``
    output tokens: decode tokens/s;
(c) ``n`` concurrent requests = the warmed shared prefix + a distinct question,
    ``concurrent_tokens`` output tokens each: output tokens/s, TTFT p50/p99.

The prompts are drawn once from a seed, before any server starts, so every
server answers exactly the same token ids.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from typing import Any

import httpx

from bench.vs_vllm_client import concurrent_wave, random_ids, stream_completion


@dataclass(frozen=True)
class Sizes:
    prefix_tokens: int = 2000
    suffix_tokens: int = 200
    ttft_repeats: int = 4
    decode_tokens: int = 256
    shared_tokens: int = 700
    question_tokens: int = 32
    concurrency: tuple[int, ...] = (8, 32)
    concurrent_tokens: int = 128


QUICK = Sizes(
    prefix_tokens=256,
    suffix_tokens=32,
    ttft_repeats=2,
    decode_tokens=16,
    shared_tokens=96,
    question_tokens=8,
    concurrency=(2, 4),
    concurrent_tokens=8,
)


@dataclass(frozen=True)
class Prompts:
    warmup: list[int]
    cold: list[list[int]]  # prefix_i + suffix_a_i
    hit: list[list[int]]  # prefix_i + suffix_b_i (a new suffix on a cached prefix)
    shared_warm: list[int]  # the shared prefix + a question of its own
    decode: list[int]
    waves: dict[int, list[list[int]]]  # concurrency → its prompts


def make_prompts(sizes: Sizes, vocab: int, seed: int) -> Prompts:
    rng = random.Random(seed)
    prefixes = [random_ids(rng, sizes.prefix_tokens, vocab) for _ in range(sizes.ttft_repeats)]
    shared = random_ids(rng, sizes.shared_tokens, vocab)

    def question() -> list[int]:
        return shared + random_ids(rng, sizes.question_tokens, vocab)

    return Prompts(
        warmup=random_ids(rng, 16, vocab),
        cold=[p + random_ids(rng, sizes.suffix_tokens, vocab) for p in prefixes],
        hit=[p + random_ids(rng, sizes.suffix_tokens, vocab) for p in prefixes],
        shared_warm=question(),
        decode=question(),
        waves={n: [question() for _ in range(n)] for n in sizes.concurrency},
    )


async def run_all(
    base_url: str, model: str, sizes: Sizes, prompts: Prompts, label: str
) -> dict[str, Any]:
    """Every workload against the server at ``base_url``; one result dict."""
    timeout = httpx.Timeout(600.0, connect=10.0)
    limits = httpx.Limits(max_connections=max(sizes.concurrency, default=1) + 4)
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout, limits=limits) as client:
        print(f"    [{label}] warm-up request", flush=True)
        await stream_completion(client, model, prompts.warmup, 4)

        cold: list[float] = []
        hit: list[float] = []
        cold_cached: list[int | None] = []
        hit_cached: list[int | None] = []
        for i, (c, h) in enumerate(zip(prompts.cold, prompts.hit, strict=True)):
            tc = await stream_completion(client, model, c, 1)
            th = await stream_completion(client, model, h, 1)
            cold.append(tc.ttft_s)
            hit.append(th.ttft_s)
            cold_cached.append(tc.cached_tokens)
            hit_cached.append(th.cached_tokens)
            print(
                f"    [{label}] TTFT {i + 1}/{len(prompts.cold)}: cold {tc.ttft_s:.3f} s, "
                f"prefix-hit {th.ttft_s:.3f} s ({tc.prompt_tokens} prompt tokens)",
                flush=True,
            )

        print(f"    [{label}] warming the shared prefix", flush=True)
        await stream_completion(client, model, prompts.shared_warm, 1)
        print(f"    [{label}] one stream x {sizes.decode_tokens} tokens", flush=True)
        dec = await stream_completion(client, model, prompts.decode, sizes.decode_tokens)
        rate = dec.decode_tokens_per_s
        print(f"    [{label}] decode {rate or 0:.1f} tokens/s", flush=True)

        waves: dict[str, Any] = {}
        for n, wave_prompts in prompts.waves.items():
            print(f"    [{label}] {n} concurrent x {sizes.concurrent_tokens} tokens", flush=True)
            w = await concurrent_wave(
                client, model, wave_prompts, sizes.concurrent_tokens, f"{label} x{n}"
            )
            print(
                f"    [{label}] x{n}: {w['output_tokens_per_s']:.1f} tokens/s, TTFT p50 "
                f"{w['ttft_p50_s']:.3f} s, p99 {w['ttft_p99_s']:.3f} s",
                flush=True,
            )
            waves[str(n)] = w

    return {
        "ttft": {
            "cold_median_s": statistics.median(cold),
            "hit_median_s": statistics.median(hit),
            "cold_s": cold,
            "hit_s": hit,
            "cold_cached_tokens": cold_cached,
            "hit_cached_tokens": hit_cached,
        },
        "decode": {
            "completion_tokens": dec.completion_tokens,
            "ttft_s": dec.ttft_s,
            "decode_tokens_per_s": rate,
        },
        "concurrent": waves,
    }
