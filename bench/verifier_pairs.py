"""Labelled question pairs for the pair verifier (bench/train_verifier.py, bench/verifier_eval.py).

Label 1 means "the two questions have the same correct answer". Every pair has
a ``kind`` (what it tests), a ``lang`` ("en" or "zh") and a ``split``:

``train`` / ``cal`` / ``eval`` are assigned by a hash of a *group* key, never of
the pair, so nothing crosses: BANKING77 and CLINC150 are split by intent (an
eval intent's questions are never seen in training, neither as positives nor
as hard negatives: both sides of a pair come from one split's intents), MeanCache
by main question, PAWS-X by connected component of sentences (two pairs that
share a sentence, in either language file, land in one split).

Kinds: ``paraphrase`` (nearest same-intent question whose values agree, 1),
``paraphrase_random`` (a random one, 1), ``surface`` (case/punctuation/polite
prefix, 1), ``hard`` (nearest question of another intent, 0), ``unrelated``
(random other intent, 0), ``entity`` (one value substituted, 0), ``polarity``,
``direction``, ``word_order`` (bench/verifier_perturb.py, 0), ``context``
(MeanCache follow-up vs a main question or another follow-up, 0) and ``paws``
(PAWS-X dev, label as given). Chinese pairs are PAWS-X zh plus ``entity``,
``polarity``, ``direction``, ``surface`` and ``unrelated`` pairs built from the
PAWS-X zh sentences, and, from the Chinese translations of BANKING77 and CLINC150
questions (bench/data/zh_intent_questions.jsonl, bench/verifier_pairs_zh.py; only
when ``build_pairs`` is given a Chinese embedder), ``paraphrase``,
``paraphrase_random``, ``hard`` and ``unrelated`` pairs and the same rewrites,
split by the English intent's key: a Chinese eval intent is an English eval
intent, never trained on in either language.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench import verifier_pairs_zh as zh_intents
from bench import verifier_perturb as perturb
from bench.semantic_pairs import (
    DATA_DIR,
    Question,
    apply,
    context_pairs,
    intent_pairs,
    load_banking77,
    load_clinc150,
    load_conversations,
    normalized,
    substitute_value,
)

SPLITS = ("train", "cal", "eval")
# Fractions of groups per split: calibration and evaluation need enough
# negatives of every kind to measure a 1% misfire rate.
_FRACTIONS = (0.6, 0.2, 0.2)
Embed = Callable[[Sequence[str]], NDArray[np.float32]]


@dataclass(frozen=True)
class VPair:
    a: str
    b: str
    label: int
    kind: str
    lang: str
    split: str
    source: str


def report_lang(p: VPair) -> str:
    """The language a report files a pair under: ``zhw`` for the pairs of the questions
    written in Chinese, apart from the translated ones (bench/verifier_pairs_zh.py);
    training and calibration see both as ``zh``."""
    return zh_intents.WRITTEN if zh_intents.is_written(p.source) else p.lang


def split_of(group: str, salt: str = "verifier-v1") -> str:
    h = int.from_bytes(hashlib.sha256(f"{salt}:{group}".encode()).digest()[:8], "big") / 2**64
    return SPLITS[0] if h < _FRACTIONS[0] else SPLITS[1] if h < sum(_FRACTIONS[:2]) else SPLITS[2]


def _intent_kinds(questions: list[Question], embed: Embed, rng: random.Random) -> list[VPair]:
    out: list[VPair] = []
    by_split: dict[str, list[Question]] = {s: [] for s in SPLITS}
    for q in questions:
        by_split[split_of(f"{q.source}:{q.intent}")].append(q)
    for split, pool in by_split.items():
        vectors = embed([q.text for q in pool])
        found = intent_pairs(
            pool, vectors, n_positive=10**9, n_hard=10**9, seed=rng.randrange(2**31)
        )
        for kind, name in (
            ("positive", "paraphrase"),
            ("positive_random", "paraphrase_random"),
            ("hard", "hard"),
        ):
            for p in found[kind]:
                out.append(
                    VPair(
                        p.query, p.cached, int(p.same_answer), name, "en", split, p.meta["source"]
                    )
                )
        for q in pool:
            other = pool[rng.randrange(len(pool))]
            if other.intent != q.intent:
                out.append(VPair(q.text, other.text, 0, "unrelated", "en", split, q.source))
    return out


def _rewrites(text: str, lang: str, split: str, source: str, rng: random.Random) -> list[VPair]:
    out: list[VPair] = []
    sub = substitute_value(text, rng)
    if sub is not None and normalized(apply(text, sub)) != normalized(text):
        out.append(VPair(text, apply(text, sub), 0, "entity", lang, split, source))
    changed = {
        "direction": perturb.direction(text),
        "word_order": perturb.word_order(text),
        "polarity": perturb.polarity(text, rng),
    }
    for kind, new in changed.items():
        if new is not None and normalized(new) != normalized(text):
            out.append(VPair(text, new, 0, kind, lang, split, source))
    if rng.random() < 0.15:
        out.append(VPair(text, perturb.surface(text, rng), 1, "surface", lang, split, source))
    return out


def _context_kind(embed: Embed, rng: random.Random) -> list[VPair]:
    conversations = load_conversations()
    out: list[VPair] = []
    for split in SPLITS:
        convs = [c for c in conversations if split_of(f"meancache:{normalized(c.main)}") == split]
        if len(convs) < 2:
            continue
        mains, follows = embed([c.main for c in convs]), embed([c.followup for c in convs])
        pairs, _ = context_pairs(convs, mains, follows, n=10**9, seed=rng.randrange(2**31))
        out += [VPair(p.query, p.cached, 0, "context", "en", split, "meancache") for p in pairs]
        for c in convs:
            out += _rewrites(c.main, "en", split, "meancache", rng)
    return out


def _components(rows: list[dict[str, object]]) -> list[str]:
    """Per row, a name of its connected component (rows sharing a sentence)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for r in rows:
        ra, rb = find(normalized(str(r["a"]))), find(normalized(str(r["b"])))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(normalized(str(r["a"]))) for r in rows]


def pawsx_pairs(seed: int = 0, data_dir: Path = DATA_DIR) -> list[VPair]:
    """The PAWS-X pairs (both languages) with their rewrites and splits, without the
    embedder-built intent pairs: quick enough for a test to build from the shared data."""
    return _pawsx(random.Random(seed), data_dir)


def _pawsx(rng: random.Random, data_dir: Path) -> list[VPair]:
    out: list[VPair] = []
    for lang in ("en", "zh"):
        path = data_dir / "pawsx" / f"pawsx.{lang}.dev.jsonl"
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        groups = _components(rows)
        sentences: dict[str, list[str]] = {s: [] for s in SPLITS}
        for r, g in zip(rows, groups, strict=True):
            split = split_of(f"pawsx:{lang}:{g}")
            out.append(VPair(r["a"], r["b"], int(r["label"]), "paws", lang, split, f"pawsx-{lang}"))
            sentences[split].append(r["a"])
        if lang != "zh":
            continue
        # Chinese rewrites and unrelated pairs, from each split's own sentences.
        for split, texts in sentences.items():
            for text in texts:
                out += _rewrites(text, "zh", split, "pawsx-zh", rng)
                other = texts[rng.randrange(len(texts))]
                if normalized(other) != normalized(text):
                    out.append(VPair(text, other, 0, "unrelated", "zh", split, "pawsx-zh"))
    return out


def _zh_splits(path: Path) -> dict[tuple[str, str], set[str]]:
    """The splits each question of a Chinese file sits in, by (dataset, ``zh_key``)."""
    out: dict[tuple[str, str], set[str]] = {}
    for q in zh_intents.load_zh_questions(path):
        out.setdefault((q.source, zh_intents.zh_key(q.zh)), set()).add(
            split_of(f"{q.source}:{q.intent}")
        )
    return out


def _zh_intent_kinds(
    embed: Embed,
    rng: random.Random,
    path: Path,
    tag: str = zh_intents.TRANSLATED,
    elsewhere: dict[tuple[str, str], set[str]] | None = None,
) -> list[VPair]:
    """Chinese intent pairs (bench/verifier_pairs_zh.py) and rewrites, per split, among
    one file's questions (``tag`` ends their source). A question that ``elsewhere``
    (another file's :func:`_zh_splits`) puts in another split is left out: the same
    text would be trained on in one split and measured in another."""
    by_split: dict[str, list[zh_intents.ZhQuestion]] = {s: [] for s in SPLITS}
    for q in zh_intents.load_zh_questions(path):
        split = split_of(f"{q.source}:{q.intent}")
        if (elsewhere or {}).get((q.source, zh_intents.zh_key(q.zh)), {split}) == {split}:
            by_split[split].append(q)
    out: list[VPair] = []
    for split, pool in by_split.items():
        if len(pool) < 2:
            continue
        for p in zh_intents.intent_pairs_zh(pool, embed([q.zh for q in pool]), rng, tag):
            out.append(VPair(p.a, p.b, p.label, p.kind, "zh", split, p.source))
        for q in pool:
            out += _rewrites(q.zh, "zh", split, f"{q.source}-{tag}", rng)
    return out


def drop_crossing(pairs: Sequence[VPair]) -> list[VPair]:
    """Pairs with a side whose text (normalized, within its source) also appears in
    another split are dropped: a rewrite can produce a real question of another
    intent ("lost card" -> "stolen card"), and one follow-up can belong to two
    conversations. Applied when building and again when evaluating."""
    splits: dict[tuple[str, str], set[str]] = {}
    for p in pairs:
        for t in (p.a, p.b):
            splits.setdefault((p.source, normalized(t)), set()).add(p.split)
    return [
        p
        for p in pairs
        if len(splits[(p.source, normalized(p.a))]) == 1
        and len(splits[(p.source, normalized(p.b))]) == 1
    ]


def build_pairs(
    embed: Embed,
    seed: int = 12,
    data_dir: Path = DATA_DIR,
    *,
    embed_zh: Embed | None = None,
    zh_questions: Path = zh_intents.ZH_QUESTIONS,
    zh_written: Path = zh_intents.ZH_WRITTEN,
) -> list[VPair]:
    """Every pair of every kind, deterministic for ``seed`` (given deterministic
    embedders); sides are put in a random order, duplicates dropped. ``embed`` finds
    the English neighbours, ``embed_zh`` the Chinese ones (without it, no Chinese
    intent pairs)."""
    rng = random.Random(seed)
    questions = load_banking77(data_dir) + load_clinc150(data_dir)
    pairs = _intent_kinds(questions, embed, rng)
    for q in questions:
        pairs += _rewrites(q.text, "en", split_of(f"{q.source}:{q.intent}"), q.source, rng)
    pairs += _context_kind(embed, rng)
    pairs += _pawsx(rng, data_dir)
    if embed_zh is not None:
        # Its own generator, and last: the pairs that were there before it stay the
        # same draws (and the final side shuffle below keeps their order).
        pairs += _zh_intent_kinds(embed_zh, random.Random(f"zh-intents:{seed}"), zh_questions)
        # The written questions are a pool of their own (pairs within the file, as
        # the translated ones), after them for the same reason.
        pairs += _zh_intent_kinds(
            embed_zh,
            random.Random(f"zh-written:{seed}"),
            zh_written,
            zh_intents.WRITTEN,
            elsewhere=_zh_splits(zh_questions),
        )
    pairs = drop_crossing(pairs)
    seen: set[tuple[str, frozenset[str]]] = set()
    out: list[VPair] = []
    for p in pairs:
        key = (p.kind, frozenset((normalized(p.a), normalized(p.b))))
        if key in seen or (normalized(p.a) == normalized(p.b) and p.label == 0):
            continue
        seen.add(key)
        a, b = (p.a, p.b) if rng.random() < 0.5 else (p.b, p.a)
        out.append(VPair(a, b, p.label, p.kind, p.lang, p.split, p.source))
    return out


def sample_train(pairs: Sequence[VPair], caps: dict[str, int], lang: str, seed: int) -> list[VPair]:
    """At most ``caps[kind]`` training pairs of each kind in ``lang``, drawn with ``seed``."""
    rng = random.Random(seed)
    out: list[VPair] = []
    for kind, cap in sorted(caps.items()):
        group = [p for p in pairs if p.split == "train" and p.lang == lang and p.kind == kind]
        out += rng.sample(group, cap) if len(group) > cap else group
    return out


def save(pairs: Sequence[VPair], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")


def load(path: Path) -> list[VPair]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [VPair(**json.loads(line)) for line in lines if line]
