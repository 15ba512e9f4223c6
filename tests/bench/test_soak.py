"""bench/soak.py, small: a few hundred mixed requests against a real gateway (SmolLM2
in-process with a small KV pool and the Redis L3 tier, the real embedder, a fresh
PostgreSQL schema), a PostgreSQL and a Redis outage in the middle, and every check
of the full soak: no 5xx, no leaked KV block, flat memory, nothing stuck, every
answer correct or a clean 4xx."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bench.soak import SoakConfig, run_soak
from bench.soak_report import table
from prefix.model.loader import LoadedModel
from semantic import Embedder

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


def reachable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


@pytest.fixture
def services() -> None:
    for name, port in (("PostgreSQL", 5432), ("Redis", 6379)):
        if not reachable(port):
            pytest.skip(f"{name} on 127.0.0.1:{port} is unreachable")


def test_small_soak_passes_every_check(
    services: None, smol_loaded: LoadedModel, embedder: Embedder, tmp_path: Path
) -> None:
    cfg = SoakConfig(
        requests=240, warmup=60, outage_seconds=4.0, work_dir=tmp_path, out=tmp_path / "soak.json"
    )
    result = run_soak(cfg, loaded=smol_loaded, embedder=embedder)
    summary = result["summary"]
    print(table(result))
    assert summary["requests"] == 240
    # every kind of request was sent, and the cache answered some of them
    assert set(summary["by_kind"]) == {"hit", "miss", "stream_full", "stream_cancel", "bad_input"}
    assert summary["semantic_hits"] > 0  # positive control for the reference comparison
    assert result["server"]["idle"]["pool"]["num_evictions"] > 0  # the small pool evicted
    failed = {name: c for name, c in summary["checks"].items() if not c["passed"]}
    assert not failed, (failed, summary["failures"][:5])
    assert (tmp_path / "soak.png").stat().st_size > 0
