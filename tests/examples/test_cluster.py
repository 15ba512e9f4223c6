"""The process-level example (examples/cluster.py): 2 gateways + 2 engines + PostgreSQL +
Redis as separate ``cachegate`` processes, checked end to end by its ``--smoke`` run.

This is the deployment docs/deploy.md describes, started exactly as an operator
would: a question stored through gateway 1 is a semantic hit through gateway 2,
and an invalidation through gateway 2 reaches gateway 1. The gateways start
together on a fresh schema, so their migrations race (and must not fail).
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


def _ephemeral_low() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux: 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_run(length: int) -> int:
    """The first of ``length`` consecutive free local ports, below the ephemeral range:
    the processes bind them only once their models are loaded (~40 s), and a port of
    that range was taken meanwhile by an outgoing connection (a database's, a model
    server's), so a gateway exited with "address already in use" (session 44)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(10_000, max(10_001, _ephemeral_low() - length))
        try:
            probes = [socket.create_server(("127.0.0.1", base + i)) for i in range(length)]
        except OSError:
            continue
        for probe in probes:
            probe.close()
        return base
    raise RuntimeError("no run of free ports")


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"cg_cluster_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def test_cluster_smoke(schema: str, tmp_path: Path) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    cmd = [
        sys.executable,
        str(ROOT / "examples" / "cluster.py"),
        "--gateways", "2",
        "--engines", "2",
        "--database-url", url,
        "--gateway-port", str(free_run(2)),
        "--engine-port", str(free_run(2)),
        "--workdir", str(tmp_path),
        "--timeout", "400",
        "--smoke",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in tmp_path.glob("*.log"))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}"
    out = done.stdout
    print(out)
    assert "smoke: OK" in out and "failover: OK" in out
    lines = [line for line in out.splitlines() if "x-cachegate-cache=" in line]
    assert "semantic-hit" not in lines[0]  # the first ask reached an engine
    assert any("semantic-hit" in line for line in lines)  # then hit through gateway 2
    # both gateways migrated the same fresh schema at once; neither failed
    for i in range(2):
        assert "Traceback" not in (tmp_path / f"gateway-{i}.log").read_text()
