"""Chinese intent pairs for the pair verifier (used by bench/verifier_pairs.py).

The questions come from two files of bench/data/ (its README says how each was
made): ``zh_intent_questions.jsonl``, BANKING77 and CLINC150 questions translated
into Simplified Chinese by bench/translate_questions.py, and
``zh_written_questions.jsonl``, questions written in Chinese for each intent, not
translations. Each keeps its intent's ``source`` and ``intent``, and is split with
the same key as the English intent pairs (``split_of(f"{source}:{intent}")``),
so an eval intent is never trained on in either language. Pairs are made within
one file. Kinds, all ``lang "zh"``, source ``banking77-zh`` / ``clinc150-zh``
(translated) or ``banking77-zhw`` / ``clinc150-zhw`` (written; reports file them
under ``zhw``):

``paraphrase``        the nearest same-intent question (1)
``paraphrase_random`` a random same-intent question (1)
``hard``              the nearest question of another intent of the same dataset (0)
``unrelated``         a random question of another intent (0)

plus the rewrites bench/verifier_pairs.py makes of every question (``entity``,
``polarity``, ``direction``, ``word_order``, ``surface``). "Nearest" is by the
vectors ``embed`` returns (bench/train_verifier.py passes multilingual-e5-small,
the embedder a Chinese tenant uses). As for English (bench/semantic_pairs.py),
a same-intent pair is a positive only when the two questions' values agree; the
values are read off the English originals, which the translation kept
(bench/translate_questions.py refuses a translation whose numbers changed) and
which the value rules understand ("today", "$20", "3rd").
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.semantic_pairs import normalized, value_tokens

ROOT = Path(__file__).resolve().parents[1]
ZH_QUESTIONS = ROOT / "bench" / "data" / "zh_intent_questions.jsonl"
#: Questions written in Chinese for each intent (not translated; bench/data/README.md).
ZH_WRITTEN = ROOT / "bench" / "data" / "zh_written_questions.jsonl"
#: The tags of the two files' pairs: their source is ``banking77-zh`` / ``banking77-zhw``.
TRANSLATED, WRITTEN = "zh", "zhw"
Embed = Callable[[Sequence[str]], NDArray[np.float32]]


@dataclass(frozen=True)
class ZhQuestion:
    zh: str
    en: str
    intent: str
    source: str  # the English dataset: "banking77" or "clinc150"


def is_written(source: str) -> bool:
    """Whether a pair's ``source`` is one of the written questions' (``…-zhw``)."""
    return source.endswith(f"-{WRITTEN}")


def zh_key(text: str) -> str:
    """``normalized`` with full-width end punctuation folded too (它多少钱？ = 它多少钱)."""
    return normalized(text).rstrip("？！。，、；： ")


def load_zh_questions(path: Path = ZH_QUESTIONS) -> list[ZhQuestion]:
    """The translated questions, one per distinct Chinese text within a dataset
    (two English questions can translate alike; the first keeps it)."""
    if not path.exists():
        return []
    out: list[ZhQuestion] = []
    seen: set[tuple[str, str]] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line:
            continue
        r = json.loads(line)
        key = (r["source"], zh_key(r["zh"]))
        if key not in seen:
            seen.add(key)
            out.append(ZhQuestion(r["zh"], r["en"], r["intent"], r["source"]))
    return out


@dataclass(frozen=True)
class ZhPair:
    a: str
    b: str
    label: int
    kind: str
    source: str


def _unit(vectors: NDArray[np.floating]) -> NDArray[np.float32]:
    v = np.asarray(vectors, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def intent_pairs_zh(
    pool: Sequence[ZhQuestion],
    vectors: NDArray[np.floating],
    rng: random.Random,
    tag: str = TRANSLATED,
) -> list[ZhPair]:
    """``paraphrase``, ``paraphrase_random``, ``hard`` and ``unrelated`` pairs among
    ``pool`` (one split's questions of one file), one anchor at a time; each unordered
    pair of a kind once; ``tag`` ends their source."""
    if len(pool) != len(vectors):
        raise ValueError("one vector per question")
    unit = _unit(vectors)
    norms = np.asarray([zh_key(q.zh) for q in pool], dtype=object)
    intents = np.asarray([f"{q.source}:{q.intent}" for q in pool], dtype=object)
    sources = np.asarray([q.source for q in pool], dtype=object)
    values = np.asarray([" ".join(sorted(value_tokens(q.en))) for q in pool], dtype=object)
    sims = unit @ unit.T
    different = norms[:, None] != norms[None, :]
    same_intent = intents[:, None] == intents[None, :]
    positive_ok = same_intent & different & (values[:, None] == values[None, :])
    hard_ok = ~same_intent & different & (sources[:, None] == sources[None, :])
    out: list[ZhPair] = []
    seen: set[tuple[str, frozenset[str]]] = set()

    def add(kind: str, i: int, j: int, label: int) -> None:
        key = (kind, frozenset((str(norms[i]), str(norms[j]))))
        if key not in seen:
            seen.add(key)
            out.append(ZhPair(pool[i].zh, pool[j].zh, label, kind, f"{pool[i].source}-{tag}"))

    for i in range(len(pool)):
        options = np.flatnonzero(positive_ok[i])
        if len(options):
            add("paraphrase", i, int(options[np.argmax(sims[i, options])]), 1)
            add("paraphrase_random", i, int(options[rng.randrange(len(options))]), 1)
        options = np.flatnonzero(hard_ok[i])
        if len(options):
            add("hard", i, int(options[np.argmax(sims[i, options])]), 0)
        other = rng.randrange(len(pool))
        if not same_intent[i, other] and different[i, other]:
            add("unrelated", i, other, 0)
    return out
