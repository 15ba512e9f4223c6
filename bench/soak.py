"""Soak: many mixed requests against a real gateway, with a PostgreSQL and a Redis
outage in the middle, and checks that nothing leaks, grows or breaks (issue 14).

The gateway runs in this process (uvicorn in a thread) over real pieces: SmolLM2 in
the in-process engine with a small KV pool (so blocks are evicted) and the Redis L3
tier on (with a server salt), the bundled embedder, and a fresh PostgreSQL schema as
its database. PostgreSQL and Redis are reached through TCP forwarders this process
stops and starts (the outages). The load generator is a separate process
(bench/soak_client.py: asyncio + httpx, bounded concurrency), so its work does not
share the gateway's GIL. At the end (bench/soak_report.py):

* no response >= 500: the designed outage behaviour is to fail open (PostgreSQL down
  → known keys authenticate from the auth cache and the upstream answers, Redis down
  → L3 misses); the one designed 5xx is the 503 for an unknown key while PostgreSQL
  is down (it cannot be checked), counted apart;
* no leaked KV block: ``engine.pool.check_integrity()`` and no block held once idle;
* flat memory: the gateway process's RSS after the run within 10% of it after the
  warm-up;
* no stuck request: every client request finished within its timeout, and the
  engine has nothing running or waiting;
* every answer correct or a clean 4xx (a semantic hit returns exactly the answer
  the question's first miss returned; temperature 0).

    python -m bench.soak                      # 10,000 requests → bench/results/soak.json + .png
    python -m bench.soak --quick              # a 300-request smoke → bench/results/soak_quick.*

Needs PostgreSQL (127.0.0.1:5432, database ``test``, user postgres) and Redis
(127.0.0.1:6379).
"""

from __future__ import annotations

import argparse
import gc
import json
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench._common import RESULTS, environment
from bench.soak_client import ClientSpec, start_client
from bench.soak_report import plot, summarize, table

PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
PG_TARGET = ("127.0.0.1", 5432)
REDIS_TARGET = ("127.0.0.1", 6379)
#: When (fraction of the main phase done) each outage starts; Redis only after the
#: database is back, so the two windows never overlap.
OUTAGES = (("postgres", 0.35), ("redis", 0.6))


@dataclass
class SoakConfig:
    requests: int = 10_000  # all client requests: seed + warm-up + main
    warmup: int | None = None  # None: a tenth of the requests, within [60, 500]
    concurrency: int = 16
    seed: int = 0
    outage_seconds: float = 20.0
    num_blocks: int = 96  # KV blocks of 16 tokens: small, so blocks are evicted
    timeout: float = 120.0  # per client request
    work_dir: Path = Path("/tmp/soak")
    out: Path | None = field(default_factory=lambda: RESULTS / "soak.json")

    @property
    def warmup_requests(self) -> int:
        return self.warmup if self.warmup is not None else min(500, max(60, self.requests // 10))


@contextmanager
def pg_schema() -> Iterator[str]:
    """A fresh PostgreSQL schema for the gateway's database, dropped afterwards."""
    import psycopg

    schema = f"cg_soak_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


class RssSampler:
    """This process's RSS every ``interval`` seconds, in a thread."""

    def __init__(self, interval: float = 0.5) -> None:
        self.proc = psutil.Process()
        self.samples: list[tuple[float, int]] = []
        self.interval = interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.time(), self.proc.memory_info().rss))
            self.stop.wait(self.interval)

    def now(self) -> int:
        return int(self.proc.memory_info().rss)


def wait_idle(engine: Any, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while engine.num_running or engine.num_waiting:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def settled_rss(sampler: RssSampler, engine: Any) -> int:
    """RSS once the engine is idle and the garbage collected (a short pause first, so
    the gateway's background writers finish what the last requests queued)."""
    wait_idle(engine)
    time.sleep(2.0)
    gc.collect()
    return sampler.now()


def idle_state(engine: Any) -> dict[str, Any]:
    idle = wait_idle(engine)
    try:
        engine.pool.check_integrity()
        integrity = "ok"
    except AssertionError as exc:
        integrity = f"broken: {exc}"
    tiers = getattr(engine, "tiers", None)
    return {
        "reached_idle": idle,
        "running": engine.num_running,
        "waiting": engine.num_waiting,
        "integrity": integrity,
        "blocks_held": sum(
            1 for b in range(engine.pool.num_blocks) if engine.pool.ref_count(b) > 0
        ),
        "pool": engine.pool.stats(),
        "tiers": tiers.stats() if tiers is not None and hasattr(tiers, "stats") else None,
    }


def run_soak(
    cfg: SoakConfig,
    loaded: Any = None,
    embedder: Any = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the soak; returns the result (summary with its checks, server figures)."""
    from pydantic import SecretStr

    from gateway.admin.service import TenantAdmin
    from gateway.app import Components, create_app, engine_config
    from gateway.settings import Settings
    from prefix.model.loader import default_model_path, load_model
    from prefix.serve.engine import PrefixEngine
    from semantic import Embedder
    from tests.gateway.failure_peers import TcpForwarder
    from tests.live_server import serving

    began = time.time()
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    run_dir = cfg.work_dir / f"run-{uuid.uuid4().hex[:8]}"
    run_dir.mkdir()
    if loaded is None:
        say("loading SmolLM2 ...")
        loaded = load_model(default_model_path(), device="cpu", verbose=False)
    if embedder is None:
        say("loading the embedder ...")
        embedder = Embedder(progress=False)
    salt = f"soak-{uuid.uuid4().hex}"
    with (
        pg_schema() as schema,
        TcpForwarder(PG_TARGET) as pg,
        TcpForwarder(REDIS_TARGET) as redis,
    ):
        settings = Settings(
            _env_file=None,
            data_dir=run_dir,
            database_url=(
                f"postgresql+psycopg://postgres@127.0.0.1:{pg.port}/test"
                f"?options=-csearch_path%3D{schema}"
            ),
            dev_tenant=None,
            upstream_url=None,
            semantic_enabled=True,
            server_salt=SecretStr(salt),
            kv_redis_url=f"redis://127.0.0.1:{redis.port}/0",
            kv_redis_ttl_seconds=3600,
        )
        engine = PrefixEngine(engine_config(settings, salt, num_blocks=cfg.num_blocks), loaded)
        app = create_app(settings, Components(engine=engine, embedder=embedder))
        sampler = RssSampler()
        with serving(app) as url:
            sampler.thread.start()
            started = time.time()
            admin = TenantAdmin(app.state.gateway.tenants, None, None)
            keys = {}
            for label in ("tenant-a", "tenant-b"):
                tid = f"soak-{label}-{uuid.uuid4().hex[:6]}"
                admin.add_tenant("soak", tid, None)
                keys[label] = admin.issue_key("soak", tid, "soak").key
            spec = ClientSpec(
                url=url,
                model=app.state.gateway.upstream.models()[0],
                keys=keys,
                requests=cfg.requests,
                warmup=cfg.warmup_requests,
                seed=cfg.seed,
                concurrency=cfg.concurrency,
                timeout=cfg.timeout,
                out=str(run_dir / "records.jsonl"),
                max_body_bytes=settings.body_limit(),
            )
            say(
                f"gateway at {url} (PostgreSQL schema {schema} via :{pg.port}, Redis via "
                f":{redis.port}, {cfg.num_blocks} KV blocks); client: {cfg.requests} requests, "
                f"concurrency {cfg.concurrency}"
            )
            server = drive(cfg, spec, engine, sampler, {"postgres": pg, "redis": redis}, say)
            server["idle"] = idle_state(engine)
            server["rss_after_run"] = settled_rss(sampler, engine)
            sampler.stop.set()
            server["started"] = started
            server["rss"] = sampler.samples
        engine.close()
    records = [json.loads(line) for line in Path(spec.out).read_text().splitlines()]
    summary = summarize(records, server)
    result = {
        "config": {
            "requests": cfg.requests,
            "warmup": cfg.warmup_requests,
            "concurrency": cfg.concurrency,
            "outage_seconds": cfg.outage_seconds,
            "num_blocks": cfg.num_blocks,
            "block_size": engine.config.block_size,
            "seed": cfg.seed,
            "database": "postgresql (fresh schema, through a TCP forwarder)",
            "kv_l3": "redis (through a TCP forwarder), server salt set",
        },
        "environment": environment() | {"loadavg_at_end": list(_loadavg())},
        "wall_s": round(time.time() - began, 1),
        "summary": summary,
        "server": server,
    }
    if cfg.out is not None:
        cfg.out.parent.mkdir(parents=True, exist_ok=True)
        cfg.out.write_text(json.dumps(result, indent=1) + "\n")
        png = plot(result, cfg.out.with_suffix(".png"))
        say(f"wrote {cfg.out} and {png}")
    return result


def drive(
    cfg: SoakConfig,
    spec: ClientSpec,
    engine: Any,
    sampler: RssSampler,
    forwarders: dict[str, Any],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Start the client, answer its phases, open and close the outages; the server side
    figures (RSS after warm-up, outage windows)."""
    proc, events, control = start_client(spec)
    server: dict[str, Any] = {"outages": []}
    pending = list(OUTAGES)
    current: dict[str, Any] | None = None
    t_main = time.time()
    done = False
    try:
        while not done:
            if current is not None and time.time() - current["start"] >= cfg.outage_seconds:
                forwarders[current["what"]].start()
                current["end"] = time.time()
                say(f"  {current['what']} back after {current['end'] - current['start']:.1f} s")
                current = None
            try:
                event = events.get(timeout=0.25)
            except queue.Empty:
                if not proc.is_alive():
                    raise RuntimeError(f"the load generator died (exit {proc.exitcode})") from None
                continue
            match event:
                case ("seeded", refs, n):
                    say(f"seed: {refs} of {n} repeated questions answered with a stop")
                case ("warm", n):
                    server["rss_after_warmup"] = settled_rss(sampler, engine)
                    server["warm_at"] = t_main = time.time()
                    rss = server["rss_after_warmup"] / 2**20
                    say(f"warm-up done ({n} requests); RSS {rss:.1f} MiB")
                    control.put("go")
                case ("progress", _phase, n, total, state):
                    rate = n / max(1e-6, time.time() - t_main)
                    say(
                        f"  {n}/{total} ({n / total:.0%}) {rate:.1f} req/s, not ok {state['bad']}"
                        f", 5xx {state['5xx']}, RSS {sampler.now() / 2**20:.0f} MiB, "
                        f"engine running {engine.num_running} waiting {engine.num_waiting}"
                    )
                    if current is None and pending and n / total >= pending[0][1]:
                        what = pending.pop(0)[0]
                        forwarders[what].stop()
                        current = {"what": what, "start": time.time(), "at_request": n}
                        server["outages"].append(current)
                        say(f"  {what} DOWN at {n}/{total}")
                case ("done", _path, n):
                    say(f"client finished: {n} requests")
                    done = True
                case ("failed", why):
                    raise RuntimeError(f"the load generator failed: {why}")
    finally:
        if current is not None:
            forwarders[current["what"]].start()
            current["end"] = time.time()
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    return server


def _loadavg() -> tuple[float, float, float]:
    import os

    return os.getloadavg()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--quick", action="store_true", help="a 300-request smoke")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--outage-seconds", type=float, default=None)
    p.add_argument("--num-blocks", type=int, default=96)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    requests = 300 if args.quick else args.requests
    cfg = SoakConfig(
        requests=requests,
        concurrency=args.concurrency,
        seed=args.seed,
        outage_seconds=args.outage_seconds or (6.0 if args.quick else 20.0),
        num_blocks=args.num_blocks,
        out=args.out or RESULTS / ("soak_quick.json" if args.quick else "soak.json"),
    )
    started = time.time()

    def say(msg: str) -> None:
        print(f"[{time.time() - started:7.1f}s] {msg}", flush=True)

    result = run_soak(cfg, say=say)
    print(table(result))
    checks = result["summary"]["checks"]
    for name, c in checks.items():
        print(f"{'PASS' if c['passed'] else 'FAIL'} {name}: {json.dumps(c)}")
    return 0 if all(c["passed"] for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
