"""Gateway load benchmark, server side: the workload in the semantic cache.

``prepare`` stores the phase-1/2 entries (BANKING77 questions, a synthetic answer),
verifies which held-out paraphrases are hits, and builds the phase-3 Zipf trace
(repeats, paraphrases, entity-changed variants). See bench/gateway_load.py.
"""

from __future__ import annotations

import csv
import random
import re
import time
from collections import Counter, defaultdict
from typing import Any

from bench.gateway_load_common import DATA, PHASE2_ANSWER, bench_query, chat_body


def read_banking() -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for name in ("train.csv", "test.csv"):
        with (DATA / "banking77" / name).open(newline="", encoding="utf-8") as fh:
            rows += [(r["text"].strip(), r["category"]) for r in csv.DictReader(fh)]
    return rows


def fake_answer(model: str, text: str, prompt_tokens: int) -> dict[str, Any]:
    words = len(text.split())
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": int(words * 1.3),
            "total_tokens": prompt_tokens + int(words * 1.3),
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }


def change_number(text: str, rng: random.Random) -> str | None:
    """``text`` with its first number changed (keeps the format), or None."""
    m = re.search(r"\d+(?:\.\d+)?", text)
    if m is None:
        return None
    old = m.group()
    if "." in old:
        whole, frac = old.split(".")
        new = f"{int(whole) + rng.choice((2, 3, 5, 7))}.{frac}"
    else:
        new = str(int(old) + rng.choice((2, 3, 5, 7)))
    return text[: m.start()] + new + text[m.end() :]


def prepare(
    spec: dict[str, Any], cache: Any, policy: Any, model: str, keying: tuple[str, str]
) -> dict[str, Any]:
    """Store phase-1/2 entries, verify phase-2 paraphrase hits, build the phase-3 trace
    (``keying``: the gateway's namespace and weights revision, ``bench_query``)."""

    validator = cache.validator
    guards = tuple(policy.guards)
    rng = random.Random(spec["seed"])
    seen: set[str] = set()
    by_intent: dict[str, list[str]] = defaultdict(list)
    numeric: list[tuple[str, str]] = []
    for text, intent in read_banking():
        norm = " ".join(text.lower().split())
        if norm in seen or not 3 <= len(text.split()) <= 25 or validator.guard(text, guards):
            continue
        seen.add(norm)
        by_intent[intent].append(text)
        if re.search(r"\d", text):
            numeric.append((text, intent))
    intents = sorted(by_intent)
    for qs in by_intent.values():
        rng.shuffle(qs)

    def query(body: dict[str, Any]) -> Any:
        return bench_query(body, keying)

    # ---- phase 2: stored questions and verified paraphrase hits ----
    n_store, n_cand = spec["store_per_intent"], spec["candidates_per_intent"]
    stored, cands = [], []
    for intent in intents:
        qs = by_intent[intent]
        stored += qs[:n_store]
        cands += qs[n_store : n_store + n_cand]
    t0 = time.perf_counter()
    vectors = cache.embedder.embed(stored + cands)
    embed_s = time.perf_counter() - t0
    sv, cv = vectors[: len(stored)], vectors[len(stored) :]
    t0 = time.perf_counter()
    p2 = spec["phase2_max_tokens"]
    for q, v in zip(stored, sv, strict=True):
        cache.store(
            query(chat_body(model, q, p2)),
            fake_answer(model, PHASE2_ANSWER, 30),
            policy,
            embedding=v,
        )
    store_s = time.perf_counter() - t0
    best = (cv @ sv.T).max(axis=1)
    likely = [q for q, s in zip(cands, best, strict=True) if s >= policy.threshold]
    t0 = time.perf_counter()
    hits: list[str] = []
    refused: Counter[str] = Counter()
    for q in likely:
        r = cache.lookup(query(chat_body(model, q, p2)), policy)
        if r.hit:
            hits.append(q)
        else:
            refused[r.reason] += 1
    verify_s = time.perf_counter() - t0

    # ---- phase 1: a partition that holds real questions, and one question that misses ----
    p1_question = "What does IBAN stand for?"
    for q, v in zip(stored[: spec["phase1_entries"]], sv, strict=False):
        cache.store(
            query(chat_body(model, q, 1)),
            fake_answer(model, PHASE2_ANSWER, 30),
            policy,
            embedding=v,
        )
    p1_lookup = cache.lookup(query(chat_body(model, p1_question, 1)), policy)

    # ---- phase 3: topics, paraphrases, entity-changed variants, Zipf trace ----
    trng = random.Random(spec["seed"] + 1)
    n_topics = spec["topics"]
    n_numeric = max(1, n_topics // 5)
    topics: list[dict[str, Any]] = []
    used: set[str] = set()
    trng.shuffle(numeric)
    for text, intent in numeric:
        if len(topics) >= n_numeric:
            break
        if intent in used:
            continue
        ents = validator.extract(text)
        variants = []
        for _ in range(6):
            v = change_number(text, trng)
            if v and v not in variants and not validator.guard(v, guards):
                reason = validator.check(v, text, ents, 0.99, None, guards)
                if reason and reason.startswith("entity_mismatch"):
                    variants.append(v)
            if len(variants) == 2:
                break
        if variants:
            used.add(intent)
            topics.append({"question": text, "intent": intent, "variants": variants})
    plain = [i for i in intents if i not in used]
    trng.shuffle(plain)
    for intent in plain[: n_topics - len(topics)]:
        qs = [q for q in by_intent[intent] if 5 <= len(q.split()) <= 16] or by_intent[intent]
        topics.append({"question": qs[-1], "intent": intent, "variants": []})
        used.add(intent)
    for t in topics:
        pool = [q for q in by_intent[t["intent"]] if q != t["question"]][-40:]
        ents = validator.extract(t["question"])
        if t["variants"]:  # a paraphrase of a numeric question must keep its entities
            pool = [q for q in pool if validator.check(q, t["question"], ents, 0.99) is None]
        if not pool:
            t["paraphrases"] = []
            continue
        vec = cache.embedder.embed([t["question"], *pool])
        sims = (vec[1:] @ vec[0]).tolist()
        order = sorted(range(len(pool)), key=lambda i: -sims[i])
        picks = order[:2] + ([trng.choice(order[2:])] if len(order) > 2 else [])
        t["paraphrases"] = [{"text": pool[i], "cosine": round(sims[i], 4)} for i in picks]
    trng.shuffle(topics)  # popularity rank is random with respect to the intent
    weights = [1 / (k + 1) ** spec["zipf"] for k in range(len(topics))]
    trace = []
    for _ in range(spec["trace_requests"]):
        k = trng.choices(range(len(topics)), weights)[0]
        t = topics[k]
        kinds = ["repeat"] * 55 + ["paraphrase"] * (45 if t["paraphrases"] else 0)
        if t["variants"]:
            kinds = ["repeat"] * 45 + ["paraphrase"] * (25 if t["paraphrases"] else 0)
            kinds += ["entity_changed"] * 30
        kind = trng.choice(kinds)
        if kind == "repeat":
            item = {"question": t["question"], "kind": kind}
        elif kind == "paraphrase":
            p = trng.choice(t["paraphrases"])
            item = {"question": p["text"], "kind": kind, "cosine": p["cosine"]}
        else:
            item = {"question": trng.choice(t["variants"]), "kind": kind}
        trace.append(item | {"topic": k, "intent": t["intent"]})
    return {
        "phase1": {
            "question": p1_question,
            "entries": min(spec["phase1_entries"], len(stored)),
            "lookup_reason": p1_lookup.reason,
            "best_score": None if p1_lookup.score is None else round(p1_lookup.score, 4),
        },
        "phase2": {
            "stored": len(stored),
            "candidates": len(cands),
            "above_threshold": len(likely),
            "verified_hits": len(hits),
            "refused": dict(refused),
            "hit_questions": hits,
            "embed_batch_s": round(embed_s, 2),
            "store_s": round(store_s, 2),
            "verify_s": round(verify_s, 2),
        },
        "phase3": {"topics": topics, "trace": trace},
    }
