"""Fairness between tenants in the engine (issue 14): tenant B's time to first token
while tenant A floods the engine, against B's unloaded value.

A real gateway in this process (uvicorn in a thread, SQLite, the in-process SmolLM2
engine, semantic layer off so every request reaches the engine); the clients in a
separate process (asyncio + httpx), so their work does not share the gateway's GIL.
Tenant A keeps ``--flood`` long-prompt requests in flight (each a long document
plus a unique question; ``--unique-prompts`` makes the whole prompt unique, so
nothing of it is in the prefix cache); tenant B sends single streamed requests one
after another, each a unique short question, and times the first content chunk,
either back to back (the worst phase: each B request reaches the engine just after
one of A's steps began) or after a random think time (``--b-think-ms``: B's arrivals
spread over A's steps, as independent users' are); one row per think time.
Both send ``Cache-Control: no-cache, no-store``.

Run for the default scheduler (round-robin admission across tenants, at most
``max_num_seqs_per_tenant=16`` running per tenant, prefill priority for a tenant with
nothing decoding) and with the per-tenant cap off (``0``); the goal is B's TTFT p50
under the flood within 2x of unloaded. The machine's load average goes in the JSON:
on a shared CPU box the ratio moves with it.

    python bench/fairness.py                 # → bench/results/fairness.json + a table
    python -m bench.fairness --flood 24 --b-requests 16 --caps 16 0 --b-think-ms 0 400
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/fairness.py`

from bench._common import RESULTS, environment

DOCUMENT = (
    "Northwind Bank service handbook. Transfers between Northwind accounts are instant. "
    "Transfers to other banks take one business day. International transfers in euros "
    "take up to three business days and cost five euros. Card disputes must be raised "
    "within sixty days of the transaction date. Branches open at nine and close at five "
    "on weekdays and at noon on Saturdays. Savings accounts pay interest monthly. "
)


@dataclass
class FairnessSpec:
    url: str
    model: str
    key_a: str
    key_b: str
    flood: int = 24  # A's requests in flight
    doc_repeats: int = 4  # A's prompt: the document this many times (~400 tokens at 4)
    a_max_tokens: int = 48
    unique_prompts: bool = False  # A's whole prompt unique (no prefix-cache reuse)
    b_requests: int = 8  # B's requests per phase (after one warm-up request)
    b_max_tokens: int = 4
    # B waits uniform [0, b_think_s] before each request (0: back to back). Back to back,
    # B's next request reaches the engine ~20 ms after A's next step began (the step
    # that finished B's last request is followed at once by another), so it always
    # waits for almost a whole A step: the worst phase. A think time spreads B's
    # arrivals over A's steps, as independent users' requests are.
    b_think_s: float = 0.0
    timeout: float = 300.0


def _body(model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
    }


async def _ttft(
    client: httpx.AsyncClient, spec: FairnessSpec, key: str, prompt: str, mt: int
) -> float:
    """Seconds to the first content chunk of one streamed request (read to the end)."""
    headers = {"Authorization": f"Bearer {key}", "Cache-Control": "no-cache, no-store"}
    t0 = time.perf_counter()
    first: float | None = None
    async with client.stream(
        "POST", "/v1/chat/completions", json=_body(spec.model, prompt, mt), headers=headers
    ) as r:
        if r.status_code != 200:
            raise RuntimeError(f"status {r.status_code}: {(await r.aread())[:200]!r}")
        async for line in r.aiter_lines():
            if first is None and line.startswith("data: {"):
                payload = json.loads(line[len("data: ") :])
                if any(c.get("delta", {}).get("content") for c in payload.get("choices", [])):
                    first = time.perf_counter() - t0
    if first is None:
        raise RuntimeError("no content chunk")
    return first


async def _b_phase(client: httpx.AsyncClient, spec: FairnessSpec, tag: str) -> list[float]:
    out = []
    think = random.Random(f"{tag}-{spec.b_think_s}")
    for i in range(spec.b_requests + 1):  # the first is a warm-up, not counted
        if spec.b_think_s:
            await asyncio.sleep(think.uniform(0, spec.b_think_s))
        q = f"[{tag}-{i}-{uuid.uuid4().hex[:6]}] In one word, what color is grass?"
        ttft = await _ttft(client, spec, spec.key_b, q, spec.b_max_tokens)
        if i:
            out.append(ttft)
    return out


async def _client(spec: FairnessSpec) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=spec.flood + 8)
    async with httpx.AsyncClient(base_url=spec.url, limits=limits, timeout=spec.timeout) as client:
        unloaded = await _b_phase(client, spec, "unloaded")
        stop = asyncio.Event()
        a_done = [0]
        a_ttft: list[float] = []

        async def flood_loop(j: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                question = f"Question {j}.{n}: how long does an international transfer take?"
                doc = DOCUMENT * spec.doc_repeats
                prompt = (
                    f"[{uuid.uuid4().hex}] {doc}\n{question}"
                    if spec.unique_prompts
                    else f"{doc}\n{question}"
                )
                a_ttft.append(await _ttft(client, spec, spec.key_a, prompt, spec.a_max_tokens))
                a_done[0] += 1

        tasks = [asyncio.create_task(flood_loop(j)) for j in range(spec.flood)]
        await asyncio.sleep(3.0)  # the flood is admitted and decoding
        t0 = time.perf_counter()
        loaded = await _b_phase(client, spec, "loaded")
        b_wall = time.perf_counter() - t0
        stop.set()
        await asyncio.gather(*tasks)
    return {
        "b_unloaded_ttft_s": unloaded,
        "b_loaded_ttft_s": loaded,
        "b_loaded_wall_s": round(b_wall, 2),
        "a_requests_completed": a_done[0],
        "a_ttft_p50_s": round(statistics.median(a_ttft), 3) if a_ttft else None,
    }


def _client_main(spec: FairnessSpec, out: Any) -> None:
    try:
        out.put(("ok", asyncio.run(_client(spec))))
    except BaseException as exc:
        out.put(("failed", f"{type(exc).__name__}: {exc}"))


def run_client(spec: FairnessSpec) -> dict[str, Any]:
    """The clients in a spawned process; their results."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_client_main, args=(spec, out), name="fairness-client")
    proc.start()
    try:
        status, value = out.get(timeout=spec.timeout * (spec.b_requests + 2) * 2)
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    if status != "ok":
        raise RuntimeError(f"the fairness client failed: {value}")
    return dict(value)


def measure(
    cap: int,
    loaded: Any,
    work_dir: Path,
    num_blocks: int = 1024,
    max_num_seqs: int = 32,
    **spec_args: Any,
) -> dict[str, Any]:
    """One gateway with ``max_num_seqs_per_tenant=cap`` (and ``max_num_seqs`` running in
    all, the gateway's default 32); B's TTFT unloaded and under A's flood."""
    from pydantic import SecretStr

    from gateway.admin.service import TenantAdmin
    from gateway.app import Components, create_app, engine_config
    from gateway.settings import Settings
    from prefix.serve.engine import PrefixEngine
    from tests.live_server import serving

    data_dir = work_dir / f"fairness-{cap}-{uuid.uuid4().hex[:6]}"
    salt = "fairness-bench"
    settings = Settings(
        _env_file=None,
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'gateway.db'}",
        dev_tenant=None,
        upstream_url=None,
        semantic_enabled=False,
        server_salt=SecretStr(salt),
        max_num_seqs=max_num_seqs,
        max_num_seqs_per_tenant=cap,
    )
    engine = PrefixEngine(engine_config(settings, salt, num_blocks=num_blocks), loaded)
    app = create_app(settings, Components(engine=engine))
    with serving(app) as url:
        admin = TenantAdmin(app.state.gateway.tenants, None, None)
        keys = []
        for label in ("a", "b"):
            tid = f"fair-{label}-{uuid.uuid4().hex[:6]}"
            admin.add_tenant("fairness", tid, None)
            keys.append(admin.issue_key("fairness", tid, "bench").key)
        model = app.state.gateway.upstream.models()[0]
        spec = FairnessSpec(url, model, keys[0], keys[1], **spec_args)
        raw = run_client(spec)
        engine_cap = engine.config.max_num_seqs_per_tenant
        priority_steps = engine.scheduler.num_priority_steps
    engine.close()
    p50_u = statistics.median(raw["b_unloaded_ttft_s"])
    p50_l = statistics.median(raw["b_loaded_ttft_s"])
    return {
        "max_num_seqs_per_tenant": cap,
        "engine_cap": engine_cap,
        "max_num_seqs": max_num_seqs,
        "b_ttft_p50_unloaded_ms": round(p50_u * 1000, 1),
        "b_ttft_p50_loaded_ms": round(p50_l * 1000, 1),
        "ratio": round(p50_l / p50_u, 2),
        "within_2x": p50_l <= 2 * p50_u,
        "priority_steps": priority_steps,  # B prefilled in steps without A's decodes
        "spec": {k: v for k, v in asdict(spec).items() if k not in ("url", "key_a", "key_b")},
        **raw,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        "| scheduler | B think time | B TTFT p50 unloaded | B TTFT p50 under A's flood | ratio"
        " | A done | load |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        name = (
            f"round-robin, cap {r['max_num_seqs_per_tenant']}"
            if r["max_num_seqs_per_tenant"]
            else "round-robin, no per-tenant cap"
        )
        think = r["spec"]["b_think_s"]
        print(
            f"| {name} | {f'0-{think * 1000:.0f} ms' if think else 'none'} "
            f"| {r['b_ttft_p50_unloaded_ms']:.0f} ms | {r['b_ttft_p50_loaded_ms']:.0f} ms"
            f" | {r['ratio']:.2f}x | {r['a_requests_completed']} | {r['loadavg_1m']:.1f} |"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--caps", type=int, nargs="+", default=[16, 0])
    p.add_argument("--flood", type=int, default=24)
    p.add_argument("--max-num-seqs", type=int, default=32)
    p.add_argument("--b-requests", type=int, default=16)
    p.add_argument(
        "--b-think-ms",
        type=float,
        nargs="+",
        default=[0.0, 400.0],
        help="B's think time before each request, uniform in [0, this]; one row per value",
    )
    p.add_argument("--doc-repeats", type=int, default=4)
    p.add_argument("--unique-prompts", action="store_true")
    p.add_argument("--out", type=Path, default=RESULTS / "fairness.json")
    args = p.parse_args(argv)
    import torch

    from prefix.model.dtype import resolve_dtype
    from prefix.model.loader import default_model_path, load_model

    dtype, reason = resolve_dtype("auto", torch.device("cpu"))  # the gateway's default
    print(f"engine dtype: {reason}", flush=True)
    loaded = load_model(default_model_path(), device="cpu", dtype=dtype, verbose=False)
    work = Path("/tmp/soak")
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    runs = [(cap, think) for cap in args.caps for think in args.b_think_ms]
    for i, (cap, think) in enumerate(runs, 1):
        print(
            f"[{i}/{len(runs)}] max_num_seqs_per_tenant={cap}, B think 0-{think:.0f} ms ...",
            flush=True,
        )
        row = measure(
            cap,
            loaded,
            work,
            max_num_seqs=args.max_num_seqs,
            flood=args.flood,
            b_requests=args.b_requests,
            doc_repeats=args.doc_repeats,
            unique_prompts=args.unique_prompts,
            b_think_s=think / 1000,
        )
        rows.append(row | {"loadavg_1m": round(os.getloadavg()[0], 2)})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "spec"}), flush=True)
    print_table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    env = environment() | {"loadavg": list(os.getloadavg())}
    args.out.write_text(json.dumps({"environment": env, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
