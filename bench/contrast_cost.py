"""What the contrast sets cost in recall: how many same-intent pairs of the data sets
they refuse (validators/contrasts.py and the Chinese antonym 上涨 / 下跌; README, the
entity kinds table). Every pair of every intent is counted, not a sample: BANKING77,
CLINC150 and the Chinese question files (translated and written).

A pair is refused when both questions name a member of one set and the members differ
(the polarity kind's both-sides rule), so only questions naming a member are compared.

Run: ``.venv/bin/python -m bench.contrast_cost`` → bench/results/contrast_cost.json
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench._common import write_json
from bench.semantic_data import load_banking77, load_clinc150
from validators.polarity import compare_polarity, polarity_values
from validators.text import prepare

DATA = Path(__file__).resolve().parent / "data"
#: The polarity values this measures (what session 38 added)
NEW = ("contrast_", "order_", "antonym_rise")


def contrast_values(text: str) -> frozenset[str]:
    return frozenset(v for v in polarity_values(prepare(text)) if v.startswith(NEW))


def chinese(path: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [(f"{r['source']}/{r['intent']}", r["zh"]) for r in rows if r.get("zh")]


def measure(questions: list[tuple[str, str]], examples: int = 10) -> dict[str, Any]:
    by_intent: dict[str, list[str]] = defaultdict(list)
    for intent, text in questions:
        by_intent[intent].append(text)
    total = refused = 0
    shown: list[list[str]] = []
    for intent, texts in sorted(by_intent.items()):
        total += len(texts) * (len(texts) - 1) // 2
        named = [(t, v) for t in texts if (v := contrast_values(t))]
        for (a, va), (b, vb) in itertools.combinations(named, 2):
            if not compare_polarity(va, vb):
                refused += 1
                if len(shown) < examples:
                    shown.append([intent, a, b])
    return {
        "questions": len(questions),
        "same_intent_pairs": total,
        "refused": refused,
        "refused_share": refused / total if total else 0.0,
        "examples": shown,
    }


def main() -> None:
    sets = {
        "banking77": [(q.intent, q.text) for q in load_banking77()],
        "clinc150": [(q.intent, q.text) for q in load_clinc150()],
        "zh_translated": chinese(DATA / "zh_intent_questions.jsonl"),
        "zh_written": chinese(DATA / "zh_written_questions.jsonl"),
    }
    results: dict[str, Any] = {}
    for name, questions in sets.items():
        r = results[name] = measure(questions)
        print(
            f"{name}: {r['questions']} questions, {r['same_intent_pairs']} same-intent pairs, "
            f"refused {r['refused']} ({r['refused_share']:.4%})",
            flush=True,
        )
        for intent, a, b in r["examples"]:
            print(f"    {intent}: {a!r} / {b!r}")
    write_json("contrast_cost", results)


if __name__ == "__main__":
    main()
