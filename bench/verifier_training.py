"""Fine-tuning the pair verifier's cross-encoder on CPU (used by bench/train_verifier.py).

The base is all-MiniLM-L6-v2 (6 layers, 384 wide) with a fresh one-logit head
on the pooled [CLS] token; the pair is read as ``[CLS] a [SEP] b [SEP]``. Each
epoch shows each pair once, in a random side order (the cache asks "same
answer?", a symmetric question), in batches of similar length (less padding:
on two shared cores padding is most of the cost).
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertForSequenceClassification, PreTrainedTokenizerBase

from bench.verifier_pairs import VPair


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 1
    batch_size: int = 32
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup: float = 0.06
    max_tokens: int = 96
    threads: int = 1
    seed: int = 12
    max_minutes: float = 25.0
    # Forward and backward matrix products in bfloat16 (weights, optimizer and loss
    # stay float32): ~1.5-2x a step on a CPU with AMX or AVX512-BF16, slower elsewhere.
    bf16_autocast: bool = False


def load_base(base_dir: Path) -> tuple[BertForSequenceClassification, PreTrainedTokenizerBase]:
    model = BertForSequenceClassification.from_pretrained(
        str(base_dir), num_labels=1, local_files_only=True
    )
    tokenizer = AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
    return model, tokenizer


def _batches(pairs: Sequence[VPair], cfg: TrainConfig, rng: random.Random) -> list[list[VPair]]:
    order = list(pairs)
    rng.shuffle(order)
    out: list[list[VPair]] = []
    chunk = cfg.batch_size * 50
    for lo in range(0, len(order), chunk):
        block = sorted(order[lo : lo + chunk], key=lambda p: len(p.a) + len(p.b))
        out += [block[i : i + cfg.batch_size] for i in range(0, len(block), cfg.batch_size)]
    rng.shuffle(out)
    return out


def train(
    model: BertForSequenceClassification,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Sequence[VPair],
    cfg: TrainConfig,
    targets: Mapping[tuple[str, str], float] | None = None,
) -> dict[str, float]:
    """Fine-tune in place; stops early (and says so) past ``cfg.max_minutes``.
    ``targets`` are soft labels by pair (a teacher's, bench/verifier_judge_teacher.py);
    the other pairs train on their labels."""
    targets = targets or {}
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = random.Random(cfg.seed)
    plan = [_batches(pairs, cfg, rng) for _ in range(cfg.epochs)]
    total = sum(len(b) for b in plan)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
    )
    warm = max(1, int(cfg.warmup * total))

    budget = cfg.max_minutes * 60

    def lr_at(step: int, elapsed: float) -> float:
        # Linear warm-up, then linear decay to zero at whichever comes first, the
        # last planned step or the time budget: a run cut short by a busy machine
        # still ends on a fully decayed learning rate.
        if step < warm:
            return cfg.lr * step / warm
        done = max((step - warm) / max(1, total - warm), elapsed / budget)
        return cfg.lr * max(0.0, 1.0 - done)

    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    started = time.perf_counter()
    step, running, stopped_early = 0, 0.0, False
    for epoch, batches in enumerate(plan):
        for batch in batches:
            sides = [(p.a, p.b) if rng.random() < 0.5 else (p.b, p.a) for p in batch]
            enc = tokenizer(
                [a for a, _ in sides],
                [b for _, b in sides],
                padding=True,
                truncation="longest_first",
                max_length=cfg.max_tokens,
                return_tensors="pt",
            )
            labels = torch.tensor([targets.get((p.a, p.b), float(p.label)) for p in batch])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16_autocast):
                logits = model(**enc).logits[:, 0]  # (batch, 1) -> (batch,)
            loss = loss_fn(logits.float(), labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step + 1, time.perf_counter() - started)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
            elapsed = time.perf_counter() - started
            if step % 20 == 0 or step == total:
                eta = elapsed / step * (total - step)
                print(
                    f"train: epoch {epoch + 1}/{cfg.epochs} step {step}/{total} "
                    f"loss {running:.4f} elapsed {elapsed / 60:.1f} min eta {eta / 60:.1f} min",
                    file=sys.stderr,
                    flush=True,
                )
            if elapsed > budget:
                stopped_early = True
                print(
                    f"train: time budget of {cfg.max_minutes} min reached at step {step}/{total}",
                    file=sys.stderr,
                    flush=True,
                )
                break
        if stopped_early:
            break
    model.eval()
    return {
        "steps": step,
        "planned_steps": total,
        "minutes": (time.perf_counter() - started) / 60,
        "final_loss": running if math.isfinite(running) else float("nan"),
        "stopped_early": float(stopped_early),
    }
