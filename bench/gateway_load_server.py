"""Gateway load benchmark, the server process (``gateway_load.py --_serve SPEC``).

Loads SmolLM2 and the embedder once, fills the semantic cache (``prepare``), times
the semantic layer in-process (``microbench``), instruments the gateway with timers,
then serves the engine server, the gateway and the gateway-over-HTTP on local ports
until the client closes its stdin. See bench/gateway_load.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.gateway_load_common import (
    API_KEY,
    PHASE2_ANSWER,
    READY,
    ROOT,
    TENANT,
    bench_keying,
    bench_query,
    chat_body,
    loadavg,
    summary,
)
from bench.gateway_load_hitprofile import apply_variant
from bench.gateway_load_prepare import fake_answer, prepare
from bench.gateway_load_profile import (
    TimedASGI,
    Timers,
    instrument_thread_pools,
    wrap_async,
    wrap_sync,
)


def _variant(cache: Any, app: Any, name: str) -> None:
    apply_variant(cache, name, app.state.gateway.pipeline)


def microbench(
    cache: Any,
    policy: Any,
    model: str,
    prep: dict,
    n: int,
    tenants: Any,
    keying: tuple[str, str],
) -> dict:
    """In-process costs of the semantic layer, measured before any server runs."""
    from datetime import UTC, datetime

    from semantic.question_vectors import memo_scope

    def q(text: str, max_tokens: int) -> Any:
        return bench_query(chat_body(model, text, max_tokens), keying)

    hits = prep["phase2"]["hit_questions"] or [prep["phase1"]["question"]]
    p2 = [q(hits[i % len(hits)], 24) for i in range(n)]
    miss = q(prep["phase1"]["question"], 1)
    out: dict[str, Any] = {}

    def run(label: str, fn: Callable[[int], Any]) -> None:
        fn(0)
        samples = []
        for i in range(n):
            t0 = time.perf_counter()
            fn(i)
            samples.append((time.perf_counter() - t0) * 1000)
        out[label] = summary(samples, 3)

    # the memo scope the gateway's lookups use (the query's namespace), so this warms it
    vec = cache._embed(memo_scope(miss), miss.question)
    key = cache.partition_key(miss)
    entry_id = cache.lookup(p2[0], policy).entry_id
    answer = fake_answer(model, PHASE2_ANSWER, 30)
    # backfill of a new question into a partition of its own (max_tokens=2), with the
    # vector from its lookup, as the gateway does after a miss
    fresh = [q(hits[i % len(hits)] + f" (case {i})", 2) for i in range(n + 1)]
    fresh_vecs = cache.embedder.embed([f.question for f in fresh])
    out["loadavg_before"] = loadavg()
    run("embed_one_question", lambda i: cache._embed(memo_scope(p2[i]), p2[i].question))
    for size in (8, 32):
        texts = [p.question for p in p2[:size]] * (size // max(1, len(p2[:size])) + 1)
        batch = texts[:size]
        run(f"embed_batch_of_{size}", lambda i, b=batch: cache.embedder.embed(b))
        out[f"embed_batch_of_{size}"]["per_question_p50"] = round(
            out[f"embed_batch_of_{size}"]["p50"] / size, 3
        )
    run("index_search_top5", lambda i: cache.index.search(key, vec, policy.top_k))
    run("lookup_miss_below_threshold", lambda i: cache.lookup(miss, policy))
    run("lookup_hit", lambda i: cache.lookup(p2[i], policy))
    if entry_id is not None:
        run(
            "record_hit_db_update",
            lambda i: cache.entries.record_hit(entry_id, at=datetime.now(UTC)),
        )
        run("get_many_one_row", lambda i: cache.entries.get_many([entry_id]))
    run(
        "store_embedding_given",
        lambda i: cache.store(fresh[i], answer, policy, embedding=fresh_vecs[i]),
    )
    run("authenticate_cached", lambda i: tenants.authenticate(API_KEY))
    out["loadavg_after"] = loadavg()
    return out


def engine_on(loaded: Any, settings: Any) -> Any:
    """A ``PrefixEngine`` built by ``gateway.app.build_engine`` (the gateway's own
    Settings -> EngineConfig mapping) on weights already loaded: engines built this way
    share the weights, each with its own KV pool."""
    import gateway.app

    salt = settings.server_salt.get_secret_value() if settings.server_salt else ""
    return gateway.app.build_engine(settings, salt, loaded=loaded)


def gateway_policy(settings: Any, cache: Any) -> tuple[Any, Any]:
    """The default tenant's semantic policy as the gateway decides it, and the verifier.

    The bench tenant has no policy row. With ``CACHEGATE_VERIFIER=on`` the policy gets
    the gateway's retrieval threshold and 1% cut and the cache gets the verifier, so
    the hit questions ``prepare`` picks are the ones the gateway serves (the first
    issue-15 run picked them by cosine alone and measured engine misses: 1.5 hits/s).
    Hand the verifier to ``Components`` so the app does not load a second one."""
    from dataclasses import replace

    from gateway.policy import TenantPolicy
    from semantic.embedder_routed import knobs_on_e5_scale, on_routed_scale

    tenant_policy = TenantPolicy()
    policy = tenant_policy.semantic_policy()
    if settings.verifier != "on":
        if knobs_on_e5_scale(cache.embedder):  # the knob is a MiniLM cosine (pipeline.py)
            policy = replace(policy, threshold=on_routed_scale(policy.threshold))
        return policy, None
    from gateway.verification import load_verifier, retrieval_threshold_for

    verifier = load_verifier(settings.verifier_threads)
    cache.verifier = verifier
    policy = replace(
        policy,
        threshold=retrieval_threshold_for(cache.embedder_id, knobs_on_e5_scale(cache.embedder)),
        verifier_cut=verifier.shipped_cut(tenant_policy.target_misfire_rate),
    )
    return policy, verifier


def serve_main(spec_path: str) -> None:
    """The server process: load, prepare, measure in-process, serve until stdin closes."""
    import torch
    from pydantic import SecretStr
    from sqlalchemy import create_engine

    import gateway.proxy.routes as routes
    from gateway.admin.service import TenantAdmin
    from gateway.app import Components, create_app
    from gateway.settings import Settings
    from gateway.tenants import TenantStore
    from gateway.verification import warm_chinese
    from migrations.runner import upgrade_database
    from prefix.model.dtype import resolve_dtype
    from prefix.model.loader import default_model_path, load_model
    from prefix.serve.server import create_engine_app
    from semantic import EntryStore, PartitionedIndex, SemanticCache
    from semantic.embedders import build_embedder
    from tests.live_server import serving
    from validators import Validator

    spec = json.loads(Path(spec_path).read_text())
    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - started:5.1f}s] {msg}", flush=True)

    tmp = Path(spec["tmp"])
    url = f"sqlite:///{tmp / 'cachegate.db'}"
    base = {
        "data_dir": tmp,
        "database_url": url,
        "dev_tenant": None,
        "server_salt": SecretStr("gateway-load-bench"),
        # The server process gets no CACHEGATE_* variable: the embedder comes in the spec.
        "embedder": spec.get("embedder", "auto"),
    }
    settings = Settings(_env_file=None, **base)  # type: ignore[call-arg]
    device = settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    say(f"loading SmolLM2 ({device}, {settings.dtype}) ...")
    loaded = load_model(
        settings.model_path or default_model_path(),
        device=device,
        dtype=resolve_dtype(settings.dtype, device)[0],
    )
    say("loading embedder ...")
    # The gateway's own choice (CACHEGATE_EMBEDDER; the default, auto, since session 26).
    embedder = build_embedder(
        settings.embedder,
        Path(settings.embedder_path) if settings.embedder_path else None,
        progress=False,
        backend=settings.embedder_backend,
    )
    upgrade_database(url)
    tenants = TenantStore(create_engine(url))
    admin = TenantAdmin(tenants, None, None)
    admin.add_tenant("bench", TENANT, "gateway load bench")
    admin.issue_key("bench", TENANT, "bench", API_KEY)
    cache = SemanticCache(
        embedder, EntryStore(url), PartitionedIndex(embedder.dim), validator=Validator()
    )
    if settings.verifier == "on":
        say("loading the pair verifier ...")
    policy, verifier = gateway_policy(settings, cache)
    if verifier is not None:
        # Under an embedder that reads Chinese the gateway loads the Chinese verifier at
        # start in the background; loaded here first, it stays out of the measured windows.
        warming = warm_chinese(verifier, embedder)
        if warming is not None:
            say("loading the Chinese pair verifier (as the gateway does at start) ...")
            warming.join()
    gw_engine = engine_on(loaded, settings)
    keying = bench_keying(tenants, gw_engine)
    say("preparing the semantic cache (phase-2 entries, paraphrase checks, trace) ...")
    prep = prepare(spec, cache, policy, loaded.model_id, keying)
    p2 = prep["phase2"]
    say(
        f"  stored {p2['stored']} questions; {p2['verified_hits']} of {p2['candidates']} "
        f"held-out paraphrases are verified hits; trace of {len(prep['phase3']['trace'])} requests"
    )
    say("in-process cost of the semantic layer (nothing else running) ...")
    micro = microbench(cache, policy, loaded.model_id, prep, spec["micro_n"], tenants, keying)
    for label, s in micro.items():
        if isinstance(s, dict):
            say(f"  {label}: p50 {s['p50']:.2f} ms, p99 {s['p99']:.2f} ms")
    say(f"  load average before/after: {micro['loadavg_before']} / {micro['loadavg_after']}")

    timers = Timers()
    timers.enabled = False
    for obj, name, label in (
        (cache, "lookup", "cache.lookup (in thread)"),
        (cache, "_embed", "embed"),
        (cache.index, "search", "index.search"),
        (cache.entries, "get_many", "db.get_many"),
        (cache.entries, "record_hit", "db.record_hit"),
        (cache.entries, "upsert", "db.upsert (backfill)"),
        (cache.validator, "check", "validator.check"),
        (cache.validator, "guard", "validator.guard"),
    ):
        wrap_sync(obj, name, timers, label)
    wrap_async(routes, "authenticate", timers, "authenticate (await, incl. thread hop)")
    instrument_thread_pools(timers)
    wrap_sync(routes, "_semantic_hit", timers, "build hit response")

    direct_engine = engine_on(loaded, settings)
    gw_app = create_app(
        settings,
        Components(engine=gw_engine, embedder=embedder, semantic_cache=cache, verifier=verifier),
    )
    say("starting the engine server and the gateways ...")
    with contextlib.ExitStack() as stack:
        engine_url = stack.enter_context(serving(create_engine_app(direct_engine)))
        gw_url = stack.enter_context(
            serving(TimedASGI(gw_app, timers, partial(_variant, cache, gw_app)))
        )
        http_settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            upstream_url=engine_url,
            upstream_model=loaded.model_id,
            semantic_enabled=False,
            **base,
        )
        gw_http_url = stack.enter_context(serving(create_app(http_settings)))
        state = gw_app.state.gateway
        wrap_async(state.pipeline, "lookup", timers, "pipeline.lookup (await, incl. thread hop)")
        # tenants of the running app are its own TenantStore: time that one too
        wrap_sync(state.tenants, "authenticate", timers, "tenants.authenticate (in thread)")
        timers.enabled = True
        info = {
            "engine_url": engine_url,
            "gateway_url": gw_url,
            "gateway_http_url": gw_http_url,
            "model": loaded.model_id,
            "device": device,
            "embedder": embedder.embedder_id,
            "torch_threads": torch.get_num_threads(),
            "default_thread_pool_workers": min(32, (os.cpu_count() or 1) + 4),
            "policy": {
                "threshold": policy.threshold,
                "guards": list(policy.guards),
                "top_k": policy.top_k,
                "ttl_seconds": policy.ttl_seconds,
                "verifier_cut": policy.verifier_cut,  # None: CACHEGATE_VERIFIER=off
            },
            "prepare": prep,
            "in_process": micro,
            "startup_s": round(time.perf_counter() - started, 1),
        }
        say("ready")
        print(READY + json.dumps(info), flush=True)
        sys.stdin.read()  # the client closes our stdin when it is done
        say("shutting down")


class ServerProcess:
    """The server subprocess (``script --_serve SPEC``), seen from the client: its output
    is echoed (prefixed); ``info`` once it is ready. Its environment drops every
    ``CACHEGATE_*`` variable, so settings reach it only through the spec."""

    def __init__(self, script: str, spec: dict[str, Any], tmp: Path) -> None:
        spec_path = tmp / "spec.json"
        spec_path.write_text(json.dumps(spec))
        env = {k: v for k, v in os.environ.items() if not k.startswith("CACHEGATE_")}
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.proc = subprocess.Popen(
            [sys.executable, script, "--_serve", str(spec_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=str(ROOT),
            env=env,
        )
        self.pid = self.proc.pid
        self.info: dict[str, Any] | None = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n").split("\r")[-1].rstrip()
            if line.startswith(READY):
                self.info = json.loads(line[len(READY) :])
                self._ready.set()
            elif line and "Warning" not in line:
                print(f"  server| {line[:200]}", flush=True)
        self._ready.set()

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        self._ready.wait(timeout)
        if self.info is None:
            self.close()
            raise SystemExit("the server process did not become ready")
        return self.info

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
