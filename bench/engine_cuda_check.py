"""The prefix engine on a CUDA device: one short check to run where a GPU is lent.

For each tiny random model variant of the tests (tests/prefix/tiny_models.py: Llama,
tied embeddings, Llama-3 and linear RoPE scaling, Qwen2 biases, Mistral's sliding
window), in float32 and bfloat16 on ``--device``:

* suffix-only prefill over cached paged blocks (16 of 23 tokens cached) against a full
  forward with prefix caching off: the reuse must be exact on the device too;
* the device's logits against the same engine on the CPU;
* two greedy requests batched together against each alone;
* the block pool's ``check_integrity()`` afterwards.

    python bench/engine_cuda_check.py [--device cuda] [--out FILE]

Needs torch with CUDA, transformers and starlette (no database, index or embedder),
so it runs on a bare GPU machine with the repository copied over. ``--device cpu`` is
a dry run of the script itself. Writes ``bench/results/engine_cuda_check.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel, load_model
from prefix.serve.engine import PrefixEngine
from protocol.sampling import SamplingParams
from tests.prefix.tiny_models import VARIANTS, save_tiny_model

RESULTS = Path(__file__).resolve().parent / "results" / "engine_cuda_check.json"
#: Allowed max |difference| of logits (O(1) here): cached vs full on one device, and
#: device vs CPU (other kernels, other summation orders; bfloat16 keeps 8 bits).
TOLERANCE = {
    torch.float32: {"cached": 1e-4, "cpu": 1e-3},
    torch.bfloat16: {"cached": 0.1, "cpu": 0.25},
}


def _engine(loaded: LoadedModel, caching: bool = True) -> PrefixEngine:
    config = EngineConfig(block_size=4, num_blocks=128, enable_prefix_caching=caching)
    return PrefixEngine(config, loaded=loaded)


def _batched(loaded: LoadedModel, prompts: list[list[int]], params: SamplingParams) -> list[Any]:
    engine = _engine(loaded)
    ids = [engine.add_request(engine.request(p, params)) for p in prompts]
    tokens: dict[str, list[int]] = {i: [] for i in ids}
    while engine.has_unfinished():
        for out in engine.step():
            tokens[out.request_id].extend(out.new_token_ids)
    engine.pool.check_integrity()
    return [tokens[i] for i in ids]


def check(variant: str, dtype: torch.dtype, device: str, root: Path) -> dict[str, Any]:
    directory = root / variant
    if not directory.exists():
        save_tiny_model(directory, variant)
    row: dict[str, Any] = {"variant": variant, "dtype": str(dtype).removeprefix("torch.")}
    kw: dict[str, Any] = {"dtype": dtype, "verbose": False, "cache_dir": root / "digests"}
    on_device = load_model(str(directory), device=device, **kw)
    on_cpu = load_model(str(directory), device="cpu", **kw)
    gen = torch.Generator().manual_seed(0)
    first = torch.randint(3, 128, (23,), generator=gen).tolist()
    second = first[:17] + torch.randint(3, 128, (6,), generator=gen).tolist()
    cached = _engine(on_device)
    cached.prefill_logits(first, namespace="g")
    logits, num_cached = cached.prefill_logits(second, namespace="g")
    full = _engine(on_device, caching=False).prefill_logits(second)[0]
    cpu = _engine(on_cpu, caching=False).prefill_logits(second)[0]
    if cached.kv_cache.kv.device.type != torch.device(device).type:
        raise RuntimeError(f"the KV cache is on {cached.kv_cache.kv.device}, not {device}")
    cached.pool.check_integrity()
    params = SamplingParams(max_tokens=12, temperature=0.0)
    alone = [_engine(on_device).generate(p, params).token_ids for p in (first, second)]
    tol = TOLERANCE[dtype]
    row |= {
        "cached_tokens": num_cached,
        "max_diff_cached_vs_full": float((logits.float() - full.float()).abs().max()),
        "max_diff_device_vs_cpu": float((full.float().cpu() - cpu.float()).abs().max()),
        "logit_scale": float(full.float().abs().max()),
        "batched_equals_alone": _batched(on_device, [first, second], params) == alone,
    }
    row["ok"] = bool(
        num_cached == 16
        and row["max_diff_cached_vs_full"] <= tol["cached"]
        and row["max_diff_device_vs_cpu"] <= tol["cpu"]
        and row["batched_equals_alone"]
    )
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    result: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device_name": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "checks": [],
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, variant in enumerate(VARIANTS):
            for dtype in (torch.float32, torch.bfloat16):
                try:
                    row = check(variant, dtype, args.device, Path(tmp))
                except Exception as e:  # one variant's failure must not hide the rest
                    name = str(dtype).removeprefix("torch.")
                    row = {"variant": variant, "dtype": name, "ok": False}
                    row["error"] = f"{type(e).__name__}: {e}"
                    row["trace"] = traceback.format_exc()[-2000:]
                result["checks"].append(row)
                print(f"[{i + 1}/{len(VARIANTS)}] {json.dumps(row)}", flush=True)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["all_ok"] = all(r["ok"] for r in result["checks"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"all ok: {result['all_ok']} in {result['seconds']} s; wrote {args.out}")
    return 0 if result["all_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
