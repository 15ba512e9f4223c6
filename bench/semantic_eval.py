"""Threshold curves of the semantic cache on labelled question pairs (issue 4).

Pairs come from ../shared/data (rules in bench/semantic_pairs.py): positives
(same intent, same values: nearest same-intent neighbour, plus a random
same-intent partner as a lower bound), hard negatives (nearest question of a
neighbouring intent), entity negatives (a real question and a copy with one
value changed) and context negatives (MeanCache follow-ups asked without their
main question). Every question is embedded once with the bundled
all-MiniLM-L6-v2 (``semantic.Embedder``); a pair's score is the cosine (dot of
the normalized vectors), exactly what the FAISS inner-product index returns.

For thresholds 0.70..0.99 it reports the hit rate on positives and the misfire
rate (share of negatives that would be served) per kind and overall:

  raw         score >= threshold
  validators  score >= threshold and ``Validator().check`` accepts
              (guards: none, so the curve isolates the entity checks; this is
              also the default policy, whose guard list is empty)
  all_guards  as ``validators`` with all four scenario guards switched on

The validator's verdict does not depend on the score (no judge is configured),
so it is computed once per pair. The default threshold is the lowest one where,
with validators, the misfire rate is <= 1% on entity and on hard negatives and
the hit rate on positives is >= 60%; when no threshold meets both, the lowest
threshold meeting the misfire goal (correctness first) is chosen and both
numbers are reported. Finally a sample of pairs goes through the real
``SemanticCache`` (temporary SQLite database, one partition, ``lookup`` with
the validator) to check that the pair-level numbers hold on the cache path.

Writes bench/results/semantic_eval.json and bench/results/semantic_eval.png.
Run: .venv/bin/python bench/semantic_eval.py   (about 3-5 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS, environment, write_json
from bench.semantic_pairs import (
    CONTEXT,
    DATA_DIR,
    ENTITY,
    HARD,
    NEGATIVE_KINDS,
    POSITIVE,
    POSITIVE_RANDOM,
    Conversation,
    Pair,
    Question,
    context_pairs,
    entity_pairs,
    intent_pairs,
    load_banking77,
    load_clinc150,
    load_conversations,
    normalized,
    sample_per_intent,
)
from semantic import (
    Embedder,
    EntryStore,
    SemanticCache,
    SemanticPolicy,
    SemanticQuery,
    upgrade_database,
)
from validators import GUARDS, Validator

THRESHOLDS = [round(0.70 + 0.01 * i, 2) for i in range(30)]
KEY_THRESHOLDS = [0.75, 0.80, 0.85, 0.88, 0.90, 0.92, 0.95]
MODES = ("raw", "validators", "all_guards")
GOAL_MISFIRE = 0.01
GOAL_POSITIVES = 0.60
LABELS = {
    POSITIVE: "positives (nearest same-intent)",
    POSITIVE_RANDOM: "positives (random same-intent)",
    HARD: "hard negatives (neighbouring intent)",
    ENTITY: "entity negatives (one value changed)",
    CONTEXT: "context negatives (bare follow-ups)",
    "negatives": "all negatives",
}
COLORS = {
    POSITIVE: "tab:green",
    POSITIVE_RANDOM: "tab:olive",
    HARD: "tab:red",
    ENTITY: "tab:purple",
    CONTEXT: "tab:blue",
    "negatives": "tab:gray",
}


# -- embedding ----------------------------------------------------------------------------


def embed_all(
    embedder: Embedder, texts: Sequence[str], batch: int = 256
) -> tuple[dict[str, int], NDArray[np.float32]]:
    """Embed every distinct text once (shortest first: less padding): text -> row, matrix."""
    unique = sorted(set(texts), key=lambda t: (len(t), t))
    rows = []
    with tqdm(total=len(unique), desc="embedding", unit="text") as bar:
        for lo in range(0, len(unique), batch):
            chunk = unique[lo : lo + batch]
            rows.append(embedder.embed(chunk))
            bar.update(len(chunk))
    matrix = np.concatenate(rows) if rows else np.empty((0, embedder.dim), np.float32)
    return {t: i for i, t in enumerate(unique)}, matrix


def fits(embedder: Embedder, questions: Sequence[Question]) -> list[Question]:
    """Questions the embedder reads whole (it refuses to truncate)."""
    counts = embedder.count_tokens([q.text for q in questions])
    return [q for q, n in zip(questions, counts, strict=True) if n <= embedder.max_tokens]


# -- scoring ------------------------------------------------------------------------------


def wilson_upper(k: int, n: int, z: float = 1.96) -> float:
    """Upper end of the 95% Wilson interval of a rate k/n."""
    if n == 0:
        return float("nan")
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def wilson_lower(k: int, n: int, z: float = 1.96) -> float:
    if n == 0:
        return float("nan")
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


class Scored:
    """Scores and validator verdicts of one kind's pairs."""

    def __init__(self, pairs: list[Pair], scores: NDArray[np.float32], reasons: dict[str, list]):
        self.pairs = pairs
        self.scores = scores
        self.reasons = reasons  # mode -> per-pair refusal reason or None
        self.ok = {
            "raw": np.ones(len(pairs), dtype=bool),
            **{m: np.asarray([r is None for r in rs], dtype=bool) for m, rs in reasons.items()},
        }

    def hits(self, threshold: float, mode: str) -> NDArray[np.bool_]:
        return (self.scores >= threshold) & self.ok[mode]

    def rate(self, threshold: float, mode: str, mask: NDArray[np.bool_] | None = None) -> float:
        hits = self.hits(threshold, mode)
        if mask is not None:
            hits = hits[mask]
        return float(hits.mean()) if hits.size else float("nan")


def score_pairs(
    pairs: list[Pair], vectors: NDArray[np.float32], row: dict[str, int], validator: Validator
) -> Scored:
    q = vectors[[row[p.query] for p in pairs]]
    c = vectors[[row[p.cached] for p in pairs]]
    scores = np.einsum("ij,ij->i", q, c).astype(np.float32) if pairs else np.zeros(0, np.float32)
    reasons: dict[str, list] = {"validators": [], "all_guards": []}
    all_guards = list(GUARDS)
    for pair, score in zip(pairs, scores, strict=True):
        entities = validator.extract(pair.cached)
        s = float(score)
        reasons["validators"].append(
            validator.check(pair.query, pair.cached, entities, s, None, ())
        )
        reasons["all_guards"].append(
            validator.check(pair.query, pair.cached, entities, s, None, all_guards)
        )
    return Scored(pairs, scores, reasons)


def curves(scored: dict[str, Scored]) -> list[dict[str, Any]]:
    negatives = [scored[k] for k in NEGATIVE_KINDS]
    rows = []
    for t in THRESHOLDS:
        row: dict[str, Any] = {"threshold": t}
        for mode in MODES:
            rates = {kind: s.rate(t, mode) for kind, s in scored.items()}
            hit_count = sum(int(s.hits(t, mode).sum()) for s in negatives)
            rates["negatives"] = hit_count / max(1, sum(len(s.pairs) for s in negatives))
            row[mode] = rates
        rows.append(row)
    return rows


def choose(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def safe(r: dict[str, Any]) -> bool:
        v = r["validators"]
        return v[HARD] <= GOAL_MISFIRE and v[ENTITY] <= GOAL_MISFIRE

    both = [r for r in rows if safe(r) and r["validators"][POSITIVE] >= GOAL_POSITIVES]
    if both:
        r, met = both[0], True
        why = (
            f"lowest threshold where, with validators, misfires are <= {GOAL_MISFIRE:.0%} on "
            f"hard ({r['validators'][HARD]:.2%}) and entity ({r['validators'][ENTITY]:.2%}) "
            f"negatives while {r['validators'][POSITIVE]:.1%} of positives still hit "
            f"(>= {GOAL_POSITIVES:.0%}); a lower threshold breaks the misfire goal, a higher "
            "one only loses hits"
        )
    elif any(safe(r) for r in rows):
        r, met = next(r for r in rows if safe(r)), False
        why = (
            f"no threshold meets both goals; correctness first: the lowest threshold where "
            f"misfires with validators are <= {GOAL_MISFIRE:.0%} on hard "
            f"({r['validators'][HARD]:.2%}) and entity ({r['validators'][ENTITY]:.2%}) "
            f"negatives keeps only {r['validators'][POSITIVE]:.1%} of positives "
            f"(goal {GOAL_POSITIVES:.0%})"
        )
    else:
        r = min(rows, key=lambda r: (max(r["validators"][HARD], r["validators"][ENTITY]),))
        met = False
        why = (
            f"no threshold brings misfires with validators under {GOAL_MISFIRE:.0%}; the "
            f"threshold with the fewest (hard {r['validators'][HARD]:.2%}, entity "
            f"{r['validators'][ENTITY]:.2%}) keeps {r['validators'][POSITIVE]:.1%} of positives"
        )
    return {"threshold": r["threshold"], "goal_met": met, "reason": why, "at_threshold": r}


def bootstrap_choice(scored: dict[str, Scored], rounds: int, seed: int) -> dict[str, Any]:
    """How stable the choice is: resample every kind's pairs with replacement and
    choose again (the pairs' scores and verdicts are fixed, so this is cheap)."""
    rng = np.random.default_rng(seed)
    ts = np.asarray(THRESHOLDS, dtype=np.float32)[:, None]
    hit = {k: (s.scores[None, :] >= ts) & s.ok["validators"][None, :] for k, s in scored.items()}
    picks: Counter[str] = Counter()
    for _ in range(rounds):
        rates = {}
        for kind in (POSITIVE, HARD, ENTITY):
            n = hit[kind].shape[1]
            rates[kind] = hit[kind][:, rng.integers(0, n, n)].mean(axis=1)
        safe = (rates[HARD] <= GOAL_MISFIRE) & (rates[ENTITY] <= GOAL_MISFIRE)
        both = safe & (rates[POSITIVE] >= GOAL_POSITIVES)
        pick = np.flatnonzero(both if both.any() else safe)
        picks[f"{THRESHOLDS[pick[0]]:.2f}" if pick.size else "none"] += 1
    return {
        "rounds": rounds,
        "chosen_threshold_share": {t: n / rounds for t, n in sorted(picks.items())},
    }


# -- diagnostics at the chosen threshold ---------------------------------------------------


def diagnostics(scored: dict[str, Scored], t: float, rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # Interval bounds of the goal numbers.
    bounds = {}
    for kind in (POSITIVE, HARD, ENTITY, CONTEXT):
        s = scored[kind]
        k, n = int(s.hits(t, "validators").sum()), len(s.pairs)
        bounds[kind] = {
            "hits": k,
            "pairs": n,
            "rate": k / max(1, n),
            "wilson95": [wilson_lower(k, n), wilson_upper(k, n)],
        }
    out["wilson_intervals"] = bounds

    # Validator refusals of positives: false refusals (the rule says same answer).
    for kind in (POSITIVE, POSITIVE_RANDOM):
        s = scored[kind]
        above = s.scores >= t
        reasons = [r for r, a in zip(s.reasons["validators"], above, strict=True) if r and a]
        all_reasons = [r for r in s.reasons["validators"] if r]
        examples = [
            {"query": p.query, "cached": p.cached, "score": round(float(sc), 4), "reason": r}
            for p, sc, r in zip(s.pairs, s.scores, s.reasons["validators"], strict=True)
            if r and sc >= t
        ]
        out[f"{kind}_false_refusals"] = {
            "refused_any_score": len(all_reasons),
            "refused_any_score_rate": len(all_reasons) / max(1, len(s.pairs)),
            "refused_above_threshold": len(reasons),
            "above_threshold": int(above.sum()),
            "by_reason_above_threshold": dict(Counter(reasons).most_common()),
            "examples": rng.sample(examples, min(12, len(examples))),
        }
        guard_reasons = [r for r in s.reasons["all_guards"] if r]
        out[f"{kind}_all_guards_refusals"] = dict(Counter(guard_reasons).most_common())

    # Entity negatives: what the validator catches, per substitution kind.
    s = scored[ENTITY]
    per_sub: dict[str, dict[str, Any]] = {}
    subs = np.asarray([p.subkind for p in s.pairs])
    for sub in sorted(set(subs)):
        mask = subs == sub
        per_sub[sub] = {
            "pairs": int(mask.sum()),
            "validator_refuses": float((~s.ok["validators"][mask]).mean()),
            "misfire_raw": s.rate(t, "raw", mask),
            "misfire_validators": s.rate(t, "validators", mask),
            "median_score": float(np.median(s.scores[mask])),
        }
    out["entity_by_substitution"] = per_sub
    out["entity_refusal_reasons"] = dict(
        Counter(r for r in s.reasons["validators"] if r).most_common()
    )
    leaks = [
        {"query": p.query, "cached": p.cached, "kind": p.subkind, "score": round(float(sc), 4)}
        for p, sc, ok in zip(s.pairs, s.scores, s.ok["validators"], strict=True)
        if ok and sc >= t
    ]
    out["entity_misfire_examples"] = leaks[:20]

    # Hard negatives: which intent pairs misfire.
    s = scored[HARD]
    hits = s.hits(t, "validators")
    confused = Counter(
        " / ".join(sorted((p.meta["query_intent"], p.meta["cached_intent"])))
        for p, h in zip(s.pairs, hits, strict=True)
        if h
    )
    out["hard_confused_intents"] = dict(confused.most_common(15))
    hard_examples = [
        {
            "query": p.query,
            "query_intent": p.meta["query_intent"],
            "cached": p.cached,
            "cached_intent": p.meta["cached_intent"],
            "score": round(float(sc), 4),
        }
        for p, sc, h in zip(s.pairs, s.scores, hits, strict=True)
        if h
    ]
    out["hard_misfire_examples"] = rng.sample(hard_examples, min(15, len(hard_examples)))
    by_source = {}
    for source in sorted({p.meta["source"] for p in s.pairs}):
        mask = np.asarray([p.meta["source"] == source for p in s.pairs])
        by_source[source] = {
            "pairs": int(mask.sum()),
            "misfire_validators": s.rate(t, "validators", mask),
            "positives_hit": scored[POSITIVE].rate(
                t,
                "validators",
                np.asarray([p.meta["source"] == source for p in scored[POSITIVE].pairs]),
            ),
        }
    out["by_source"] = by_source

    # Context negatives per subkind.
    s = scored[CONTEXT]
    subs = np.asarray([p.subkind for p in s.pairs])
    out["context_by_subkind"] = {
        sub: {
            "pairs": int((subs == sub).sum()),
            "misfire_raw": s.rate(t, "raw", subs == sub),
            "misfire_validators": s.rate(t, "validators", subs == sub),
        }
        for sub in sorted(set(subs))
    }
    ctx = [
        {"query": p.query, "cached": p.cached, "subkind": p.subkind, "score": round(float(sc), 4)}
        for p, sc, h in zip(s.pairs, s.scores, s.hits(t, "validators"), strict=True)
        if h
    ]
    out["context_misfire_examples"] = ctx[:15]
    return out


# -- the real cache path ------------------------------------------------------------------


def _reply(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"(answer to: {text})"},
                "finish_reason": "stop",
            }
        ],
    }


def _query(text: str, context: Sequence[dict[str, str]] = ()) -> SemanticQuery:
    return SemanticQuery(tenant="bench", model="bench-model", question=text, context=tuple(context))


def cache_check(
    embedder: Embedder,
    scored: dict[str, Scored],
    conversations: Sequence[Conversation],
    threshold: float,
    per_kind: int,
    seed: int,
) -> dict[str, Any]:
    """Store the cached sides of a sample in one partition, look the query sides up
    through ``SemanticCache.lookup`` (with and without the validator) and compare
    with the pair-level prediction on the same sample."""
    rng = random.Random(seed)
    stored: set[str] = set()
    queries: set[str] = set()
    sample: list[tuple[str, int]] = []
    for kind in (POSITIVE, HARD, ENTITY, CONTEXT):
        order = list(range(len(scored[kind].pairs)))
        rng.shuffle(order)
        taken = 0
        for i in order:
            p = scored[kind].pairs[i]
            cn, qn = normalized(p.cached), normalized(p.query)
            if cn in stored or cn in queries or qn in stored or qn in queries:
                continue
            stored.add(cn)
            queries.add(qn)
            sample.append((kind, i))
            taken += 1
            if taken == per_kind:
                break
    validator = Validator()
    policy = SemanticPolicy(threshold=threshold)
    out: dict[str, Any] = {"threshold": threshold, "stored_entries": len(sample)}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/semantic_eval.db"
        upgrade_database(url)
        store = EntryStore(url)
        cache = SemanticCache(embedder, store, validator=validator)
        entry_of: dict[tuple[str, int], int] = {}
        t0 = time.perf_counter()
        for kind, i in tqdm(sample, desc="cache store", unit="entry"):
            cached = scored[kind].pairs[i].cached
            saved = cache.store(_query(cached), _reply(cached), policy)
            assert saved.stored and saved.entry_id is not None, saved
            entry_of[(kind, i)] = saved.entry_id
        out["store_seconds"] = round(time.perf_counter() - t0, 2)
        raw_cache = SemanticCache(embedder, store, validator=None)
        raw_cache.rebuild(progress=False)
        per_kind_out: dict[str, Any] = {}
        disagreements: list[dict[str, Any]] = []
        other_hits: list[dict[str, Any]] = []
        for mode, c in (("validators", cache), ("raw", raw_cache)):
            counts: dict[str, Counter[str]] = defaultdict(Counter)
            for kind, i in tqdm(sample, desc=f"cache lookup ({mode})", unit="query"):
                s = scored[kind]
                pair = s.pairs[i]
                result = c.lookup(_query(pair.query), policy)
                predicted = bool(s.hits(threshold, mode)[i])
                partner = result.hit and result.entry_id == entry_of[(kind, i)]
                other = result.hit and not partner
                counts[kind]["pairs"] += 1
                counts[kind]["predicted_hit"] += predicted
                counts[kind]["cache_hit_partner"] += partner
                counts[kind]["cache_hit_other_entry"] += other
                counts[kind]["agree"] += predicted == partner
                if not result.hit:
                    counts[kind][f"miss:{result.reason}"] += 1
                if other and len(other_hits) < 20:
                    other_hits.append(
                        {
                            "mode": mode,
                            "kind": kind,
                            "query": pair.query,
                            "served": result.cached_question,
                            "score": round(result.score or 0, 4),
                        }
                    )
                if predicted != partner and len(disagreements) < 20:
                    disagreements.append(
                        {
                            "mode": mode,
                            "kind": kind,
                            "query": pair.query,
                            "cached": pair.cached,
                            "pair_score": round(float(s.scores[i]), 4),
                            "predicted_hit": predicted,
                            "cache_hit": result.hit,
                            "cache_reason": result.reason,
                            "cache_score": None if result.score is None else round(result.score, 4),
                            "served": result.cached_question,
                        }
                    )
            per_kind_out[mode] = {
                kind: {
                    **dict(cnt),
                    "pair_level_rate": cnt["predicted_hit"] / cnt["pairs"],
                    "cache_partner_rate": cnt["cache_hit_partner"] / cnt["pairs"],
                    "cache_any_hit_rate": (cnt["cache_hit_partner"] + cnt["cache_hit_other_entry"])
                    / cnt["pairs"],
                }
                for kind, cnt in counts.items()
            }
        out["by_mode"] = per_kind_out
        out["disagreements"] = disagreements
        out["hits_on_other_entries"] = other_hits
        out["context_partition"] = _partition_check(cache, conversations, policy)
        store.close()
    return out


def _partition_check(
    cache: SemanticCache, conversations: Sequence[Conversation], policy: SemanticPolicy
) -> dict[str, Any]:
    """Identical follow-up texts from conversations with different main questions:
    stored inside the first conversation, looked up inside the others. The context
    (earlier turns) is part of the partition key, so they must miss; the same
    lookup inside its own conversation is the positive control."""
    groups: dict[str, list[Conversation]] = defaultdict(list)
    for conv in conversations:
        groups[normalized(conv.followup)].append(conv)
    groups = {k: v for k, v in groups.items() if len({normalized(c.main) for c in v}) > 1}

    def context(conv: Conversation) -> list[dict[str, str]]:
        answer = conv.answer or "(answer)"
        return [{"role": "user", "content": conv.main}, {"role": "assistant", "content": answer}]

    other_hits, own_hits, other_lookups = 0, 0, 0
    reasons: Counter[str] = Counter()
    for convs in groups.values():
        first, *rest = convs
        cache.store(_query(first.followup, context(first)), _reply(first.followup), policy)
        own_hits += cache.lookup(_query(first.followup, context(first)), policy).hit
        for conv in rest:
            if normalized(conv.main) == normalized(first.main):
                continue
            result = cache.lookup(_query(conv.followup, context(conv)), policy)
            other_lookups += 1
            other_hits += result.hit
            reasons[str(result.reason)] += 1
    return {
        "followup_groups": len(groups),
        "own_conversation_hits": own_hits,
        "other_conversation_lookups": other_lookups,
        "other_conversation_hits": other_hits,
        "other_conversation_reasons": dict(reasons),
    }


# -- output -------------------------------------------------------------------------------


def plot(rows: list[dict[str, Any]], chosen: float, sizes: dict[str, int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ts = [r["threshold"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 6.2))
    for kind in (POSITIVE, POSITIVE_RANDOM):
        for mode, style in (("validators", "-"), ("raw", "--")):
            label = f"{LABELS[kind]}, {'with' if mode != 'raw' else 'without'} validators"
            values = [r[mode][kind] for r in rows]
            left.plot(ts, values, style, color=COLORS[kind], lw=2, label=label)
    left.axhline(GOAL_POSITIVES, color="black", ls=":", lw=1, label="goal: ≥ 60% of positives")
    left.set_title("Hit rate on positives (higher is better)")
    left.set_ylabel("share of positive pairs served from the cache")
    left.set_ylim(0, 1.02)
    for kind in (HARD, ENTITY, CONTEXT, "negatives"):
        for mode, style in (("validators", "-"), ("raw", "--")):
            values = [max(r[mode][kind], 1e-4) for r in rows]
            label = f"{LABELS[kind]}, {'with' if mode != 'raw' else 'without'} validators"
            width = 2 if kind != "negatives" else 1.2
            right.plot(ts, values, style, color=COLORS[kind], lw=width, label=label)
    right.axhline(GOAL_MISFIRE, color="black", ls=":", lw=1, label="goal: ≤ 1% misfires")
    right.set_yscale("log")
    right.set_ylim(8e-5, 1.1)
    right.set_title("Misfire rate on negatives (lower is better; log scale, 0 drawn at 1e-4)")
    right.set_ylabel("share of negative pairs that would be served")
    for ax in (left, right):
        ax.axvline(chosen, color="tab:orange", lw=2, alpha=0.8)
        ax.text(
            chosen,
            0.02 if ax is left else 1.5e-4,
            f" default {chosen:.2f}",
            color="tab:orange",
            fontsize=10,
            fontweight="bold",
        )
        ax.set_xlabel("cosine similarity threshold")
        ax.set_xlim(min(ts), max(ts))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7.5, loc="lower left")
    counts = ", ".join(f"{k} {n}" for k, n in sizes.items())
    fig.suptitle(
        "cachegate semantic cache, all-MiniLM-L6-v2: solid = with validators (entity checks), "
        f"dashed = without\npairs: {counts}",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print(f"wrote {path}")


def table(rows: list[dict[str, Any]], chosen: float) -> str:
    keys = sorted(set(KEY_THRESHOLDS) | {chosen})
    head = (
        "| threshold | positives hit (val / raw) | random same-intent hit (val) "
        "| hard misfire (val / raw) | entity misfire (val / raw) "
        "| context misfire (val / raw) | all negatives (val) | positives hit (all guards) |"
    )
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        if r["threshold"] not in keys:
            continue
        v, w = r["validators"], r["raw"]
        mark = " **(default)**" if r["threshold"] == chosen else ""
        lines.append(
            f"| {r['threshold']:.2f}{mark} | {v[POSITIVE]:.1%} / {w[POSITIVE]:.1%} "
            f"| {v[POSITIVE_RANDOM]:.1%} | {v[HARD]:.2%} / {w[HARD]:.2%} "
            f"| {v[ENTITY]:.2%} / {w[ENTITY]:.2%} | {v[CONTEXT]:.2%} / {w[CONTEXT]:.2%} "
            f"| {v['negatives']:.2%} | {r['all_guards'][POSITIVE]:.1%} |"
        )
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--banking-per-intent", type=int, default=40)
    ap.add_argument("--clinc-per-intent", type=int, default=24)
    ap.add_argument("--positives", type=int, default=2000)
    ap.add_argument("--hard", type=int, default=2000)
    ap.add_argument("--entity", type=int, default=1000)
    ap.add_argument("--context", type=int, default=1000)
    ap.add_argument("--cache-per-kind", type=int, default=50)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    started = time.perf_counter()
    load_start = list(os.getloadavg())
    timings: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        timings[name] = round(now - since, 2)
        return now

    embedder = Embedder()
    mark = lap("load_embedder", started)
    banking = fits(embedder, load_banking77(args.data_dir))
    clinc = fits(embedder, load_clinc150(args.data_dir))
    conversations = load_conversations(args.data_dir)
    pool = sample_per_intent(banking, args.banking_per_intent, args.seed) + sample_per_intent(
        clinc, args.clinc_per_intent, args.seed
    )
    entity = entity_pairs(banking + clinc, args.entity, args.seed)
    texts = [q.text for q in pool] + [t for p in entity for t in (p.query, p.cached)]
    texts += [t for c in conversations for t in (c.main, c.followup)]
    mark = lap("build_inputs", mark)
    row, vectors = embed_all(embedder, texts)
    mark = lap("embed", mark)
    pairs = intent_pairs(
        pool,
        vectors[[row[q.text] for q in pool]],
        n_positive=args.positives,
        n_hard=args.hard,
        seed=args.seed,
    )
    context, context_excluded = context_pairs(
        conversations,
        vectors[[row[c.main] for c in conversations]],
        vectors[[row[c.followup] for c in conversations]],
        args.context,
        args.seed,
    )
    pairs[ENTITY] = entity
    pairs[CONTEXT] = context
    validator = Validator()
    scored = {
        kind: score_pairs(pairs[kind], vectors, row, validator)
        for kind in (POSITIVE, POSITIVE_RANDOM, HARD, ENTITY, CONTEXT)
    }
    mark = lap("pairs_and_validators", mark)
    rows = curves(scored)
    choice = choose(rows)
    chosen = choice["threshold"]
    diag = diagnostics(scored, chosen, random.Random(args.seed))
    stability = bootstrap_choice(scored, args.bootstrap, args.seed)
    sizes = {kind: len(s.pairs) for kind, s in scored.items()}
    print()
    print(table(rows, chosen))
    print()
    print(f"recommended default threshold: {chosen:.2f} (goal met: {choice['goal_met']})")
    print(f"  why: {choice['reason']}")
    shares = ", ".join(f"{t}: {v:.0%}" for t, v in stability["chosen_threshold_share"].items())
    print(f"  bootstrap ({args.bootstrap} resamples of the pairs) picks {shares}")
    mark = lap("curves", mark)

    print("\nchecking the real cache path (SemanticCache.lookup) on a sample ...", flush=True)
    cache = cache_check(embedder, scored, conversations, chosen, args.cache_per_kind, args.seed)
    mark = lap("cache_check", mark)
    print(
        "\n| kind | pairs | pair-level hit rate | cache: hit on partner | cache: any hit | agree |"
    )
    print("|---|---|---|---|---|---|")
    for mode in ("validators", "raw"):
        for kind, c in cache["by_mode"][mode].items():
            print(
                f"| {kind} ({'with' if mode == 'validators' else 'without'} validators) "
                f"| {c['pairs']} | {c['pair_level_rate']:.1%} | {c['cache_partner_rate']:.1%} "
                f"| {c['cache_any_hit_rate']:.1%} | {c['agree']}/{c['pairs']} |"
            )
    part = cache["context_partition"]
    print(
        f"\ncontext partition check: identical follow-ups of {part['followup_groups']} groups; "
        f"inside another conversation {part['other_conversation_hits']}/"
        f"{part['other_conversation_lookups']} hit, own conversation "
        f"{part['own_conversation_hits']}/{part['followup_groups']} hit"
    )

    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(rows, chosen, sizes, RESULTS / "semantic_eval.png")
    timings["total"] = round(time.perf_counter() - started, 2)
    payload = {
        "benchmark": "semantic_eval",
        "environment": {
            **environment(),
            "load_average_at_start": load_start,
            "load_average_at_end": list(os.getloadavg()),
        },
        "config": {
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "embedder_id": embedder.embedder_id,
            "thresholds": THRESHOLDS,
            "validator_modes": {
                "raw": "score >= threshold",
                "validators": "score >= threshold and Validator().check(..., kinds=None, "
                "guards=()) is None",
                "all_guards": f"as validators, guards={list(GUARDS)}",
            },
            "goal": {
                "misfire_max": GOAL_MISFIRE,
                "on": [HARD, ENTITY],
                "positives_min": GOAL_POSITIVES,
            },
            "pair_rules": {
                POSITIVE: "same intent, most similar same-intent question of the pool, value "
                "tokens (numbers incl. number words, currencies, weekdays, months, relative "
                "days, am/pm) equal, normalized text different",
                POSITIVE_RANDOM: "same rule with a random same-intent partner (lower bound)",
                HARD: "most similar question of a different intent of the same dataset",
                ENTITY: "real question with a value + copy with one value changed "
                "(stratified over substitution kinds)",
                CONTEXT: "bare follow-up vs its own main question / nearest other main "
                "question / nearest follow-up of another conversation (identical texts "
                "excluded)",
            },
        },
        "sizes": {
            "pool": {
                "banking77": sum(q.source == "banking77" for q in pool),
                "clinc150": sum(q.source == "clinc150" for q in pool),
            },
            "questions_available": {"banking77": len(banking), "clinc150": len(clinc)},
            "conversations": len(conversations),
            "texts_embedded": len(row),
            "pairs": sizes,
            "context_excluded": context_excluded,
        },
        "curves": rows,
        "choice": {**choice, "bootstrap": stability},
        "diagnostics": diag,
        "cache_check": cache,
        "timings_s": timings,
    }
    write_json("semantic_eval", payload)
    print(f"total {timings['total']:.0f} s")


if __name__ == "__main__":
    main()
