"""Intent questions on other topics, written for training only (bench/data/*_topic_intents.jsonl).

BANKING77 and CLINC150 give the verifier 129 training intents in a few
domains; on intents it never saw it serves sibling questions that share most
words ("how many vacation days do I have left" / "... have I used") and misses
paraphrases worded far apart. These pools add hundreds of intents from other
domains (telecom, shopping, health-care administration, schools and government
services, travel and housing, software and devices, general knowledge), in
English (``en_topic_intents.jsonl``, for the English cross-encoder) and in
Chinese (``zh_topic_intents.jsonl``, for the multilingual one). They are written
in clusters of four siblings that share a topic and most words but need
different answers, six wordings each (bench/data/README.md says who wrote them
and how); no cluster is about an intent of the calibration or evaluation split.

Every pair from them is in the ``train`` split: the calibration and evaluation
splits stay the shared data's, so a model trained with them is measured on
exactly the pairs the shipped one was. Pairs are built within a pool, as the
intent pairs of the shared data are (bench/semantic_pairs.py): per question its
nearest same-intent paraphrase, a random one and its nearest question of
another intent (``hard``), plus a random question of a sibling intent in its
cluster (``hard`` too: the near miss the pool was written for) and a random
question of another cluster (``unrelated``). Their source is ``topics-en`` /
``topics-zh``.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.semantic_pairs import Question, intent_pairs, normalized
from bench.verifier_pairs import VPair

DATA = Path(__file__).resolve().parent / "data"
TOPICS = {"en": DATA / "en_topic_intents.jsonl", "zh": DATA / "zh_topic_intents.jsonl"}
# Training pairs per kind a run draws from a pool, beside the shared data's own
# caps (bench/train_verifier.py, bench/train_verifier_zh.py).
CAPS = {"paraphrase": 5000, "paraphrase_random": 5000, "hard": 8000, "unrelated": 1000}
# The Chinese cross-encoder's steps cost four times the English one's (twelve layers
# to ten trainable instead of six): a smaller draw keeps its run under the hour.
ZH_CAPS = {"paraphrase": 1500, "paraphrase_random": 1000, "hard": 2500, "unrelated": 500}
Embed = Callable[[Sequence[str]], NDArray[np.float32]]


def source(lang: str) -> str:
    return f"topics-{lang}"


def load_questions(path: Path, lang: str) -> list[Question]:
    """One :class:`Question` per distinct question; the intent is ``cluster/intent``."""
    out: list[Question] = []
    seen: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        intent = f"{row['cluster']}/{row['intent']}"
        for text in row["questions"]:
            key = normalized(text).rstrip("？！。，、；： ")
            if text.strip() and key not in seen:
                seen.add(key)
                out.append(Question(text.strip(), intent, source(lang)))
    return out


def cluster_of(q: Question) -> str:
    return q.intent.partition("/")[0]


def topic_pairs(embed: Embed, lang: str, seed: int = 12, path: Path | None = None) -> list[VPair]:
    """Every training pair of one pool, deterministic for ``seed`` and ``embed``."""
    rng = random.Random(f"topics-{lang}:{seed}")
    pool = load_questions(path or TOPICS[lang], lang)
    found = intent_pairs(
        pool, embed([q.text for q in pool]), n_positive=10**9, n_hard=10**9, seed=seed
    )
    out = [
        VPair(p.query, p.cached, int(p.same_answer), name, lang, "train", source(lang))
        for kind, name in (
            ("positive", "paraphrase"),
            ("positive_random", "paraphrase_random"),
            ("hard", "hard"),
        )
        for p in found[kind]
    ]
    by_cluster: dict[str, list[Question]] = {}
    for q in pool:
        by_cluster.setdefault(cluster_of(q), []).append(q)
    clusters = sorted(by_cluster)
    for q in pool:
        siblings = [o for o in by_cluster[cluster_of(q)] if o.intent != q.intent]
        if siblings:
            other = siblings[rng.randrange(len(siblings))]
            out.append(VPair(q.text, other.text, 0, "hard", lang, "train", source(lang)))
        far = by_cluster[clusters[rng.randrange(len(clusters))]]
        other = far[rng.randrange(len(far))]
        if cluster_of(other) != cluster_of(q):
            out.append(VPair(q.text, other.text, 0, "unrelated", lang, "train", source(lang)))
    seen: set[tuple[str, frozenset[str]]] = set()
    unique: list[VPair] = []
    for p in out:
        key = (p.kind, frozenset((normalized(p.a), normalized(p.b))))
        if key not in seen:
            seen.add(key)
            a, b = (p.a, p.b) if rng.random() < 0.5 else (p.b, p.a)
            unique.append(VPair(a, b, p.label, p.kind, p.lang, p.split, p.source))
    return unique


def outside(pairs: Sequence[VPair], shared: Sequence[VPair]) -> list[VPair]:
    """The pool's pairs with neither side's text in the shared data's calibration or
    evaluation splits: a written question that happens to be a held-out one would be
    trained on and measured."""
    held = {normalized(t) for p in shared if p.split != "train" for t in (p.a, p.b)}
    return [p for p in pairs if normalized(p.a) not in held and normalized(p.b) not in held]


def sample(pairs: Sequence[VPair], caps: dict[str, int], seed: int) -> list[VPair]:
    """At most ``caps[kind]`` of the pool's pairs of each kind, drawn with ``seed``."""
    rng = random.Random(seed)
    out: list[VPair] = []
    for kind, cap in sorted(caps.items()):
        group = [p for p in pairs if p.kind == kind]
        out += rng.sample(group, cap) if len(group) > cap else group
    return out


def default_embed(lang: str) -> Embed:
    """The embedder that finds neighbours for the shared data's pairs of ``lang``:
    the bundled all-MiniLM-L6-v2 for English, multilingual-e5-small for Chinese."""
    if lang == "zh":
        from validators import verifier_zh

        return verifier_zh.E5Vectors().embed
    from bench.semantic_common import embed_batches
    from semantic import Embedder

    embedder = Embedder(cpu_threads=1, progress=True)
    return lambda texts: embed_batches(embedder, texts)


def training_pairs(shared: Sequence[VPair], lang: str, seed: int) -> list[VPair]:
    """A run's training sample of the ``lang`` pool (empty without its file)."""
    path = TOPICS[lang]
    if not path.exists():
        print(f"pairs: no {path.name}, so no topic pairs", file=sys.stderr)
        return []
    pairs = outside(topic_pairs(default_embed(lang), lang, seed, path), shared)
    return sample(pairs, ZH_CAPS if lang == "zh" else CAPS, seed)
