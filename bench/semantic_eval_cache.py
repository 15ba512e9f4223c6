"""The semantic-cache evaluation on the real cache path.

A sample of pairs goes through ``SemanticCache`` (temporary SQLite database, one
partition): the cached sides are stored, the query sides looked up with and
without the validator, and the outcome compared with the pair-level prediction.
Identical follow-ups of different conversations check the context partition.
See bench/semantic_eval.py.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

from bench.semantic_common import query, reply
from bench.semantic_data import CONTEXT, ENTITY, HARD, POSITIVE, Conversation, normalized
from bench.semantic_eval_scoring import Scored
from migrations.runner import upgrade_database
from semantic import Embedder, EntryStore, SemanticCache, SemanticPolicy
from validators import Validator


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
            saved = cache.store(query(cached), reply(cached), policy)
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
                result = c.lookup(query(pair.query), policy)
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
        cache.store(query(first.followup, context(first)), reply(first.followup), policy)
        own_hits += cache.lookup(query(first.followup, context(first)), policy).hit
        for conv in rest:
            if normalized(conv.main) == normalized(first.main):
                continue
            result = cache.lookup(query(conv.followup, context(conv)), policy)
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
