"""Chinese intent questions for the pair verifier, translated from the shared English data.

The shared data has no Chinese customer questions (only PAWS-X zh, translated
Wikipedia sentences), so the verifier's Chinese path could not be trained or
measured on intent paraphrases. This script picks ``--per-intent`` questions of
every BANKING77 and CLINC150 (in-scope) intent, loaded as bench/semantic_pairs.py
loads them, and has a local instruction model translate each into Simplified
Chinese:

    python bench/translate_questions.py --gguf /tmp/zhgen/qwen.gguf [--per-intent 8]

- **Model**: any chat GGUF transformers can read; the committed file was made with
  Qwen2.5-Coder-1.5B-Instruct Q4_K_M (bench/data/README.md), dequantized to
  bfloat16 on the CPU. Nothing is downloaded.
- **Which questions**: per intent, the ``--per-intent`` questions with the smallest
  SHA-256 of their text (deterministic, and a larger K only adds questions), taken
  round-robin over intents (every intent's first question, then every second one),
  so a run cut short still covers every intent.
- **Decoding**: greedy, batches left-padded, short ``max_new_tokens``.
- **Checks** (:func:`clean`): the first line of the answer, quotes and labels
  stripped; refused when it has no Han character, is far longer than the
  question, holds an English word the question did not have, or drops one of the
  question's numbers. Refusals go to ``<out>.rejected.jsonl`` with the reason and
  are checked again at the next start (:func:`reclean`).
- **Resumable**: both files are appended to after every batch; questions already
  in either are skipped, so rerunning the command continues where it stopped.

Output: ``bench/data/zh_intent_questions.jsonl``, one ``{"source", "intent",
"en", "zh"}`` per line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.semantic_pairs import DATA_DIR, Question, load_banking77, load_clinc150

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "data" / "zh_intent_questions.jsonl"
# Short on purpose: on two CPU cores every prompt token costs as much as a generated
# one (~3 GFLOP), and a worked example (``--example``) made the prompt 103 tokens
# instead of 75 for 16 questions (108 s vs 120 s, no clear gain in quality).
SYSTEM = (
    "Translate the user's question into natural Simplified Chinese. Keep numbers "
    "and names. Output only the translation."
)
EXAMPLE = ("Can I send $50 to Spain?", "我可以汇50美元到西班牙吗？")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_LABEL = re.compile(r"^(?:translation|chinese|中文|翻译|译文)\s*[:：]\s*", re.I)
_QUOTES = "\"'“”‘’「」『』`"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pick(
    questions: Sequence[Question], per_intent: int, max_chars: int, by_intent: bool = False
) -> list[Question]:
    """``per_intent`` questions of at most ``max_chars`` characters of every (source,
    intent): round-robin over intents, or (``by_intent``) intent after intent in the
    order of a hash of their names, so that a run cut short has whole intents (the
    paraphrase pairs need two questions of one intent) of a deterministic random
    subset."""
    groups: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for q in questions:
        if len(q.text) <= max_chars:
            groups[(q.source, q.intent)].append(q)
    ranked = {k: sorted(v, key=lambda q: _digest(q.text))[:per_intent] for k, v in groups.items()}
    if by_intent:
        return [q for k in sorted(ranked, key=lambda k: _digest(":".join(k))) for q in ranked[k]]
    return [
        ranked[k][rank]
        for rank in range(per_intent)
        for k in sorted(ranked)
        if rank < len(ranked[k])
    ]


def _numbers(text: str) -> list[str]:
    return sorted(n.replace(",", "") for n in _NUMBER.findall(text))


def clean(english: str, answer: str) -> tuple[str | None, str]:
    """The translation, or None and why it is refused."""
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    text = _LABEL.sub("", lines[0]) if lines else ""
    text = text.strip().strip(_QUOTES).strip()
    if not _HAN.search(text):
        return None, "no_han"
    if len(text) > max(40, 2 * len(english)):
        return None, "too_long"
    kept = [w.casefold() for w in _LATIN_WORD.findall(english)]
    for word in _LATIN_WORD.findall(text):
        # A name or acronym kept as written ("Phoenix", "ATM" for "ATMs") is fine;
        # any other English left in ("被我卡 nick 了" for "nicked") is no translation.
        w = word.casefold()
        if w not in kept and not (word.isupper() and any(k.startswith(w) for k in kept)):
            return None, "english_left"
    missing = Counter(_numbers(english)) - Counter(_numbers(text))
    if missing:
        # Every number of the question must survive; the translation may add digits
        # for words ("April 1" -> "4月1日", "two" -> "2").
        return None, "numbers_changed"
    return text, ""


def reclean(out: Path, rejected: Path) -> int:
    """Move refused answers that :func:`clean` now accepts (its rules changed) into
    ``out``; the answers are greedy, so this is what a new run would write."""
    if not rejected.exists():
        return 0
    keep, moved = [], []
    for line in rejected.read_text(encoding="utf-8").splitlines():
        if not line:
            continue
        r = json.loads(line)
        zh, why = clean(r["en"], r["answer"])
        if zh is None:
            keep.append(json.dumps({**r, "reason": why}, ensure_ascii=False))
        else:
            row = {"source": r["source"], "intent": r["intent"], "en": r["en"], "zh": zh}
            moved.append(json.dumps(row, ensure_ascii=False))
    if moved:
        with out.open("a", encoding="utf-8") as fh:
            fh.write("".join(m + "\n" for m in moved))
    rejected.write_text("".join(k + "\n" for k in keep), encoding="utf-8")
    return len(moved)


def _done(*paths: Path) -> set[tuple[str, str, str]]:
    seen: set[tuple[str, str, str]] = set()
    for path in paths:
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line:
                    r = json.loads(line)
                    seen.add((r["source"], r["intent"], r["en"]))
    return seen


class Translator:
    """A chat GGUF through transformers, greedy, batched with left padding."""

    def __init__(
        self, gguf: Path, threads: int, max_new_tokens: int, example: bool = False
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        kw: dict[str, Any] = {"gguf_file": gguf.name}
        self.tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), **kw)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # float32, not bfloat16: this torch build's bfloat16 Linear ran 5x slower than
        # float32 on this CPU (19 vs 94 GFLOPS for a 512x1536x8960 product, 2 threads).
        self.model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), dtype=torch.float32, **kw
        )
        self.example = example
        self.model.eval()
        self.max_new_tokens = max_new_tokens
        self._torch = torch
        print(f"model: loaded {gguf.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    def prompt(self, english: str) -> str:
        shot = [
            {"role": "user", "content": EXAMPLE[0]},
            {"role": "assistant", "content": EXAMPLE[1]},
        ]
        messages = [
            {"role": "system", "content": SYSTEM},
            *(shot if self.example else []),
            {"role": "user", "content": english},
        ]
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return str(text)

    def translate(self, texts: Sequence[str]) -> list[str]:
        enc = self.tokenizer([self.prompt(t) for t in texts], return_tensors="pt", padding=True)
        with self._torch.inference_mode():
            out = self.model.generate(
                **enc,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new = out[:, enc["input_ids"].shape[1] :]
        return [str(s) for s in self.tokenizer.batch_decode(new, skip_special_tokens=True)]


def _batches(items: Sequence[Question], size: int) -> Iterator[list[Question]]:
    for lo in range(0, len(items), size):
        yield list(items[lo : lo + size])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", type=Path, required=True, help="the chat model's .gguf file")
    # 3 per intent (681 questions) is what ~25 minutes on two busy cores allowed:
    # ~2-5 s per question in float32 (bench/data/README.md).
    ap.add_argument("--per-intent", type=int, default=3)
    ap.add_argument(
        "--max-chars",
        type=int,
        default=90,
        help="skip longer questions: cached questions are short, and a long one costs "
        "several short ones' prefill and decoding",
    )
    ap.add_argument("--limit", type=int, default=None, help="translate at most this many")
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--max-minutes", type=float, default=None, help="stop (resumable) after")
    ap.add_argument("--example", action="store_true", help="add one worked example to the prompt")
    ap.add_argument(
        "--by-intent",
        action="store_true",
        help="whole intents one after another (hash order) instead of round-robin",
    )
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--data", type=Path, default=DATA_DIR)
    args = ap.parse_args(argv)
    rejected = args.out.with_suffix(".rejected.jsonl")
    if moved := reclean(args.out, rejected):
        print(f"{moved} refused answers pass the checks now: moved to {args.out}", file=sys.stderr)
    questions = load_banking77(args.data) + load_clinc150(args.data)
    chosen = pick(questions, args.per_intent, args.max_chars, args.by_intent)
    seen = _done(args.out, rejected)
    todo = [q for q in chosen if (q.source, q.intent, q.text) not in seen]
    print(f"{len(chosen)} chosen, {len(chosen) - len(todo)} done", file=sys.stderr)
    if args.limit is not None:
        todo = todo[: args.limit]
    if not todo:
        return 0
    translator = Translator(args.gguf, args.threads, args.max_new_tokens, args.example)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    started, n_ok, n_bad = time.perf_counter(), 0, 0
    # Similar lengths per batch: less padding, and no batch waits for one long
    # answer. Sorting inside windows of 6 batches keeps the round-robin order
    # (every intent early) roughly intact.
    window = args.batch * 6
    ordered = [
        q
        for lo in range(0, len(todo), window)
        for q in sorted(todo[lo : lo + window], key=lambda q: len(q.text))
    ]
    for batch in _batches(ordered, args.batch):
        answers = translator.translate([q.text for q in batch])
        with (
            args.out.open("a", encoding="utf-8") as good,
            rejected.open("a", encoding="utf-8") as bad,
        ):
            for q, answer in zip(batch, answers, strict=True):
                zh, why = clean(q.text, answer)
                row = {"source": q.source, "intent": q.intent, "en": q.text}
                if zh is None:
                    n_bad += 1
                    bad.write(
                        json.dumps({**row, "answer": answer, "reason": why}, ensure_ascii=False)
                        + "\n"
                    )
                else:
                    n_ok += 1
                    good.write(json.dumps({**row, "zh": zh}, ensure_ascii=False) + "\n")
        done = n_ok + n_bad
        elapsed = time.perf_counter() - started
        eta = elapsed / done * (len(ordered) - done)
        print(
            f"{done}/{len(ordered)} ({n_bad} refused) {done / elapsed:.2f} q/s, "
            f"eta {eta / 60:.1f} min; e.g. {batch[0].text!r} -> {answers[0].strip()[:40]!r}",
            file=sys.stderr,
            flush=True,
        )
        if args.max_minutes is not None and elapsed > args.max_minutes * 60:
            print("time limit reached; rerun to continue", file=sys.stderr)
            break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
