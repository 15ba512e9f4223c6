"""prefix/serve/threads.py: a serving process keeps torch's intra-op pool in the engine
thread only. Run in a subprocess: reserving changes the main thread's setting for the
rest of the process, which the test session must not inherit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import asyncio, json, sys, threading
import torch
torch.set_num_threads(2)
from prefix.config import EngineConfig
from prefix.model.loader import load_model
from prefix.model.sampling import SamplingParams
from prefix.serve.async_engine import AsyncEngine
from prefix.serve.engine import PrefixEngine
from prefix.serve.threads import engine_thread_count, reserve_for_engine_thread
from tests.prefix.tiny_models import save_tiny_model

configured = None if sys.argv[2] == "none" else int(sys.argv[2])
before = engine_thread_count(configured)
reserved = reserve_for_engine_thread() if sys.argv[3] == "reserve" else None
again = reserve_for_engine_thread() if sys.argv[3] == "reserve" else None
main_after = torch.get_num_threads()
save_tiny_model(__import__("pathlib").Path(sys.argv[1]), "llama")
loaded = load_model(sys.argv[1], device="cpu", verbose=False)
engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=32, num_threads=configured), loaded)
seen = []
ae = AsyncEngine(engine, on_output=lambda out: seen.append(torch.get_num_threads()))
ae.start()
async def run():
    outs = ae.generate(engine.request([5, 6, 7], SamplingParams(max_tokens=3, ignore_eos=True)))
    return [o async for o in outs]
asyncio.run(run())
ae.shutdown()
print(json.dumps({"before": before, "reserved": reserved, "again": again,
                  "main_after": main_after, "engine_thread": sorted(set(seen)),
                  "main_end": torch.get_num_threads()}))
"""


def run(tmp_path: Path, configured: str, mode: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "m"), configured, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("configured", ["none", "1"])
def test_reserved_threads_go_to_the_engine_thread(tmp_path: Path, configured: str) -> None:
    got = run(tmp_path, configured, "reserve")
    assert got["reserved"] == 2 and got["again"] == 2  # idempotent: the first count stays
    assert got["main_after"] == 1 and got["main_end"] == 1  # the main thread keeps no pool
    # the engine thread runs with the reserved count, unless one is configured
    assert got["engine_thread"] == ([2] if configured == "none" else [1])


def test_without_reserving_the_engine_thread_keeps_torch_default(tmp_path: Path) -> None:
    # positive control for the above: nothing reserved, nothing configured -> the engine
    # thread sets nothing and the main thread keeps its pool
    got = run(tmp_path, "none", "plain")
    assert got["before"] is None and got["reserved"] is None
    assert got["main_after"] == 2 and got["main_end"] == 2
    assert got["engine_thread"] == [2]
