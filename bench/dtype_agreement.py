"""Greedy outputs of the bundled SmolLM2 in bfloat16 vs float32 on a fixed prompt set.

Two agreement figures, because they answer different questions:
  * teacher-forced top-1 agreement: both dtypes read the SAME tokens (the fp32
    greedy continuation) and we count positions where their argmax agrees; one
    early flip does not make every later position count as a disagreement;
  * free-running: each dtype generates on its own; the fraction of generated
    tokens before the first difference, and how many continuations are identical.

bf16 weights are the fp32 ones rounded (``.to(bfloat16)``, as the loader does
after dequantizing the GGUF), so the only difference is the arithmetic.

    python bench/dtype_agreement.py [--tokens 32]   # prints, writes results/dtype_agreement.json
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prefix.model.forward_batch import ForwardBatch
from prefix.model.kv_cache import PagedKVCache
from prefix.model.llama import LlamaModel

BLOCK = 16
PROMPTS = (
    "What is the capital of France?",
    "Explain in two sentences why the sky is blue.",
    "Write a haiku about autumn leaves.",
    "How long does a bank transfer to another country usually take?",
    "List three uses of a paperclip.",
    "What is 17 times 23?",
    "Translate 'good morning' into Spanish and German.",
    "Give me a tip for learning to play the guitar.",
    "What does a CPU cache do?",
    "Summarize the plot of Romeo and Juliet in one sentence.",
    "Is a tomato a fruit or a vegetable?",
    "Suggest a name for a small coffee shop.",
)


@dataclass
class PromptAgreement:
    prompt: str
    fp32: list[int]
    bf16: list[int]
    teacher_forced_agree: int  # positions where bf16's argmax == fp32's on fp32's tokens
    common_prefix: int  # free-running tokens before the first difference


def chat_ids(tokenizer: Any, prompt: str) -> list[int]:
    messages = [{"role": "user", "content": prompt}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(ids, list):  # some transformers versions return a BatchEncoding
        ids = ids["input_ids"]
    return [int(t) for t in ids]


def _cache(model: LlamaModel, tokens: int) -> tuple[PagedKVCache, list[int]]:
    blocks = -(-tokens // BLOCK)
    cache = PagedKVCache.for_model(model.config, BLOCK, num_blocks=blocks, dtype=model.dtype)
    return cache, list(range(blocks))


def greedy(model: LlamaModel, prompt: list[int], n: int) -> list[int]:
    """Greedy continuation of ``n`` tokens: one prefill, then batched-decode steps."""
    cache, table = _cache(model, len(prompt) + n)
    logits = model(ForwardBatch.for_prefill(prompt, 0, table, BLOCK), cache)
    out = [int(logits[-1].argmax())]
    while len(out) < n:
        step = ForwardBatch.for_decode([out[-1]], [len(prompt) + len(out) - 1], [table], BLOCK)
        out.append(int(model(step, cache)[0].argmax()))
    return out


def teacher_forced(model: LlamaModel, prompt: list[int], continuation: list[int]) -> list[int]:
    """Argmax at each continuation position when reading ``prompt + continuation``."""
    tokens = prompt + continuation
    cache, table = _cache(model, len(tokens))
    batch = ForwardBatch.for_prefill(tokens, 0, table, BLOCK, all_logits=True)
    # rows len(prompt)-1 .. len(tokens)-2 predict the continuation's tokens
    logits = model(batch, cache)[len(prompt) - 1 : len(tokens) - 1]
    return [int(t) for t in logits.argmax(dim=-1)]


def compare(
    fp32: LlamaModel, bf16: LlamaModel, tokenizer: Any, prompts: tuple[str, ...], n: int
) -> tuple[list[PromptAgreement], dict[str, float]]:
    rows = []
    for text in prompts:
        ids = chat_ids(tokenizer, text)
        a, b = greedy(fp32, ids, n), greedy(bf16, ids, n)
        forced = teacher_forced(bf16, ids, a)
        common = next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), n)
        agree = sum(x == y for x, y in zip(forced, a, strict=True))
        rows.append(PromptAgreement(text, a, b, agree, common))
    total = n * len(rows)
    summary = {
        "teacher_forced_top1": sum(r.teacher_forced_agree for r in rows) / total,
        "free_running_prefix": sum(r.common_prefix for r in rows) / total,
        "identical_continuations": sum(r.fp32 == r.bf16 for r in rows) / len(rows),
    }
    return rows, summary


def bf16_copy(model: LlamaModel) -> LlamaModel:
    twin = copy.deepcopy(model).to(torch.bfloat16)
    twin.tie_weights()
    return twin


def main() -> None:
    from bench._common import environment, write_json
    from prefix.model.loader import default_model_path, load_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=32, help="greedy tokens per prompt")
    args = ap.parse_args()
    print("loading SmolLM2 (float32) ...", flush=True)
    loaded = load_model(default_model_path(), device="cpu", dtype=torch.float32, verbose=False)
    bf16 = bf16_copy(loaded.model)
    rows, summary = compare(loaded.model, bf16, loaded.tokenizer, PROMPTS, args.tokens)
    for r in rows:
        print(
            f"  {r.prompt[:48]:<48} forced {r.teacher_forced_agree:>2}/{args.tokens} "
            f"prefix {r.common_prefix:>2}/{args.tokens}",
            flush=True,
        )
    print(
        f"bf16 vs fp32 over {len(rows)} prompts x {args.tokens} tokens: "
        f"teacher-forced top-1 {summary['teacher_forced_top1']:.1%}, "
        f"free-running prefix {summary['free_running_prefix']:.1%}, "
        f"identical continuations {summary['identical_continuations']:.1%}"
    )
    write_json(
        "dtype_agreement",
        {
            "bench": "dtype_agreement",
            "model": loaded.model_id,
            "tokens_per_prompt": args.tokens,
            "environment": environment(),
            "summary": summary,
            "prompts": [asdict(r) for r in rows],
        },
    )


if __name__ == "__main__":
    main()
