"""Labelled question pairs for the semantic-cache evaluation (bench/semantic_eval.py).

Everything here is deterministic for a seed and needs no embedder: the builders
that pick nearest neighbours take the vectors as an argument (the evaluation
passes real all-MiniLM-L6-v2 vectors, the tests pass cheap fake ones).

Pair kinds (``Pair.kind``), each pair read as "``query`` arrives, ``cached`` is
the stored question whose answer would be served":

``positive``        same intent, same answer: for an anchor question, its most
                    similar question of the *same* intent (what a cache lookup
                    would meet first) whose **value tokens** agree (see
                    :func:`value_tokens`) and whose normalized text differs.
                    Same-intent pairs are not all paraphrases with the same
                    answer ("send $20" vs "send $500"): the value-token rule
                    keeps only pairs whose numbers, amounts, currencies, dates,
                    weekdays, months, relative days and am/pm agree (or that
                    have none). The rule is deliberately independent of the
                    ``validators`` package, so the validator's refusals on
                    positives are measured, not assumed away; negation is not
                    part of the rule ("card not working" and "card is broken"
                    have the same answer).
``positive_random`` same rule, but a random same-intent partner instead of the
                    nearest: a lower bound (many same-intent pairs are related
                    questions rather than paraphrases); reported, not a goal.
``hard``            neighbouring intents: for an anchor, its most similar question
                    of a *different* intent of the same dataset (BANKING77's
                    near-duplicate categories such as card_arrival vs
                    card_delivery_estimate come out this way). Texts are
                    deduplicated per dataset first (a text labelled with two
                    intents keeps its first label), so no pair is one text twice.
``entity``          a real question containing a value (number, amount, time,
                    date, ordinal day, year, weekday, month, relative day, long
                    identifier) paired with a copy in which exactly one value is
                    replaced by a different one (:func:`substitute_value`). The
                    two must not share an answer.
``context``         MeanCache follow-ups ("What are its types?") asked without
                    their main question. ``subkind`` says what they are paired
                    with: ``own_main`` (the conversation's main question),
                    ``other_main`` (the most similar main question of another
                    conversation) or ``other_followup`` (the most similar
                    follow-up of a conversation with a different main question;
                    textually identical follow-ups are excluded and counted:
                    asked bare they are the same question, and asked inside
                    their conversations only the partition key, which includes
                    the earlier turns, keeps them apart).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.semantic_data import (
    CONTEXT,
    DATA_DIR,
    ENTITY,
    HARD,
    KINDS,
    NEGATIVE_KINDS,
    POSITIVE,
    POSITIVE_RANDOM,
    Conversation,
    Pair,
    Question,
    load_banking77,
    load_clinc150,
    load_conversations,
    normalized,
    sample_per_intent,
)
from bench.semantic_values import (
    Substitution,
    apply,
    substitute_value,
    value_spans,
    value_tokens,
)

# The records, loaders and value rules live in bench/semantic_data.py and
# bench/semantic_values.py; they are re-exported here so that one import gives
# everything the pairs are made of.
__all__ = [
    "CONTEXT",
    "DATA_DIR",
    "ENTITY",
    "HARD",
    "KINDS",
    "NEGATIVE_KINDS",
    "POSITIVE",
    "POSITIVE_RANDOM",
    "Conversation",
    "Pair",
    "Question",
    "Substitution",
    "apply",
    "context_pairs",
    "entity_pairs",
    "intent_pairs",
    "load_banking77",
    "load_clinc150",
    "load_conversations",
    "normalized",
    "sample_per_intent",
    "substitute_value",
    "value_spans",
    "value_tokens",
]

# -- pair builders -------------------------------------------------------------------------


def _unit(vectors: NDArray[np.floating[Any]]) -> NDArray[np.float32]:
    v = np.asarray(vectors, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _best(sims: NDArray[np.float32], allowed: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Per row, the column with the highest similarity among ``allowed`` (-1 if none)."""
    masked = np.where(allowed, sims, -np.inf)
    best = masked.argmax(axis=1)
    best[~np.isfinite(masked[np.arange(len(best)), best])] = -1
    return best


def _take(pairs: list[Pair], n: int, rng: random.Random) -> list[Pair]:
    if len(pairs) > n:
        pairs = rng.sample(pairs, n)
    return pairs


def _same_source_blocks(pool: Sequence[Question]) -> dict[str, NDArray[np.int64]]:
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(pool):
        by_source[q.source].append(i)
    return {s: np.asarray(ix, dtype=np.int64) for s, ix in sorted(by_source.items())}


def intent_pairs(
    pool: Sequence[Question],
    vectors: NDArray[np.floating[Any]],
    *,
    n_positive: int,
    n_hard: int,
    seed: int,
    block: int = 1024,
) -> dict[str, list[Pair]]:
    """``positive`` (nearest same-intent, value tokens agree), ``positive_random``
    (random same-intent, value tokens agree) and ``hard`` (nearest other-intent of
    the same dataset) pairs from ``pool`` and its ``vectors`` (one row per question).
    Each unordered pair appears once; the direction (which side is cached) is random."""
    if len(pool) != len(vectors):
        raise ValueError("one vector per pool question")
    rng = random.Random(seed)
    unit = _unit(vectors)
    norms = [normalized(q.text) for q in pool]
    tokens = [value_tokens(q.text) for q in pool]
    found: dict[str, list[Pair]] = {POSITIVE: [], POSITIVE_RANDOM: [], HARD: []}
    seen: dict[str, set[frozenset[str]]] = {k: set() for k in found}

    def add(kind: str, i: int, j: int) -> None:
        key = frozenset((norms[i], norms[j]))
        if key in seen[kind]:
            return
        seen[kind].add(key)
        qi, ci = (i, j) if rng.random() < 0.5 else (j, i)
        meta = {
            "query_intent": pool[qi].intent,
            "cached_intent": pool[ci].intent,
            "source": pool[qi].source,
        }
        found[kind].append(Pair(kind, pool[qi].text, pool[ci].text, kind != HARD, meta=meta))

    def ids(values: Sequence[Any]) -> NDArray[np.int64]:
        table: dict[Any, int] = {}
        return np.asarray([table.setdefault(v, len(table)) for v in values], dtype=np.int64)

    for _source, idx in _same_source_blocks(pool).items():
        intents = ids([pool[i].intent for i in idx])
        toks = ids([tokens[i] for i in idx])
        texts = ids([norms[i] for i in idx])
        for lo in range(0, len(idx), block):
            rows = idx[lo : lo + block]
            sims = unit[rows] @ unit[idx].T
            different_text = texts[lo : lo + block, None] != texts[None, :]
            same_intent = intents[lo : lo + block, None] == intents[None, :]
            positive_ok = same_intent & different_text & (toks[lo : lo + block, None] == toks)
            hard_ok = ~same_intent & different_text
            best_pos = _best(sims, positive_ok)
            best_hard = _best(sims, hard_ok)
            for r, i in enumerate(rows):
                if best_pos[r] >= 0:
                    add(POSITIVE, int(i), int(idx[best_pos[r]]))
                    options = np.flatnonzero(positive_ok[r])
                    add(POSITIVE_RANDOM, int(i), int(idx[options[rng.randrange(len(options))]]))
                if best_hard[r] >= 0:
                    add(HARD, int(i), int(idx[best_hard[r]]))
    return {
        POSITIVE: _take(found[POSITIVE], n_positive, rng),
        POSITIVE_RANDOM: _take(found[POSITIVE_RANDOM], n_positive, rng),
        HARD: _take(found[HARD], n_hard, rng),
    }


def _water_fill(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Split ``n`` as evenly as possible over groups of the given sizes."""
    quota = dict.fromkeys(sizes, 0)
    left = n
    open_groups = sorted(sizes, key=lambda k: (sizes[k], k))
    while left > 0 and open_groups:
        share = max(1, left // len(open_groups))
        for k in list(open_groups):
            take = min(share, sizes[k] - quota[k], left)
            quota[k] += take
            left -= take
            if quota[k] >= sizes[k]:
                open_groups.remove(k)
            if left == 0:
                break
    return quota


def entity_pairs(questions: Sequence[Question], n: int, seed: int) -> list[Pair]:
    """Up to ``n`` (original, one value substituted) pairs from the questions that
    carry a value, spread as evenly as the data allows over substitution kinds (a
    plain sample would be dominated by "today"); the substituted copy is the query
    or the cached side at random."""
    rng = random.Random(seed)
    by_kind: dict[str, list[tuple[Question, Substitution]]] = defaultdict(list)
    for q in questions:
        sub = substitute_value(q.text, rng)
        if sub is not None and normalized(apply(q.text, sub)) != normalized(q.text):
            by_kind[sub.kind].append((q, sub))
    quota = _water_fill({k: len(v) for k, v in by_kind.items()}, n)
    chosen = [item for k in sorted(by_kind) for item in rng.sample(by_kind[k], quota[k])]
    rng.shuffle(chosen)
    out: list[Pair] = []
    for q, sub in chosen:
        changed = apply(q.text, sub)
        query, cached = (changed, q.text) if rng.random() < 0.5 else (q.text, changed)
        meta = {
            "query_intent": q.intent,
            "cached_intent": q.intent,
            "source": q.source,
            "substituted": "query" if query == changed else "cached",
            "old": sub.old,
            "new": sub.new,
        }
        out.append(Pair(ENTITY, query, cached, False, subkind=sub.kind, meta=meta))
    return out


def context_pairs(
    conversations: Sequence[Conversation],
    main_vectors: NDArray[np.floating[Any]],
    followup_vectors: NDArray[np.floating[Any]],
    n: int,
    seed: int,
) -> tuple[list[Pair], dict[str, int]]:
    """Follow-ups asked without their main question, paired with their own main
    question, the nearest other main question and the nearest follow-up of a
    conversation with a different main question. Returns the pairs (at most ``n``,
    subkinds balanced) and counts of what was excluded."""
    if not (len(conversations) == len(main_vectors) == len(followup_vectors)):
        raise ValueError("one main and one follow-up vector per conversation")
    rng = random.Random(seed)
    mains = _unit(main_vectors)
    follows = _unit(followup_vectors)
    main_norm = np.asarray([normalized(c.main) for c in conversations], dtype=object)
    follow_norm = np.asarray([normalized(c.followup) for c in conversations], dtype=object)
    other_conv = main_norm[:, None] != main_norm[None, :]
    identical = other_conv & (follow_norm[:, None] == follow_norm[None, :])
    best_main = _best(follows @ mains.T, other_conv & (follow_norm[:, None] != main_norm[None, :]))
    best_follow = _best(follows @ follows.T, other_conv & ~identical)
    by_sub: dict[str, list[Pair]] = {"own_main": [], "other_main": [], "other_followup": []}
    seen: set[tuple[str, str, str]] = set()
    for i, conv in enumerate(conversations):
        partners = {"own_main": conv.main}
        if best_main[i] >= 0:
            partners["other_main"] = conversations[best_main[i]].main
        if best_follow[i] >= 0:
            partners["other_followup"] = conversations[best_follow[i]].followup
        for sub, cached in partners.items():
            key = (sub, normalized(conv.followup), normalized(cached))
            if key[1] == key[2] or key in seen:
                continue
            seen.add(key)
            meta = {"main_question": conv.main}
            by_sub[sub].append(Pair(CONTEXT, conv.followup, cached, False, subkind=sub, meta=meta))
    per_sub = max(1, n // len(by_sub))
    out: list[Pair] = []
    for sub in by_sub:
        out += _take(by_sub[sub], per_sub, rng)
    excluded = {"identical_followup_pairs": int(identical.sum()) // 2}
    return out, excluded
