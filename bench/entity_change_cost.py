"""What a change to the entity rules costs and buys: every decision that differs
between the validators of a git ref (``--base``, HEAD by default) and those of the
working tree, on the shared data.

* **Cost**: same-intent pairs of BANKING77, CLINC150 and the Chinese question files
  (translated and written) that the new rules refuse and the old did not, every pair
  of every intent (not a sample), and PAWS-X paraphrases (label 1, both languages).
* **Gain**: PAWS-X non-paraphrases (label 0) newly refused (pairs made by swapping
  words: "flights from New York to Florida" / "from Florida to New York").
* And the other way: pairs the new rules let through that the old refused.

Each version's rules run in their own process (the base in a temporary git worktree),
so nothing of one is imported into the other. Only pairs with a question whose
entities differ between the two versions can change decision; those are compared.

Run: ``.venv/bin/python -m bench.entity_change_cost [--base REF] [--name NAME]``
→ bench/results/entity_change_cost.json (session 39's rules against session 38's,
``--base ae1d64a``; ``entity_change_cost_nationalities.json``: the nationalities alone,
against the commit before them)
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench._common import write_json
from bench.semantic_data import DATA_DIR, load_banking77, load_clinc150

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
EXAMPLES = 12

# Run inside a checkout (cwd): its own validators, reading a JSON request on stdin.
_WORKER = """
import json, sys
from validators import compare_entities, extract_entities
req = json.load(sys.stdin)
texts = req["texts"]
ents = [extract_entities(t) for t in texts]
# without the rules' version ("_v"), which differs for every question
out = {"entities": [json.dumps({k: v for k, v in e.to_dict().items() if k != "_v"},
                               sort_keys=True) for e in ents]}
out["matches"] = [compare_entities(ents[a], ents[b]).matches for a, b in req["pairs"]]
json.dump(out, sys.stdout)
"""


def run_rules(root: Path, texts: list[str], pairs: list[tuple[int, int]]) -> dict[str, Any]:
    """Entities of ``texts`` and the decisions on ``pairs`` under the rules at ``root``."""
    done = subprocess.run(
        [sys.executable, "-c", _WORKER],
        input=json.dumps({"texts": texts, "pairs": pairs}),
        capture_output=True,
        text=True,
        cwd=root,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def chinese(path: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [(f"{r['source']}/{r['intent']}", r["zh"]) for r in rows if r.get("zh")]


def pawsx(lang: str) -> list[tuple[str, str, int]]:
    path = DATA_DIR / "pawsx" / f"pawsx.{lang}.dev.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [(r["a"], r["b"], int(r["label"])) for r in rows]


def changed_decisions(
    base: Path, texts: list[str], pairs: list[tuple[int, int]]
) -> tuple[int, list[tuple[int, int, bool]]]:
    """(pairs whose questions' entities changed, [(a, b, new decision)] that differ)."""
    old = run_rules(base, texts, [])["entities"]
    new = run_rules(ROOT, texts, [])["entities"]
    touched = {i for i, (o, n) in enumerate(zip(old, new, strict=True)) if o != n}
    candidates = [(a, b) for a, b in pairs if a in touched or b in touched]
    before = run_rules(base, texts, candidates)["matches"]
    after = run_rules(ROOT, texts, candidates)["matches"]
    differ = [(a, b, n) for (a, b), o, n in zip(candidates, before, after, strict=True) if o != n]
    return len(candidates), differ


def _summary(texts: list[str], total: int, touched: int, differ: list, label: str) -> dict:
    refused = [(a, b) for a, b, matches in differ if not matches]
    served = [(a, b) for a, b, matches in differ if matches]
    out = {
        "pairs": total,
        "pairs_touched": touched,
        f"{label}_newly_refused": len(refused),
        f"{label}_newly_served": len(served),
        "refused_examples": [[texts[a], texts[b]] for a, b in refused[:EXAMPLES]],
        "served_examples": [[texts[a], texts[b]] for a, b in served[:EXAMPLES]],
    }
    print(f"  {total} pairs, {touched} touched: {label} newly refused {len(refused)}, "
          f"newly served {len(served)}", flush=True)  # fmt: skip
    for a, b in refused[:EXAMPLES]:
        print(f"    refused: {texts[a]!r} / {texts[b]!r}")
    return out


def intent_cost(base: Path, questions: list[tuple[str, str]]) -> dict[str, Any]:
    texts = [t for _, t in questions]
    by_intent: dict[str, list[int]] = defaultdict(list)
    for i, (intent, _) in enumerate(questions):
        by_intent[intent].append(i)
    pairs = [p for ids in by_intent.values() for p in itertools.combinations(ids, 2)]
    touched, differ = changed_decisions(base, texts, pairs)
    out = _summary(texts, len(pairs), touched, differ, "positives")
    # which intents: those asked about a place (weather, travel alerts, time zones) are
    # refused rightly, "where is my card sent" pairs are the cost
    intents = Counter(questions[a][0] for a, _, matches in differ if not matches)
    out["newly_refused_by_intent"] = dict(intents.most_common(15))
    print(f"  by intent: {dict(intents.most_common(8))}", flush=True)
    return out


def pawsx_change(base: Path, lang: str) -> dict[str, Any]:
    rows = pawsx(lang)
    texts = [t for a, b, _ in rows for t in (a, b)]
    out: dict[str, Any] = {}
    for label, name in ((1, "paraphrases"), (0, "non_paraphrases")):
        pairs = [(2 * i, 2 * i + 1) for i, row in enumerate(rows) if row[2] == label]
        print(f"pawsx {lang} {name}:", flush=True)
        touched, differ = changed_decisions(base, texts, pairs)
        out[name] = _summary(texts, len(pairs), touched, differ, name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="the git ref whose rules are the baseline")
    parser.add_argument(
        "--name", default="entity_change_cost", help="bench/results/<name>.json to write"
    )
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", args.base], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(base), commit],
                       cwd=ROOT, check=True)  # fmt: skip
        try:
            results: dict[str, Any] = {"base": commit}
            sets = {
                "banking77": [(q.intent, q.text) for q in load_banking77()],
                "clinc150": [(q.intent, q.text) for q in load_clinc150()],
                "zh_translated": chinese(DATA / "zh_intent_questions.jsonl"),
                "zh_written": chinese(DATA / "zh_written_questions.jsonl"),
            }
            for name, questions in sets.items():
                print(f"{name} (same-intent pairs):", flush=True)
                results[name] = intent_cost(base, questions)
            for lang in ("en", "zh"):
                results[f"pawsx_{lang}"] = pawsx_change(base, lang)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
    write_json(args.name, results)


if __name__ == "__main__":
    main()
