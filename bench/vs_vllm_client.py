"""The streaming client that bench/vs_vllm.py points at either server.

One code path for both engines: a streamed ``/v1/completions`` request with
token-id prompts (both servers accept a list of ints, so no tokenizer differs
between them), temperature 0, ``ignore_eos`` and ``stream_options.include_usage``
so the token count comes from the server's own usage block instead of counting
chunks (a chunk can hold zero tokens' worth of text when a token ends mid
UTF-8 character, and our server then sends nothing for it).

Times are taken on the client: TTFT is submission → the first chunk that
carries a choice; decode rate is (tokens − 1) / (last chunk − first chunk).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

# The lowest ids of SmolLM2's vocabulary are special and control tokens; random
# prompts stay above them so that neither server treats one as a chat marker.
_LOWEST_ID = 100


@dataclass(frozen=True)
class Timing:
    """Client-side timings of one streamed completion."""

    submitted: float  # perf_counter at the request's start
    first_chunk: float  # perf_counter at the first chunk with a choice
    last_chunk: float  # perf_counter at the last chunk with a choice
    completion_tokens: int
    prompt_tokens: int
    cached_tokens: int | None  # None when the server does not report it

    @property
    def ttft_s(self) -> float:
        return self.first_chunk - self.submitted

    @property
    def decode_tokens_per_s(self) -> float | None:
        span = self.last_chunk - self.first_chunk
        if self.completion_tokens < 2 or span <= 0:
            return None
        return (self.completion_tokens - 1) / span


def random_ids(rng: random.Random, n: int, vocab: int) -> list[int]:
    """``n`` token ids drawn uniformly from the non-special part of the vocabulary."""
    return [rng.randrange(_LOWEST_ID, vocab) for _ in range(n)]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation between ranks.

    numpy's default ("linear") method, written out so the client runs without
    numpy in whatever environment launches it.
    """
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    lo = math.floor(rank)
    hi = math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def _cached_tokens(usage: dict[str, Any]) -> int | None:
    details = usage.get("prompt_tokens_details") or {}
    value = details.get("cached_tokens")
    return int(value) if value is not None else None


async def stream_completion(
    client: httpx.AsyncClient, model: str, prompt: list[int], max_tokens: int
) -> Timing:
    """One streamed, greedy completion; raises on any HTTP or in-stream error."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    submitted = time.perf_counter()
    first: float | None = None
    last: float | None = None
    usage: dict[str, Any] | None = None
    async with client.stream("POST", "/v1/completions", json=body) as resp:
        if resp.status_code != 200:
            detail = (await resp.aread()).decode(errors="replace")[:500]
            raise RuntimeError(f"HTTP {resp.status_code} from {resp.url}: {detail}")
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                raise RuntimeError(f"error inside the stream: {event['error']}")
            if event.get("choices"):
                now = time.perf_counter()
                first = now if first is None else first
                last = now
            if event.get("usage"):
                usage = event["usage"]
    if first is None or last is None or usage is None:
        raise RuntimeError("the stream ended without a choice or without usage")
    return Timing(
        submitted=submitted,
        first_chunk=first,
        last_chunk=last,
        completion_tokens=int(usage["completion_tokens"]),
        prompt_tokens=int(usage["prompt_tokens"]),
        cached_tokens=_cached_tokens(usage),
    )


async def concurrent_wave(
    client: httpx.AsyncClient,
    model: str,
    prompts: Sequence[list[int]],
    max_tokens: int,
    label: str,
) -> dict[str, Any]:
    """Submit every prompt at once; aggregate output tokens/s and TTFT percentiles."""
    started = time.perf_counter()
    done = 0

    async def one(prompt: list[int]) -> Timing:
        nonlocal done
        t = await stream_completion(client, model, prompt, max_tokens)
        done += 1
        if done == len(prompts) or done % max(1, len(prompts) // 4) == 0:
            print(f"      {label}: {done}/{len(prompts)} done", flush=True)
        return t

    timings = await asyncio.gather(*(one(p) for p in prompts))
    wall = time.perf_counter() - started
    ttfts = [t.ttft_s for t in timings]
    tokens = sum(t.completion_tokens for t in timings)
    return {
        "requests": len(prompts),
        "max_tokens": max_tokens,
        "wall_s": wall,
        "completion_tokens": tokens,
        "output_tokens_per_s": tokens / wall,
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p99_s": percentile(ttfts, 99),
        "ttft_s": ttfts,
        "cached_tokens": [t.cached_tokens for t in timings],
    }
