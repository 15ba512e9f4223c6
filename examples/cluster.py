"""N gateways + M engines + PostgreSQL + Redis on one machine, as separate processes.

    python examples/cluster.py --gateways 2 --engines 2            # run until Ctrl-C
    python examples/cluster.py --gateways 2 --engines 2 --smoke    # start, check, stop

What it starts (every process is a plain ``cachegate`` command; see docs/deploy.md
for what changes on real hosts):

* M engines (``cachegate engine``) on ports 8101.. (``--engine-port``), each with
  its own KV pool, an L2 host tier, an L3 directory of its own and the shared L3
  in Redis. They share ``CACHEGATE_SERVER_SALT`` (so their block keys and record HMACs agree) and
  ``CACHEGATE_ENGINE_KEY`` (so only the gateways may choose a tenant namespace).
* N gateways (``cachegate serve``) on ports 8001.. (``--gateway-port``), all on
  one PostgreSQL database (tenants, keys, policies, semantic entries, samples,
  the change log that keeps their in-memory indexes in step), all routing to the
  M engines by consistent hashing of each prompt's first characters, failing over
  when one is down.

PostgreSQL and Redis are the ones already running (``--database-url``,
``--redis-url``). ``--smoke`` proves the cluster works end to end: a question
asked through gateway 1 is answered by an engine and stored; the same question
through gateway 2 is a semantic hit; invalidated through gateway 2, it misses on
gateway 1 again. Then engine 0 is stopped while it owns a prefix: the request
fails over to the next engine on the ring, which reads engine 0's KV blocks
from Redis instead of recomputing them. Logs go to ``--workdir``/<process>.log.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent / "cachegate"
# A question SmolLM2 answers briefly: only answers that finish ("stop") are stored.
SYSTEM = "Answer in one short sentence."
QUESTION = "What is the capital of France?"


def start(
    name: str, args: list[str], env: dict[str, str], workdir: Path
) -> subprocess.Popen[bytes]:
    log = (workdir / f"{name}.log").open("wb")
    print(f"starting {name}: cachegate {' '.join(args)}", flush=True)
    return subprocess.Popen(
        [str(BIN), *args], env=os.environ | env, stdout=log, stderr=subprocess.STDOUT
    )


def wait_ready(name: str, url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited with {proc.returncode}; see its log")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                print(f"  {name} ready at {url}", flush=True)
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{name} not ready after {timeout:.0f} s")


def ask(
    gateway: str, key: str, model: str, question: str = QUESTION, fresh: bool = False
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    if fresh:  # skip the semantic layer: this one must reach an engine
        headers["Cache-Control"] = "no-cache, no-store"
    r = httpx.post(
        f"{gateway}/v1/chat/completions",
        headers=headers,
        json={
            "model": model,
            "max_tokens": 96,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": question},
            ],
        },
        timeout=120,
    )
    r.raise_for_status()
    print(
        f"  {gateway}: x-cachegate-cache={r.headers.get('x-cachegate-cache')} "
        f"semantic={r.headers.get('x-cachegate-semantic')} "
        f"backfill={r.headers.get('x-cachegate-backfill')} "
        f"replica={r.headers.get('x-cachegate-replica')} "
        f"cached_tokens={r.headers.get('x-cachegate-cached-tokens')}",
        flush=True,
    )
    return r


def failover(gateway: str, key: str, model: str, engine0: subprocess.Popen[bytes]) -> None:
    """Find a question the ring sends to engine 0, stop engine 0, ask it again."""
    countries = "Italy Spain Peru Japan Kenya Chile Norway Egypt Ghana Nepal Cuba Iran Fiji Laos"
    for country in countries.split():  # the ring is deterministic: 14 misses ~ 1 in 16,000
        # long enough that its second KV block holds words of this question only
        question = f"Which city is the capital of {country}? Give only the name of that city."
        if ask(gateway, key, model, question, fresh=True).headers["x-cachegate-replica"] != "0":
            continue
        print("  stopping engine-0", flush=True)
        engine0.terminate()
        engine0.wait(30)
        r = ask(gateway, key, model, question, fresh=True)
        assert r.headers["x-cachegate-replica"] != "0", r.headers
        # Engine 1 never saw this question: beyond the shared first block (system
        # prompt), its blocks can only come from engine 0, through Redis.
        assert int(r.headers["x-cachegate-cached-tokens"]) > 16, r.headers
        print("failover: OK (the next engine reused engine-0's blocks from Redis)", flush=True)
        return
    raise SystemExit("no question routed to engine 0")


def smoke(gateways: list[str], key: str, admin: str, model: str, sync_wait: float) -> None:
    first, second = gateways[0], gateways[-1]
    assert ask(first, key, model).headers["x-cachegate-cache"] != "semantic-hit"
    deadline = time.monotonic() + sync_wait
    while ask(second, key, model).headers["x-cachegate-cache"] != "semantic-hit":
        if time.monotonic() > deadline:
            raise SystemExit("the entry stored through gateway 1 never hit on gateway 2")
        time.sleep(0.5)
    r = httpx.delete(
        f"{second}/admin/tenants/dev/cache",
        headers={"Authorization": f"Bearer {admin}"},
        timeout=30,
    )
    r.raise_for_status()
    print(f"  invalidated through {second}: {r.json()}", flush=True)
    deadline = time.monotonic() + sync_wait
    while ask(first, key, model).headers["x-cachegate-cache"] == "semantic-hit":
        if time.monotonic() > deadline:
            raise SystemExit("the invalidation through gateway 2 never reached gateway 1")
        time.sleep(0.5)
    print("smoke: OK", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gateways", type=int, default=2)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--database-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--workdir", type=Path, default=None, help="logs and L3 dirs (a temp dir)")
    ap.add_argument("--smoke", action="store_true", help="check the cluster, then stop it")
    ap.add_argument("--gateway-port", type=int, default=8001, help="first gateway port")
    ap.add_argument("--engine-port", type=int, default=8101, help="first engine port")
    ap.add_argument("--timeout", type=float, default=600, help="start-up limit per process (s)")
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cachegate-cluster-"))
    workdir.mkdir(parents=True, exist_ok=True)
    shared = {  # what every process of one deployment must agree on
        "CACHEGATE_SERVER_SALT": secrets.token_hex(16),
        "CACHEGATE_ENGINE_KEY": secrets.token_hex(16),
        "CACHEGATE_KV_REDIS_URL": args.redis_url,
    }
    admin, key = secrets.token_hex(16), f"sk-dev-{secrets.token_hex(12)}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        engines = []
        for i in range(args.engines):
            port = args.engine_port + i
            env = shared | {
                "CACHEGATE_HOST_TIER_MIB": "256",
                "CACHEGATE_KV_DISK_PATH": str(workdir / f"kv-engine-{i}"),
            }
            procs.append(start(f"engine-{i}", ["engine", "--port", str(port)], env, workdir))
            engines.append((f"engine-{i}", f"http://127.0.0.1:{port}", procs[-1]))
        for name, url, proc in engines:
            wait_ready(name, f"{url}/health", proc, args.timeout)
        upstreams = ",".join(url for _, url, _ in engines)
        model = httpx.get(f"{engines[0][1]}/v1/models", timeout=10).json()["data"][0]["id"]
        gateways = []
        for i in range(args.gateways):  # started together: migrations take a lock
            port = args.gateway_port + i
            env = shared | {
                "CACHEGATE_PORT": str(port),
                "CACHEGATE_DATABASE_URL": args.database_url,
                "CACHEGATE_DATA_DIR": str(workdir / f"gateway-{i}"),
                "CACHEGATE_UPSTREAM_URL": upstreams,
                "CACHEGATE_UPSTREAM_MODEL": model,
                "CACHEGATE_ADMIN_TOKEN": admin,
                "CACHEGATE_DEV_API_KEY": key,
            }
            # --dev: the tenant "dev" with the fixed key above (a development start)
            procs.append(start(f"gateway-{i}", ["serve", "--dev"], env, workdir))
            gateways.append((f"gateway-{i}", f"http://127.0.0.1:{port}", procs[-1]))
        for name, url, proc in gateways:
            wait_ready(name, f"{url}/ready", proc, args.timeout)
        urls = [url for _, url, _ in gateways]
        print(f"\ngateways: {', '.join(urls)}\nengines:  {upstreams}\nmodel: {model}")
        print(f"tenant key: {key}\nadmin token: {admin}\nlogs: {workdir}\n", flush=True)
        if args.smoke:
            smoke(urls, key, admin, model, sync_wait=10.0)
            if len(engines) > 1:
                failover(urls[0], key, model, engines[0][2])
            return 0
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
        try:
            while all(proc.poll() is None for proc in procs):
                time.sleep(1)
            print("a process exited; stopping the cluster", flush=True)
            return 1
        except KeyboardInterrupt:
            return 0
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
