"""Engine serving throughput and TTFT under concurrency (in-process AsyncEngine).

One run, one machine, the bundled SmolLM2-135M-Instruct (fp32):

1. decode throughput: 1, 4 and 8 concurrent streams, each a distinct 32-token
   prompt generating 64 tokens with ``ignore_eos`` (greedy). Reported as
   end-to-end tokens/s (all generated tokens / wall time from submission to the
   last token) and decode tokens/s (tokens after each stream's first / time from
   the last first-token to the last token). Goal: 8 streams ≥ 4× the tokens/s of 1.
2. shared system prompt: 32 requests = the same 1,000-token system prompt + a
   distinct 24-token question, 16 generated tokens each, **all submitted at
   once**, with prefix caching on vs off (same engine settings otherwise,
   default 256 MiB KV pool). Before the timed wave each engine serves one
   warm-up request with the same system prompt, as in production where the
   system prompt is hot; without it the first wave could not reuse anything,
   because requests admitted together all miss before any of them commits its
   blocks. Reported: requests/s (32 / wall time), mean / p50 / p90 TTFT measured
   by the client (submission → first token). Goal: caching on gives ≥ 3× lower
   mean TTFT than off.

Goals are reported, not asserted. Prompts are random token ids (exact lengths).
Prints a markdown table and writes bench/results/engine_serving.json. About 5
minutes on 2 CPU cores; ``--quick`` (300-token system prompt, 8 requests, 32
tokens per stream) takes about one.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import environment, write_json
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel, default_model_path, load_model
from prefix.model.sampling import SamplingParams
from prefix.serve.async_engine import AsyncEngine
from prefix.serve.engine import PrefixEngine


def random_tokens(n: int, gen: torch.Generator, vocab: int) -> list[int]:
    return torch.randint(100, vocab, (n,), generator=gen).tolist()


async def run_wave(
    ae: AsyncEngine, prompts: list[list[int]], params: SamplingParams, label: str
) -> dict[str, Any]:
    """Submit every prompt at once; per-request client-side timings."""
    started = time.perf_counter()
    done = 0

    async def one(prompt: list[int]) -> dict[str, Any]:
        nonlocal done
        submitted = time.perf_counter()
        first: float | None = None
        n = 0
        last = None
        async for out in ae.generate(ae.engine.request(prompt, params)):
            if first is None and out.new_token_ids:
                first = time.perf_counter()
            n += len(out.new_token_ids)
            last = out
        end = time.perf_counter()
        assert first is not None and last is not None
        done += 1
        print(f"    {label}: {done}/{len(prompts)} done ({end - started:.1f} s)", flush=True)
        return {
            "ttft_s": first - submitted,
            "first_at": first,
            "end": end,
            "tokens": n,
            "cached_tokens": last.cached_tokens,
            "prompt_tokens": last.prompt_tokens,
        }

    results = await asyncio.gather(*(one(p) for p in prompts))
    wall = time.perf_counter() - started
    tokens = sum(r["tokens"] for r in results)
    last_first = max(r["first_at"] for r in results)
    last_end = max(r["end"] for r in results)
    after_first = sum(r["tokens"] - 1 for r in results)
    ttfts = sorted(r["ttft_s"] for r in results)
    return {
        "requests": len(prompts),
        "wall_s": wall,
        "generated_tokens": tokens,
        "tokens_per_s": tokens / wall,
        "decode_tokens_per_s": after_first / (last_end - last_first) if after_first else None,
        "requests_per_s": len(prompts) / wall,
        "mean_ttft_s": statistics.fmean(ttfts),
        "p50_ttft_s": ttfts[len(ttfts) // 2],
        "p90_ttft_s": ttfts[min(len(ttfts) - 1, int(0.9 * len(ttfts)))],
        "mean_cached_tokens": statistics.fmean(r["cached_tokens"] for r in results),
        "prompt_tokens": results[0]["prompt_tokens"],
    }


async def with_engine(engine: PrefixEngine, body: Any) -> Any:
    ae = AsyncEngine(engine)
    ae.start()
    try:
        return await body(ae)
    finally:
        await asyncio.to_thread(ae.shutdown)


def decode_throughput(
    loaded: LoadedModel, streams: list[int], max_tokens: int, gen: torch.Generator
) -> dict[str, Any]:
    vocab = loaded.config.vocab_size
    engine = PrefixEngine(EngineConfig(), loaded=loaded)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    out: dict[str, Any] = {}

    async def body(ae: AsyncEngine) -> None:
        print("  warm-up ...", flush=True)
        await run_wave(ae, [random_tokens(32, gen, vocab)], SamplingParams(max_tokens=4), "warm")
        for n in streams:
            print(f"  {n} concurrent stream(s) x {max_tokens} tokens ...", flush=True)
            prompts = [random_tokens(32, gen, vocab) for _ in range(n)]
            out[str(n)] = await run_wave(ae, prompts, params, f"{n} streams")
            print(f"  -> {out[str(n)]['tokens_per_s']:.1f} tokens/s", flush=True)

    asyncio.run(with_engine(engine, body))
    return out


def shared_prompt(
    loaded: LoadedModel,
    caching: bool,
    system_tokens: int,
    requests: int,
    max_tokens: int,
    gen_seed: int,
) -> dict[str, Any]:
    vocab = loaded.config.vocab_size
    gen = torch.Generator().manual_seed(gen_seed)  # the same prompts for on and off
    system = random_tokens(system_tokens, gen, vocab)
    warm = system + random_tokens(24, gen, vocab)
    prompts = [system + random_tokens(24, gen, vocab) for _ in range(requests)]
    engine = PrefixEngine(EngineConfig(enable_prefix_caching=caching), loaded=loaded)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    label = f"caching {'on' if caching else 'off'}"

    async def body(ae: AsyncEngine) -> dict[str, Any]:
        print(f"  {label}: warm-up request (caches the system prompt) ...", flush=True)
        await run_wave(ae, [warm], SamplingParams(max_tokens=1), "warm-up")
        print(f"  {label}: {requests} requests submitted at once ...", flush=True)
        return await run_wave(ae, prompts, params, label)

    result: dict[str, Any] = asyncio.run(with_engine(engine, body))
    # Prefills and decodes interleave here: a decode-only rate would mean nothing.
    result["decode_tokens_per_s"] = None
    result["preemptions"] = engine.scheduler.num_preemptions
    result["kv_blocks"] = engine.pool.num_blocks
    print(
        f"  -> {label}: mean TTFT {result['mean_ttft_s']:.2f} s, "
        f"{result['requests_per_s']:.2f} req/s",
        flush=True,
    )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller workload (about a minute)")
    ap.add_argument("--streams", default="1,4,8")
    ap.add_argument("--stream-tokens", type=int, default=None, help="default 64 (quick: 32)")
    ap.add_argument("--system-tokens", type=int, default=None, help="default 1000 (quick: 300)")
    ap.add_argument("--requests", type=int, default=None, help="default 32 (quick: 8)")
    ap.add_argument("--answer-tokens", type=int, default=16)
    args = ap.parse_args()
    stream_tokens = args.stream_tokens or (32 if args.quick else 64)
    system_tokens = args.system_tokens or (300 if args.quick else 1000)
    requests = args.requests or (8 if args.quick else 32)
    streams = [int(s) for s in args.streams.split(",")]
    started = time.perf_counter()
    torch.manual_seed(0)

    print("loading model ...", flush=True)
    loaded = load_model(default_model_path(), device="cpu", dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)

    print(f"[1/2] decode throughput ({streams} streams) ...", flush=True)
    decode = decode_throughput(loaded, streams, stream_tokens, gen)
    print(
        f"[2/2] {requests} requests sharing a {system_tokens}-token system prompt ...", flush=True
    )
    shared = {
        mode: shared_prompt(loaded, mode == "on", system_tokens, requests, args.answer_tokens, 1)
        for mode in ("off", "on")
    }

    one, most = decode[str(streams[0])], decode[str(streams[-1])]
    scaling = most["tokens_per_s"] / one["tokens_per_s"]
    ttft_gain = shared["off"]["mean_ttft_s"] / shared["on"]["mean_ttft_s"]
    goals = {
        f"{streams[-1]}_streams_vs_{streams[0]}_tokens_per_s": scaling,
        f"{streams[-1]}_streams_goal_4x_met": scaling >= 4.0,
        "ttft_off_over_on": ttft_gain,
        "ttft_goal_3x_met": ttft_gain >= 3.0,
    }
    payload = {
        "benchmark": "engine_serving",
        "model": loaded.model_id,
        "environment": environment(),
        "settings": {
            "quick": args.quick,
            "stream_prompt_tokens": 32,
            "stream_tokens": stream_tokens,
            "system_tokens": system_tokens,
            "question_tokens": 24,
            "requests": requests,
            "answer_tokens": args.answer_tokens,
            "submission": "all at once, after one warm-up request per engine",
            "engine": "EngineConfig() defaults (block 16, 256 MiB KV, chunk 512, 1024 tok/step)",
        },
        "decode": decode,
        "shared_prompt": shared,
        "goals": goals,
        "total_s": time.perf_counter() - started,
    }
    write_json("engine_serving", payload)

    print("\n| workload | tokens/s | decode tokens/s | req/s | mean TTFT (s) | p90 TTFT (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for n, r in decode.items():
        print(
            f"| {n} stream(s) × {stream_tokens} tok | {r['tokens_per_s']:.1f} | "
            f"{r['decode_tokens_per_s'] or 0:.1f} | {r['requests_per_s']:.2f} | "
            f"{r['mean_ttft_s']:.2f} | {r['p90_ttft_s']:.2f} |"
        )
    for mode, r in shared.items():
        print(
            f"| {requests} req, {system_tokens}-tok system, caching {mode} | "
            f"{r['tokens_per_s']:.1f} | — | "
            f"{r['requests_per_s']:.2f} | {r['mean_ttft_s']:.2f} | {r['p90_ttft_s']:.2f} |"
        )
    print(
        f"\n{streams[-1]} streams / {streams[0]} stream: {scaling:.2f}× tokens/s (goal ≥ 4×, "
        f"{'met' if goals[f'{streams[-1]}_streams_goal_4x_met'] else 'NOT met'}); "
        f"mean TTFT off / on: {ttft_gain:.1f}× (goal ≥ 3×, "
        f"{'met' if goals['ttft_goal_3x_met'] else 'NOT met'}). "
        f"Total {payload['total_s']:.0f} s."
    )


if __name__ == "__main__":
    main()
