"""Gateway load benchmark, the client phases (real HTTP over loopback).

``phase1``: miss-path overhead, one request at a time over four paths;
``hit_load``: 32 concurrent clients asking verified paraphrase hits;
``replay_trace``: the Zipf trace through the gateway, both cache layers measured.
See bench/gateway_load.py.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from bench.gateway_load_common import (
    API_KEY,
    CLIENTS,
    SYSTEM_PROMPT,
    CpuWindow,
    chat_body,
    pct,
    summary,
)


def headers_for(path: str) -> dict[str, str]:
    auth = {"Authorization": f"Bearer {API_KEY}"}
    return {
        "direct": {},
        "gw_nocache": auth | {"Cache-Control": "no-cache"},
        "gw_lookup": auth | {"Cache-Control": "no-store"},
        "gw_http_nocache": auth | {"Cache-Control": "no-cache"},
    }[path]


PATH_NAMES = {
    "direct": "engine server, direct",
    "gw_nocache": "gateway, lookup skipped (no-cache)",
    "gw_lookup": "gateway, lookup on, misses (no-store)",
    "gw_http_nocache": "gateway → engine server over HTTP (semantic off)",
}


def phase1(info: dict[str, Any], samples: int, warmup: int) -> dict[str, Any]:
    import httpx

    model, question = info["model"], info["prepare"]["phase1"]["question"]
    body = chat_body(model, question, 1)
    urls = {
        "direct": info["engine_url"],
        "gw_nocache": info["gateway_url"],
        "gw_lookup": info["gateway_url"],
        "gw_http_nocache": info["gateway_http_url"],
    }
    clients = {p: httpx.Client(base_url=u, timeout=60) for p, u in urls.items()}
    lat: dict[str, list[float]] = {p: [] for p in urls}
    labels: dict[str, Counter] = {p: Counter() for p in urls}
    rng = random.Random(7)
    order = list(urls)
    cpu = CpuWindow(info["server_pid"])
    try:
        for r in range(-warmup, samples):
            if r == 0:  # server timers from here on: one cache.lookup per gw_lookup request
                clients["gw_nocache"].get("/__bench/stats", params={"reset": "1"})
            rng.shuffle(order)
            for p in order:
                t0 = time.perf_counter()
                resp = clients[p].post("/v1/chat/completions", json=body, headers=headers_for(p))
                dt = (time.perf_counter() - t0) * 1000
                if resp.status_code != 200:
                    raise SystemExit(f"phase 1 {p}: HTTP {resp.status_code}: {resp.text[:300]}")
                if r >= 0:
                    lat[p].append(dt)
                    labels[p][
                        f"{resp.headers.get('x-cachegate-cache', '-')} / "
                        f"{resp.headers.get('x-cachegate-semantic', '-')}"
                    ] += 1
            if r >= 0 and (r + 1) % max(1, samples // 4) == 0:
                line = ", ".join(f"{p} {statistics.median(lat[p]):.1f}" for p in urls)
                print(f"  round {r + 1}/{samples}: p50 ms so far: {line}", flush=True)
        timers = clients["gw_nocache"].get("/__bench/stats", params={"raw": "1"}).json()
        timer_summary = clients["gw_nocache"].get("/__bench/stats").json()
    finally:
        for c in clients.values():
            c.close()
    usage = resp.json().get("usage", {})
    # The lookup's own time for each gw_lookup request (requests are serial, so the k-th
    # cache.lookup sample belongs to the k-th gw_lookup request).
    lookups = timers.get("cache.lookup (in thread)", [])
    beyond: dict[str, Any] = {"n_lookup_samples": len(lookups)}
    if len(lookups) == samples:
        net = [g - lk for g, lk in zip(lat["gw_lookup"], lookups, strict=True)]
        paired = [n - d for n, d in zip(net, lat["direct"], strict=True)]
        beyond |= {
            "lookup_in_gateway_ms": summary(lookups),
            "p50_ms": round(pct(net, 50) - pct(lat["direct"], 50), 2),
            "p99_ms": round(pct(net, 99) - pct(lat["direct"], 99), 2),
            "paired_median_ms": round(statistics.median(paired), 2),
        }
    stats = {p: summary(v) for p, v in lat.items()}
    direct = lat["direct"]
    overhead = {}
    for p in ("gw_nocache", "gw_lookup", "gw_http_nocache"):
        paired = [g - d for g, d in zip(lat[p], direct, strict=True)]
        overhead[p] = {
            "p50_ms": round(pct(lat[p], 50) - pct(direct, 50), 2),
            "p90_ms": round(pct(lat[p], 90) - pct(direct, 90), 2),
            "p99_ms": round(pct(lat[p], 99) - pct(direct, 99), 2),
            "paired_median_ms": round(statistics.median(paired), 2),
        }
    lookup_http = {
        "p50_ms": round(pct(lat["gw_lookup"], 50) - pct(lat["gw_nocache"], 50), 2),
        "paired_median_ms": round(
            statistics.median(
                g - n for g, n in zip(lat["gw_lookup"], lat["gw_nocache"], strict=True)
            ),
            2,
        ),
    }
    return {
        "request": {
            "question": question,
            "max_tokens": 1,
            "temperature": 0,
            "prompt_tokens": usage.get("prompt_tokens"),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
        },
        "samples_per_path": samples,
        "latency_ms": stats,
        "labels": {p: dict(c) for p, c in labels.items()},
        "overhead_vs_direct_ms": overhead,
        "lookup_cost_through_http_ms": lookup_http,
        "lookup_path_overhead_beyond_lookup_ms": beyond,
        "server_timers_ms": timer_summary,
        "cpu": cpu.close(samples * len(urls)),
        "raw_ms": {p: [round(x, 3) for x in v] for p, v in lat.items()},
    }


async def hit_load(
    info: dict[str, Any],
    questions: list[str],
    seconds: float,
    warmup: float,
    on_measure: Callable[[], Any] | None = None,
    client_kind: str = "lean",
) -> dict[str, Any]:
    """CLIENTS concurrent clients asking paraphrase-hits; stats over the measured window.

    ``client_kind`` ``lean`` (default): one :class:`bench.http_lean.LeanConnection` per
    client, pre-encoded requests, so the generator takes little of the shared CPU;
    ``httpx``: one ``httpx.AsyncClient`` with CLIENTS keep-alive connections (before
    session 11 the only one; it costs 0.9-1.7 ms of CPU per request here)."""
    import httpx

    from bench.http_lean import LeanConnection, LeanHttpError

    if client_kind not in ("lean", "httpx"):
        raise ValueError("client_kind must be 'lean' or 'httpx'")
    model = info["model"]
    bodies = [json.dumps(chat_body(model, q, 24)).encode() for q in questions]
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    records: list[tuple[float, float, str, int]] = []  # (end, latency ms, label, status)
    window: dict[str, float] = {}
    async with (
        httpx.AsyncClient(
            base_url=info["gateway_url"], headers=headers, limits=limits, timeout=60
        ) as client,
        httpx.AsyncClient(base_url=info["gateway_url"], timeout=60) as control,
    ):
        # timers and CPU are read over a connection of their own, at the window's edges
        await control.get("/__bench/stats", params={"reset": "1"})
        t_begin = time.perf_counter()
        window["start"] = t_begin + warmup
        window["end"] = window["start"] + seconds

        async def worker(i: int) -> None:
            rng = random.Random(1000 + i)
            lean = LeanConnection(info["gateway_url"], headers) if client_kind == "lean" else None
            encoded = (
                [lean.request_bytes("POST", "/v1/chat/completions", b) for b in bodies]
                if lean is not None
                else []
            )
            try:
                while time.perf_counter() < window["end"]:
                    k = rng.randrange(len(bodies))
                    t0 = time.perf_counter()
                    try:
                        if lean is not None:
                            lr = await lean.send(encoded[k])
                            label, status = lr.headers.get("x-cachegate-cache", "-"), lr.status
                        else:
                            r = await client.post("/v1/chat/completions", content=bodies[k])
                            label, status = r.headers.get("x-cachegate-cache", "-"), r.status_code
                    except (httpx.HTTPError, LeanHttpError, OSError, EOFError) as exc:
                        label, status = f"error:{type(exc).__name__}", 0
                    t1 = time.perf_counter()
                    records.append((t1, (t1 - t0) * 1000, label, status))
            finally:
                if lean is not None:
                    await lean.close()

        async def measure() -> tuple[dict[str, Any], dict[str, Any]]:
            await asyncio.sleep(max(0.0, window["start"] - time.perf_counter()))
            await control.get("/__bench/stats", params={"reset": "1"})
            cpu = CpuWindow(info["server_pid"])
            extra = on_measure() if on_measure else None
            await asyncio.sleep(max(0.0, window["end"] - time.perf_counter()))
            timers = (await control.get("/__bench/stats")).json()
            n = sum(1 for r in records if window["start"] <= r[0] <= window["end"])
            out = cpu.close(n)
            if extra is not None:
                out["profiler"] = extra
            return out, timers

        results = await asyncio.gather(measure(), *(worker(i) for i in range(CLIENTS)))
    cpu, server_timers = results[0]
    measured = [r for r in records if window["start"] <= r[0] <= window["end"]]
    lat = [r[1] for r in measured]
    hit_lat = [r[1] for r in measured if r[2] == "semantic-hit"]
    labels = Counter(r[2] for r in measured)
    statuses = Counter(r[3] for r in measured)
    hits = labels.get("semantic-hit", 0)
    return {
        "clients": CLIENTS,
        "client": client_kind,
        "measured_s": seconds,
        "warmup_s": warmup,
        "requests": len(measured),
        "requests_per_s": round(len(measured) / seconds, 1),
        "semantic_hits_per_s": round(hits / seconds, 1),
        "hit_fraction": round(hits / max(1, len(measured)), 4),
        "latency_ms": summary(lat),
        "hit_latency_ms": summary(hit_lat),
        "labels": dict(labels),
        "statuses": {str(k): v for k, v in statuses.items()},
        "cpu": cpu,
        "server_timers_ms": server_timers,
        "server_requests_in_window": sum(
            v.get("n", 0) for k, v in server_timers.items() if k.startswith("asgi_total")
        ),
    }


async def replay_trace(
    info: dict[str, Any], trace: list[dict], workers: int, max_tokens: int
) -> dict[str, Any]:
    import httpx

    model = info["model"]
    headers = {"Authorization": f"Bearer {API_KEY}"}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(trace)):
        queue.put_nowait(i)
    rows: list[dict[str, Any] | None] = [None] * len(trace)
    done = 0
    t_start = time.perf_counter()
    cpu = CpuWindow(info["server_pid"])
    async with httpx.AsyncClient(
        base_url=info["gateway_url"], headers=headers, timeout=300
    ) as client:

        async def worker() -> None:
            nonlocal done
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                item = trace[i]
                body = chat_body(model, item["question"], max_tokens, SYSTEM_PROMPT)
                t0 = time.perf_counter()
                r = await client.post("/v1/chat/completions", json=body)
                dt = (time.perf_counter() - t0) * 1000
                row = {
                    "i": i,
                    "kind": item["kind"],
                    "status": r.status_code,
                    "ms": dt,
                    "cache": r.headers.get("x-cachegate-cache"),
                    "semantic": r.headers.get("x-cachegate-semantic"),
                    "similarity": r.headers.get("x-cachegate-similarity"),
                    "backfill": r.headers.get("x-cachegate-backfill"),
                }
                if r.status_code == 200:
                    data = r.json()
                    use = data.get("usage") or {}
                    row |= {
                        "prompt_tokens": int(use.get("prompt_tokens") or 0),
                        "completion_tokens": int(use.get("completion_tokens") or 0),
                        "cached_tokens": int(
                            (use.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                        ),
                        "finish_reason": data["choices"][0].get("finish_reason"),
                        "answer": data["choices"][0]["message"]["content"][:120],
                    }
                rows[i] = row
                done += 1
                if done % max(1, len(trace) // 10) == 0:
                    print(
                        f"  trace: {done}/{len(trace)} ({time.perf_counter() - t_start:.0f} s)",
                        flush=True,
                    )

        await asyncio.gather(*(worker() for _ in range(workers)))
    wall = time.perf_counter() - t_start
    ok = [r for r in rows if r is not None and r["status"] == 200]
    errors = Counter(r["status"] for r in rows if r is not None and r["status"] != 200)
    hits = [r for r in ok if r["cache"] == "semantic-hit"]
    engine = [r for r in ok if r["cache"] != "semantic-hit"]
    prompt_all = sum(r["prompt_tokens"] for r in ok)
    prompt_hits = sum(r["prompt_tokens"] for r in hits)
    prompt_eng = sum(r["prompt_tokens"] for r in engine)
    cached_eng = sum(r["cached_tokens"] for r in engine)
    by_outcome = {}
    for label in ("semantic-hit", "prefix-hit", "miss"):
        v = [r["ms"] for r in ok if r["cache"] == label]
        by_outcome[label] = summary(v, 1)
    by_kind = {}
    for kind in ("repeat", "paraphrase", "entity_changed"):
        rk = [r for r in ok if r["kind"] == kind]
        by_kind[kind] = {
            "requests": len(rk),
            "semantic_hits": sum(1 for r in rk if r["cache"] == "semantic-hit"),
            # a hit at similarity 1.0 served the same question's own earlier answer
            "hits_on_identical_question": sum(
                1
                for r in rk
                if r["cache"] == "semantic-hit" and float(r["similarity"] or 0) >= 0.9999
            ),
            "semantic_reasons": dict(Counter(r["semantic"] for r in rk).most_common(6)),
        }
    backfill = Counter(r["backfill"] for r in engine)
    return {
        "requests": len(trace),
        "ok": len(ok),
        "errors": {str(k): v for k, v in errors.items()},
        "wall_s": round(wall, 1),
        "workers": workers,
        "semantic": {
            "request_hit_rate": round(len(hits) / max(1, len(ok)), 4),
            "token_hit_rate": round(prompt_hits / max(1, prompt_all), 4),
            "hits": len(hits),
            "completion_tokens_served_from_cache": sum(r["completion_tokens"] for r in hits),
        },
        "prefix": {
            "requests_reaching_engine": len(engine),
            "request_hit_rate": round(
                sum(1 for r in engine if r["cached_tokens"] > 0) / max(1, len(engine)), 4
            ),
            "token_hit_rate": round(cached_eng / max(1, prompt_eng), 4),
            "prompt_tokens": prompt_eng,
            "cached_tokens": cached_eng,
        },
        "combined_prompt_tokens_not_prefilled": round(
            (prompt_hits + cached_eng) / max(1, prompt_all), 4
        ),
        "latency_by_outcome_ms": by_outcome,
        "by_kind": by_kind,
        "backfill": dict(backfill),
        "finish_reasons": dict(Counter(r["finish_reason"] for r in engine)),
        "cpu": cpu.close(len(trace)),
        "rows": rows,
    }
