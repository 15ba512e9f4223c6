"""Cost of one detokenizer step (``Detokenizer.push`` + ``delta``) vs output length.

The detokenizer runs on the engine thread, once per generated token of every running
request. It decodes a short window of trailing tokens each step (vLLM's incremental
detokenization); it used to re-decode the whole output, O(n²) over a request.
Tokenizer: the bundled SmolLM2-135M-Instruct's; text: English and Chinese.

    OMP_NUM_THREADS=1 python bench/detokenize.py [--tokens 8000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformers import AutoTokenizer

from prefix.model.loader import default_model_path
from prefix.model.tokenize import PromptEncoder

TEXT = "The quick brown fox jumps over the lazy dog. 数据库连接失败，请检查配置。 "


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=8000)
    args = ap.parse_args()
    path = Path(default_model_path())
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ids: list[int] = []
    while len(ids) < args.tokens:
        ids += tok.encode(TEXT * 200, add_special_tokens=False)
    ids = ids[: args.tokens]
    detok = PromptEncoder(tok).detokenizer(["</stop>"])
    marks = {n for n in (1000, 2000, 4000, 8000, 16000, 32000) if n <= args.tokens}
    started = last = time.perf_counter()
    print("tokens  mean us/step over the previous span")
    span_start = 0
    for n, t in enumerate(ids, 1):
        detok.push(t)
        detok.delta()
        if n in marks or n == args.tokens:
            now = time.perf_counter()
            print(f"{n:6d}  {1e6 * (now - last) / (n - span_start):8.1f}")
            last, span_start = now, n
    print(f"total {time.perf_counter() - started:.2f} s for {args.tokens} steps")


if __name__ == "__main__":
    main()
