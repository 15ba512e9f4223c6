"""Gateway load benchmark: the markdown report printed from the results payload.
See bench/gateway_load.py.
"""

from __future__ import annotations

import math
from typing import Any

from bench.gateway_load_phases import PATH_NAMES
from bench.gateway_load_profile import CATEGORIES


def fmt(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}" if isinstance(v, float | int) else str(v)


def report(payload: dict[str, Any]) -> None:
    p1, p2, p3 = payload.get("phase1"), payload.get("phase2"), payload.get("phase3")
    micro = payload["in_process"]
    print("\n## cachegate gateway load (bench/gateway_load.py)\n")
    print(
        f"Machine: {payload['environment']['cpu_count']} cores shared by the client, the server "
        f"and other users (load average {payload['environment']['loadavg_start']} at start, "
        f"{payload['environment']['loadavg_end']} at end). Model {payload['server']['model']} "
        f"on {payload['server']['device']}.\n"
    )
    if p1:
        print(
            f"### 1. Miss path, one request at a time ({p1['samples_per_path']} per path, "
            f"interleaved; prompt {p1['request']['prompt_tokens']} tokens, max_tokens=1)\n"
        )
        print("| path | p50 ms | p90 ms | p99 ms | overhead p50 | overhead p99 | paired median |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for p, name in PATH_NAMES.items():
            s = p1["latency_ms"][p]
            o = p1["overhead_vs_direct_ms"].get(p)
            tail = (
                f"{o['p50_ms']:+.2f} | {o['p99_ms']:+.2f} | {o['paired_median_ms']:+.2f}"
                if o
                else "— | — | —"
            )
            print(f"| {name} | {s['p50']:.1f} | {s['p90']:.1f} | {s['p99']:.1f} | {tail} |")
        print("\n| semantic lookup cost | p50 ms | p99 ms |\n|---|---:|---:|")
        for label in (
            "embed_one_question",
            "index_search_top5",
            "lookup_miss_below_threshold",
            "lookup_hit",
            "record_hit_db_update",
            "store_embedding_given",
            "authenticate_cached",
        ):
            if label in micro:
                print(
                    f"| in-process {label} | {micro[label]['p50']:.2f} | "
                    f"{micro[label]['p99']:.2f} |"
                )
        lh = p1["lookup_cost_through_http_ms"]
        print(
            f"| through HTTP: lookup-miss − no-cache (p50 diff; paired median) | "
            f"{lh['p50_ms']:.2f}; {lh['paired_median_ms']:.2f} | — |"
        )
        b = p1["lookup_path_overhead_beyond_lookup_ms"]
        if "p50_ms" in b:
            lk = b["lookup_in_gateway_ms"]
            print(
                f"| in the gateway during this phase: cache.lookup | {lk['p50']:.2f} | "
                f"{lk['p99']:.2f} |"
            )
            print(
                f"\nLookup path minus each request's own lookup time, vs direct: p50 "
                f"{b['p50_ms']:+.2f} ms, p99 {b['p99_ms']:+.2f} ms, paired median "
                f"{b['paired_median_ms']:+.2f} ms."
            )
        g = payload["goals"]
        print(
            "\nOverhead beyond the lookup at p50: no-cache path "
            f"{g['nocache_overhead_p50_ms']:+.2f} ms; lookup path minus its lookup "
            f"{fmt(g['lookup_path_overhead_beyond_lookup_p50_ms'], 2)} ms "
            f"(goal ≤ {g['miss_overhead_goal_ms']} ms: "
            f"{'met' if g['miss_overhead_goal_met'] else 'NOT met'})."
        )
    if p2:
        print(
            f"\n### 2. Semantic hits, {p2['clients']} concurrent clients, "
            f"{p2['measured_s']:.0f} s (client and server on the same 2 cores)\n"
        )
        print(
            "| client | req/s | hits/s | hit fraction | p50 ms | p90 ms | p99 ms | "
            "server CPU ms/req | client CPU ms/req | other users' CPU s |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for w in (payload.get("phase2_by_client") or {"": p2}).values():
            s, c = w["latency_ms"], w["cpu"]
            print(
                f"| {w.get('client', 'httpx')} | {w['requests_per_s']:.1f} | "
                f"{w['semantic_hits_per_s']:.1f} | {w['hit_fraction']:.3f} | {s['p50']:.1f} | "
                f"{s['p90']:.1f} | {s['p99']:.1f} | {c['server_cpu_ms_per_request']:.1f} | "
                f"{c['client_cpu_ms_per_request']:.1f} | "
                f"{max(0.0, c['others_cpu_s']):.1f} of {c['machine_capacity_cpu_s']:.0f} |"
            )
        c = p2["cpu"]
        g = payload["goals"]
        print(f"\nGoal {g['hit_goal']}: {'met' if g['hit_goal_met'] else 'NOT met'}.")
        cost = c["server_cpu_ms_per_request"] + c["client_cpu_ms_per_request"]
        cores = payload["environment"]["cpu_count"] or 1
        print(
            f"\nThe server process used {c['server_cpu_s'] / c['wall_s']:.2f} cores, the client "
            f"{c['client_cpu_s'] / c['wall_s']:.2f}; the machine was "
            f"{c['machine_busy_cpu_s'] / c['machine_capacity_cpu_s']:.0%} busy. At "
            f"{cost:.1f} CPU ms per request (both sides), {cores} fully used cores would give "
            f"at most {cores * 1000 / cost:.0f} req/s. With {p2['clients']} closed-loop "
            f"clients, mean latency = clients / throughput (Little's law). Server requests "
            f"in the window: {p2['server_requests_in_window']}."
        )
        t = p2["server_timers_ms"]
        print("\nServer-side timers during the window (wall ms, mean / p50 / p99):\n")
        print("| timer | n | mean | p50 | p99 |\n|---|---:|---:|---:|---:|")
        for label, v in t.items():
            if v.get("n"):
                print(f"| {label} | {v['n']} | {v['mean']:.2f} | {v['p50']:.2f} | {v['p99']:.2f} |")
        prof = payload.get("profile")
        if prof and "server" in prof and "share_by_component" in prof["server"]:
            print("\npy-spy, share of samples (inclusive), server / client:\n")
            print("| component | server | client |\n|---|---:|---:|")
            srv = prof["server"]["share_by_component"]
            cli = prof.get("client", {}).get("share_by_component", {})
            for name, _ in CATEGORIES:
                if name in srv or name in cli:
                    print(f"| {name} | {srv.get(name, 0):.3f} | {cli.get(name, 0):.3f} |")
            print("\nHottest server stacks (leaf first, share of samples):\n")
            for stack, share in prof["server"]["top_stacks_leaf_first"][:6]:
                print(f"- {share:.3f} {stack}")
        gil = (prof or {}).get("server_gil", {})
        if "share_by_component" in gil:
            print(
                f"\npy-spy --gil on the server: the GIL was held "
                f"{gil['gil_held_fraction']:.0%} of the window; of those samples:\n"
            )
            print("| component (GIL holder) | share |\n|---|---:|")
            for name, _ in CATEGORIES:
                if name in gil["share_by_component"]:
                    print(f"| {name} | {gil['share_by_component'][name]:.3f} |")
            print("\nTop GIL-holding stacks (leaf first):\n")
            for stack, share in gil["top_stacks_leaf_first"][:8]:
                print(f"- {share:.3f} {stack}")
    if p3:
        print(
            f"\n### 3. Trace replay: {p3['requests']} requests, {p3['workers']} concurrent "
            f"clients, {p3['wall_s']:.0f} s\n"
        )
        print("| layer | request hit rate | token hit rate |\n|---|---:|---:|")
        print(
            f"| semantic (all requests) | {p3['semantic']['request_hit_rate']:.3f} | "
            f"{p3['semantic']['token_hit_rate']:.3f} |"
        )
        print(
            f"| prefix (the {p3['prefix']['requests_reaching_engine']} requests that reached "
            f"the engine) | {p3['prefix']['request_hit_rate']:.3f} | "
            f"{p3['prefix']['token_hit_rate']:.3f} |"
        )
        print(
            f"| both: prompt tokens not prefilled | — | "
            f"{p3['combined_prompt_tokens_not_prefilled']:.3f} |"
        )
        print("\n| outcome | n | mean ms | p50 ms | p90 ms |\n|---|---:|---:|---:|---:|")
        for label, v in p3["latency_by_outcome_ms"].items():
            if v.get("n"):
                print(f"| {label} | {v['n']} | {v['mean']:.0f} | {v['p50']:.0f} | {v['p90']:.0f} |")
        print(
            "\n| request kind | n | semantic hits | of which the same question (similarity 1.0) |"
            "\n|---|---:|---:|---:|"
        )
        for kind, v in p3["by_kind"].items():
            print(
                f"| {kind} | {v['requests']} | {v['semantic_hits']} | "
                f"{v['hits_on_identical_question']} |"
            )
        print(
            f"\nBackfills (requests that reached the engine): {p3['backfill']}; finish reasons "
            f"{p3['finish_reasons']}; errors {p3['errors'] or 'none'}."
        )
