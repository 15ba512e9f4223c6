"""Gateway load benchmark: timers and py-spy profiling.

Server side: ``Timers`` (wall-time samples per label), ``wrap_sync``/``wrap_async``
around gateway internals, the thread-pool queue-wait timer and ``TimedASGI`` (request
time by cache outcome, ``GET /__bench/stats``). Client side: py-spy windows of the
phase-2 load (``profiled_hit_load``) and their summary by component.
See bench/gateway_load.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.gateway_load_common import summary
from bench.gateway_load_phases import hit_load


class Timers:
    """Wall-time samples (ms) per label, collected from any thread while enabled."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.enabled = True

    def add(self, label: str, seconds: float) -> None:
        if self.enabled:
            self.samples[label].append(seconds * 1000)

    def reset(self) -> None:
        self.samples = defaultdict(list)

    def report(self, raw: bool = False) -> dict[str, Any]:
        if raw:
            return {k: [round(x, 3) for x in v] for k, v in self.samples.items()}
        out = {}
        for label, values in sorted(self.samples.items()):
            s = summary(list(values), 3)
            s["total_ms"] = round(sum(values), 1)
            out[label] = s
        return out


def wrap_sync(obj: Any, name: str, timers: Timers, label: str) -> None:
    original = getattr(obj, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            timers.add(label, time.perf_counter() - t0)

    setattr(obj, name, timed)


def wrap_async(obj: Any, name: str, timers: Timers, label: str) -> None:
    original = getattr(obj, name)

    async def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            timers.add(label, time.perf_counter() - t0)

    setattr(obj, name, timed)


def instrument_thread_pools(timers: Timers) -> None:
    """Time each task's wait in a ThreadPoolExecutor queue (asyncio.to_thread uses the
    loop's default executor: min(32, cores + 4) workers)."""
    from concurrent.futures import ThreadPoolExecutor

    original = ThreadPoolExecutor.submit

    def submit(self: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        queued = time.perf_counter()

        def run(*a: Any, **k: Any) -> Any:
            timers.add("thread pool: queue wait", time.perf_counter() - queued)
            return fn(*a, **k)

        return original(self, run, *args, **kwargs)

    ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]


class TimedASGI:
    """Server-side request time (first call → last body byte sent), by cache outcome;
    ``GET /__bench/stats[?reset=1]`` returns (and optionally clears) every timer."""

    def __init__(
        self, app: Any, timers: Timers, on_variant: Callable[[str], None] | None = None
    ) -> None:
        self.app = app
        self.timers = timers
        self.state = app.state  # tests and lifespan code look at app.state
        # ``GET /__bench/variant?name=before|after`` switches the hit path (issue 15)
        self.on_variant = on_variant

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/__bench/variant" and self.on_variant is not None:
            name = scope.get("query_string", b"").decode().removeprefix("name=")
            self.on_variant(name)
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["path"] == "/__bench/stats":
            query = scope.get("query_string", b"")
            body = json.dumps(self.timers.report(raw=b"raw=1" in query)).encode()
            if b"reset=1" in query:
                self.timers.reset()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        t0 = time.perf_counter()
        label = "other"

        async def timed_send(message: Any) -> None:
            nonlocal label
            if message["type"] == "http.response.start":
                for k, v in message.get("headers", []):
                    if k == b"x-cachegate-cache":
                        label = v.decode()
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.timers.add(f"asgi_total[{label}]", time.perf_counter() - t0)

        await self.app(scope, receive, timed_send)


CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    # (name, substrings of a frame; a sample counts once per category, inclusive)
    ("cache.lookup (whole)", ("lookup (semantic/cache.py",)),
    ("embed (sentence-transformers + torch)", ("_embed (semantic/cache.py",)),
    ("  embed: BERT forward (torch)", ("BertModel.forward",)),
    ("  inspect.signature (per-call decorator work)", ("(inspect.py",)),
    (
        "  embed: tokenizer / count_tokens",
        ("count_tokens (semantic/embedder.py", "tokenize (sentence_transformers"),
    ),
    ("index.search (FAISS)", ("search (semantic/index.py",)),
    ("db.get_many (SQLite read)", ("get_many (semantic/store.py",)),
    ("db.record_hit (SQLite write)", ("record_hit (semantic/store.py",)),
    ("validator.check", ("check (validators/verify.py",)),
    ("authenticate", ("authenticate (gateway/tenants.py",)),
    ("route handler _handle (event loop part)", ("_handle (gateway/proxy/routes.py",)),
    ("parse_request (pydantic)", ("parse_request (prefix/serve/openai_adapter.py",)),
    ("build hit response (JSON)", ("_semantic_hit (gateway/proxy/routes.py",)),
    ("uvicorn / h11 HTTP", ("uvicorn/protocols", "h11/")),
    ("starlette / fastapi", ("starlette/", "fastapi/")),
    ("SQLAlchemy (any)", ("sqlalchemy/",)),
    ("all work in thread-pool workers", ("concurrent/futures/thread.py",)),
    (
        "all work on event-loop threads",
        ("asyncio/base_events.py", "asyncio/events.py", "asyncio/selector_events.py"),
    ),
    ("httpx (client)", ("httpx/", "httpcore/")),
    ("engine thread (idle loop)", ("_loop (prefix/serve/async_engine.py",)),
]


# Leaf frames of a thread that waits (select, a condition, an empty work queue); py-spy
# does not always classify them as idle.
IDLE_LEAVES = ("EpollSelector.select", "Condition.wait", "_worker (concurrent/futures/thread.py")


def summarize_profile(path: Path, top: int = 15) -> dict[str, Any]:
    """Share of py-spy samples per component (inclusive) and the hottest leaf frames."""
    total = 0
    cats: Counter = Counter()
    leaves: Counter = Counter()
    threads: Counter = Counter()
    stacks: Counter = Counter()
    idle = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        threads[frames[0].split(": ", 1)[-1] if frames[0].startswith("thread") else "?"] += n
        for name, keys in CATEGORIES:
            if any(k in f for f in frames for k in keys):
                cats[name] += n
        clean = [re.sub(r":\d+\)$", ")", f) for f in frames[1:]]
        leaves[clean[-1] if clean else "?"] += n
        stacks[" <- ".join(reversed(clean[-4:]))] += n
        if clean and clean[-1].startswith(IDLE_LEAVES):
            idle += n
    if not total:
        return {"samples": 0}
    share = {name: round(cats[name] / total, 3) for name, _ in CATEGORIES if cats[name]}
    return {
        "samples": total,
        "share_waiting_leaf": round(idle / total, 3),
        "share_by_component": share,
        "share_by_thread": {k: round(v / total, 3) for k, v in threads.most_common(8)},
        "top_leaf_frames": [[f, round(n / total, 3)] for f, n in leaves.most_common(top)],
        "top_stacks_leaf_first": [[f, round(n / total, 3)] for f, n in stacks.most_common(top)],
    }


PROFILE_RATE = 100  # samples per second


def start_profilers(
    py_spy: str, targets: dict[str, tuple[int, list[str]]], seconds: float, tmp: Path
) -> dict[str, tuple[subprocess.Popen, Path]]:
    procs = {}
    for name, (pid, extra) in targets.items():
        out = tmp / f"profile-{name}.txt"
        cmd = [py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
               "--rate", str(PROFILE_RATE), "--format", "raw", "--threads",
               "--output", str(out), *extra]  # fmt: skip
        procs[name] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT), out)
    return procs


async def profiled_hit_load(
    info: dict[str, Any], questions: list[str], seconds: float, py_spy: str, tmp: Path
) -> dict[str, Any]:
    """Two more windows of the same load: (a) py-spy on the server (threads running on a
    core) and on the client; (b) py-spy ``--gil`` on the server: only the thread that
    holds the GIL is sampled, so samples / (rate x seconds) is the share of time the GIL
    was held, and the stacks say which Python work serializes the process."""
    out: dict[str, Any] = {"rate_hz": PROFILE_RATE, "seconds": int(seconds)}
    windows = {
        "a": {"server": (info["server_pid"], []), "client": (os.getpid(), [])},
        "b": {"server_gil": (info["server_pid"], ["--gil"])},
    }
    for key, targets in windows.items():
        started: dict[str, Any] = {}

        def on_measure(targets: dict = targets, started: dict = started) -> str:
            started.update(start_profilers(py_spy, targets, seconds, tmp))
            return "py-spy"

        result = await hit_load(info, questions, seconds, 1.0, on_measure)
        out[f"load_{key}"] = {
            k: result[k]
            for k in ("requests_per_s", "semantic_hits_per_s", "hit_fraction", "latency_ms")
        }
        for name, (proc, path) in started.items():
            text = proc.communicate(timeout=seconds + 30)[0].decode("utf-8", "replace")
            if proc.returncode != 0 or not path.exists():
                out[name] = {"error": text[-500:]}
                continue
            out[name] = summarize_profile(path)
            if name == "server_gil":
                possible = PROFILE_RATE * int(seconds)
                out[name]["gil_held_fraction"] = round(out[name]["samples"] / possible, 3)
    return out
