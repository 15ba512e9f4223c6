"""Measure the TTFT teaching model's coefficients on the running engine."""

from __future__ import annotations

import statistics
import time

from prefix.lab.numbers import TTFTModel
from prefix.serve.engine import PrefixEngine


def measure_ttft_model(
    engine: PrefixEngine, lengths: tuple[int, ...] = (32, 128, 256, 512), repeats: int = 3
) -> TTFTModel:
    """Least-squares fit of TTFT(n) = fixed + per_token × n on cold prefills (no reuse).

    Each prompt uses a fresh namespace so nothing is reused; the median of
    ``repeats`` runs per length damps noise on a shared machine.
    """
    xs: list[float] = []
    ys: list[float] = []
    vocab = len(engine.encoder.tokenizer)
    for n in lengths:
        samples = []
        for r in range(repeats):
            tokens = [(97 * i + 13 * r + n) % (vocab - 10) + 5 for i in range(n)]
            t0 = time.perf_counter()
            engine.prefill_logits(tokens, namespace=f"measure-{n}-{r}-{time.time_ns()}")
            samples.append((time.perf_counter() - t0) * 1000)
        print(f"  prefill {n:>5} tokens: {statistics.median(samples):8.1f} ms", flush=True)
        xs.append(float(n))
        ys.append(statistics.median(samples))
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    return TTFTModel(fixed_ms=max(mean_y - slope * mean_x, 0.0), per_token_ms=slope)
