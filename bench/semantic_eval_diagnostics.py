"""Diagnostics of the semantic-cache evaluation at the chosen threshold.

Wilson intervals of the goal numbers, validator refusals of positives, entity
negatives per substitution kind, the intents hard negatives confuse, numbers
per dataset and context negatives per subkind, with examples.
See bench/semantic_eval.py.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np

from bench.semantic_data import CONTEXT, ENTITY, HARD, POSITIVE, POSITIVE_RANDOM
from bench.semantic_eval_scoring import Scored, wilson_lower, wilson_upper


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
