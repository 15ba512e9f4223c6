"""Profile of the gateway's semantic-hit path, in-process (issue 15, part 5).

The gateway app (``create_app`` with the in-process SmolLM2 upstream, the real
embedder, a SQLite file) is driven through its ASGI interface by
``--clients`` concurrent tasks asking verified paraphrase hits (the phase-2
workload of bench/gateway_load.py, filled by ``gateway_load_prepare.prepare``).
cProfile runs on the event-loop thread for the whole window and, per call, in
the worker threads around ``SemanticCache.lookup`` and tenant authentication
(``asyncio.to_thread`` targets); the stats are merged and the top functions by
own time and by cumulative time are written to ``--output``. Also reports the
in-process hits/s of the window (with the profiler on: lower than without).

    .venv/bin/python bench/gateway_load_hitprofile.py --output OUT.txt [--before]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gateway_load_common import API_KEY, TENANT, bench_keying, chat_body, loadavg


class ThreadProfiles:
    """cProfile around calls made in worker threads, merged per variant into ``pstats.Stats``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._profiles: dict[str, list[cProfile.Profile]] = {}
        self.variant = "before"

    def wrap(self, obj: Any, name: str) -> None:
        original = getattr(obj, name)

        def profiled(*args: Any, **kwargs: Any) -> Any:
            variant = self.variant
            prof = cProfile.Profile()
            prof.enable()
            try:
                return original(*args, **kwargs)
            finally:
                prof.disable()
                with self._lock:
                    self._profiles.setdefault(variant, []).append(prof)

        setattr(obj, name, profiled)

    def clear(self) -> None:
        with self._lock:
            self._profiles.clear()

    def stats(self, variant: str) -> pstats.Stats | None:
        with self._lock:
            profiles = list(self._profiles.get(variant, []))
        if not profiles:
            return None
        merged = pstats.Stats(profiles[0])
        for prof in profiles[1:]:
            merged.add(prof)
        return merged


def apply_variant(cache: Any, name: str, pipeline: Any = None) -> None:
    """``before``: the hit path without session 13's changes (every hit reads its row
    from the database, the entry memo off, and every lookup runs in a lookup thread);
    ``after``: as shipped (the memo on, memory-only lookups on the event loop)."""
    after = name == "after"
    cache.entries.memo.clear()
    cache.entries.memo.size = 4096 if after else 0
    if pipeline is not None:
        pipeline.inline = after


def _top(stats: pstats.Stats, key: str, n: int) -> str:
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats(key).print_stats(n)
    return buf.getvalue()


async def _drive(app: Any, model: str, questions: list[str], clients: int, seconds: float) -> dict:
    import httpx

    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    labels: Counter[str] = Counter()
    hit: set[str] = set()
    latencies: list[float] = []
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gw", headers=headers, timeout=60
    ) as client:
        stop = time.perf_counter() + seconds

        async def one(k: int) -> None:
            i = k
            while time.perf_counter() < stop:
                body = chat_body(model, questions[i % len(questions)], 24)
                i += clients
                t0 = time.perf_counter()
                r = await client.post("/v1/chat/completions", json=body)
                latencies.append((time.perf_counter() - t0) * 1000)
                label = r.headers.get("x-cachegate-cache", str(r.status_code))
                labels[label] += 1
                if label == "semantic-hit":
                    hit.add(body["messages"][-1]["content"])
                # In-process, a hit decided from memory never suspends: without this one
                # client would run request after request and starve the other 31 (a
                # socket's next request always arrives in a later loop iteration).
                await asyncio.sleep(0)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(k) for k in range(clients)))
        wall = time.perf_counter() - t0
    latencies.sort()
    n = len(latencies)
    return {
        "requests": n,
        "wall_s": round(wall, 2),
        "hits_per_s": round(labels.get("semantic-hit", 0) / wall, 1),
        "labels": dict(labels),
        "p50_ms": round(latencies[n // 2], 2) if n else None,
        "p99_ms": round(latencies[min(n - 1, int(n * 0.99))], 2) if n else None,
        "hit_questions": sorted(hit),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--output",
        type=Path,
        default=Path("bench/results/hit_path_profile.txt"),
        help="written as <stem>_before / <stem>_after",
    )
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=5.0, help="per window")
    ap.add_argument("--rounds", type=int, default=3, help="windows per variant, interleaved")
    ap.add_argument("--top", type=int, default=35)
    ap.add_argument("--verifier", choices=["on", "off"], default="on", help="the setting")
    args = ap.parse_args()

    import torch
    from pydantic import SecretStr
    from sqlalchemy import create_engine

    from bench.gateway_load_prepare import prepare
    from bench.gateway_load_server import engine_on, gateway_policy
    from gateway.admin.service import TenantAdmin
    from gateway.app import Components, create_app
    from gateway.settings import Settings
    from gateway.tenants import TenantStore
    from migrations.runner import upgrade_database
    from prefix.model.dtype import resolve_dtype
    from prefix.model.loader import default_model_path, load_model
    from semantic import EntryStore, PartitionedIndex, SemanticCache
    from semantic.embedders import build_embedder
    from validators import Validator

    with tempfile.TemporaryDirectory(prefix="hit-profile-") as tmp_name:
        tmp = Path(tmp_name)
        url = f"sqlite:///{tmp / 'cachegate.db'}"
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            data_dir=tmp,
            database_url=url,
            dev_tenant=None,
            server_salt=SecretStr("gateway-load-bench"),
            verifier=args.verifier,
        )
        loaded = load_model(
            settings.model_path or default_model_path(),
            device="cpu",
            dtype=resolve_dtype(settings.dtype, "cpu")[0],
        )
        embedder = build_embedder(
            settings.embedder,
            Path(settings.embedder_path) if settings.embedder_path else None,
            progress=False,
            backend=settings.embedder_backend,
        )
        upgrade_database(url)
        tenants = TenantStore(create_engine(url))
        admin = TenantAdmin(tenants, None, None)
        admin.add_tenant("bench", TENANT, "hit path profile")
        admin.issue_key("bench", TENANT, "bench", API_KEY)
        cache = SemanticCache(
            embedder, EntryStore(url), PartitionedIndex(embedder.dim), validator=Validator()
        )
        policy, verifier = gateway_policy(settings, cache)
        spec = {
            "tmp": str(tmp),
            "seed": 0,
            "store_per_intent": 4,
            "candidates_per_intent": 4,
            "phase1_entries": 20,
            "phase2_max_tokens": 24,
            "topics": 12,
            "zipf": 1.1,
            "trace_requests": 20,
        }
        engine = engine_on(loaded, settings)
        prep = prepare(spec, cache, policy, loaded.model_id, bench_keying(tenants, engine))
        questions = prep["phase2"]["hit_questions"]
        app = create_app(
            settings,
            Components(
                engine=engine,
                embedder=embedder,
                semantic_cache=cache,
                verifier=verifier,
            ),
        )
        workers = ThreadProfiles()
        loop_profiles = {v: cProfile.Profile() for v in ("before", "after")}

        async def run() -> dict[str, list[dict]]:
            windows: dict[str, list[dict]] = {"before": [], "after": []}
            async with app.router.lifespan_context(app):
                state = app.state.gateway
                workers.wrap(cache, "lookup")
                workers.wrap(state.tenants, "authenticate")
                # warm-up: every question's vector into the cache's LRU, as in the load bench
                # The gateway's verifier (on by default) refuses some paraphrases that the
                # cache alone serves: measure only questions the gateway serves as hits.
                warm = await _drive(app, loaded.model_id, questions, args.clients, 3.0)
                served = warm["hit_questions"] or questions
                print(f"{len(served)} of {len(questions)} paraphrases are gateway hits")
                workers.clear()
                for r in range(args.rounds):
                    order = ("before", "after") if r % 2 == 0 else ("after", "before")
                    for v in order:
                        apply_variant(cache, v, state.pipeline)
                        workers.variant = v
                        load0 = loadavg()
                        prof = loop_profiles[v]
                        prof.enable()
                        w = await _drive(app, loaded.model_id, served, args.clients, args.seconds)
                        w.pop("hit_questions")
                        prof.disable()
                        w["loadavg_start"], w["loadavg_end"] = load0, loadavg()
                        windows[v].append(w)
                        print(f"round {r} {v}: {w}", flush=True)
                apply_variant(cache, "after", state.pipeline)
            return windows

        windows = asyncio.run(run())

    for v in ("before", "after"):
        loop_prof = loop_profiles[v]
        out = args.output.parent / f"{args.output.stem}_{v}{args.output.suffix}"
        lines = [
            f"# semantic-hit path profile, variant {v!r} ({apply_variant.__doc__})",
            f"# {args.clients} in-process ASGI clients, {args.rounds} windows of "
            f"{args.seconds:.0f} s interleaved with the other variant, cpus {os.cpu_count()}, "
            f"torch threads {torch.get_num_threads()}",
            *(f"# window: {w}" for w in windows[v]),
            "",
            "## event-loop thread, by own time",
            _top(pstats.Stats(loop_prof), "tottime", args.top),
            "## event-loop thread, by cumulative time",
            _top(pstats.Stats(loop_prof), "cumulative", args.top),
        ]
        thread_stats = workers.stats(v)
        if thread_stats is not None:
            lines += [
                "## worker threads (cache.lookup, tenants.authenticate), by own time",
                _top(thread_stats, "tottime", args.top),
                "## worker threads, by cumulative time",
                _top(thread_stats, "cumulative", args.top),
            ]
        out.write_text("\n".join(lines))
        print(f"wrote {out}")
    for v in ("before", "after"):
        hs = [w["hits_per_s"] for w in windows[v]]
        print(
            f"{v}: hits/s {hs}, p50 {[w['p50_ms'] for w in windows[v]]}, "
            f"p99 {[w['p99_ms'] for w in windows[v]]}"
        )


if __name__ == "__main__":
    main()
