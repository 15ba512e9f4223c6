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
  all_guards  as ``validators`` with every scenario guard switched on

The validator's verdict does not depend on the score (no judge is configured),
so it is computed once per pair. The default threshold is the lowest one where,
with validators, the misfire rate is <= 1% on entity and on hard negatives and
the hit rate on positives is >= 60%; when no threshold meets both, the lowest
threshold meeting the misfire goal (correctness first) is chosen and both
numbers are reported. Finally a sample of pairs goes through the real
``SemanticCache`` (temporary SQLite database, one partition, ``lookup`` with
the validator) to check that the pair-level numbers hold on the cache path.

Parts: bench/semantic_pairs.py (the pairs), bench/semantic_eval_scoring.py (scores,
curves, choice), bench/semantic_eval_diagnostics.py, bench/semantic_eval_cache.py
(the real cache path), bench/semantic_eval_report.py (plot, table); this file
holds the command line and writes the results.

Writes bench/results/semantic_eval.json and bench/results/semantic_eval.png.
Run: .venv/bin/python bench/semantic_eval.py   (about 3-5 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS, environment, write_json
from bench.semantic_common import embed_all, fits
from bench.semantic_data import (
    CONTEXT,
    DATA_DIR,
    ENTITY,
    HARD,
    POSITIVE,
    POSITIVE_RANDOM,
    load_banking77,
    load_clinc150,
    load_conversations,
    sample_per_intent,
)
from bench.semantic_eval_cache import cache_check
from bench.semantic_eval_diagnostics import diagnostics
from bench.semantic_eval_report import plot, table
from bench.semantic_eval_scoring import (
    GOAL_MISFIRE,
    GOAL_POSITIVES,
    THRESHOLDS,
    bootstrap_choice,
    choose,
    curves,
    score_pairs,
)
from bench.semantic_pairs import context_pairs, entity_pairs, intent_pairs
from semantic import Embedder
from validators import GUARDS, Validator


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
    ap.add_argument(
        "--verifier",
        action="store_true",
        help="add the pair verifier's columns, both embedders and the Chinese section "
        "(bench/semantic_eval_verifier.py, on the verifier's eval split only)",
    )
    ap.add_argument("--verifier-per-kind", type=int, default=400)
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
    if args.verifier:
        from bench import semantic_eval_verifier as sev

        payload["verifier"] = sev.run(args.verifier_per_kind)
    write_json("semantic_eval", payload)
    print(f"total {timings['total']:.0f} s")


if __name__ == "__main__":
    main()
