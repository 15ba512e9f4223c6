"""How often each scenario guard refuses BANKING77 / CLINC150 questions, against
hand labels of which intents are personal (validators/data/intent_labels.json).

The labels say, per intent, whether the answer depends on the asker's own data
(seed 003's 强个性化). For every guard this reports the refusal rate on questions
of personal and of non-personal intents; for ``personalized`` also precision and
recall (a question counts as personal when its intent is labelled personal).

Tuning protocol: the rules of validators/guards.py were written looking only at
the *train* questions of the "tune" half of the intents (even positions in the
sorted intent list of each data set). The headline numbers are on the *test*
questions of the other half ("held_out"), which no rule was written against;
the test questions of all intents are reported too.

Run: ``.venv/bin/python -m bench.guard_eval`` → bench/results/guard_eval.json
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench._common import write_json
from bench.semantic_data import DATA_DIR
from validators.guards import GUARDS

LABELS = Path(__file__).resolve().parents[1] / "validators" / "data" / "intent_labels.json"

Question = tuple[str, str, str]  # (source, intent, text)


def load_labels() -> dict[tuple[str, str], bool]:
    data = json.loads(LABELS.read_text(encoding="utf-8"))
    return {
        (source, intent): bool(label["personal"])
        for source in ("banking77", "clinc150")
        for intent, label in data[source].items()
    }


def load_questions(split: str) -> list[Question]:
    """``split`` is ``train`` or ``test`` (CLINC150's ``val`` goes with train)."""
    out: list[Question] = []
    with (DATA_DIR / "banking77" / f"{split}.csv").open(newline="", encoding="utf-8") as fh:
        out += [("banking77", r["category"], r["text"].strip()) for r in csv.DictReader(fh)]
    data = json.loads((DATA_DIR / "clinc150" / "data_full.json").read_text(encoding="utf-8"))
    for part in ("train", "val") if split == "train" else ("test",):
        out += [("clinc150", intent, text.strip()) for text, intent in data[part]]
    return out


def halves(labels: dict[tuple[str, str], bool]) -> dict[str, set[tuple[str, str]]]:
    """Intents at even positions of each data set's sorted list tune; odd ones are held out."""
    tune: set[tuple[str, str]] = set()
    held: set[tuple[str, str]] = set()
    for source in ("banking77", "clinc150"):
        for i, intent in enumerate(sorted(k[1] for k in labels if k[0] == source)):
            (tune if i % 2 == 0 else held).add((source, intent))
    return {"tune": tune, "held_out": held}


def measure(questions: list[Question], labels: dict[tuple[str, str], bool]) -> dict[str, Any]:
    personal = [labels[(s, i)] for s, i, _ in questions]
    report: dict[str, Any] = {
        "questions": len(questions),
        "personal_questions": sum(personal),
        "intents": len({(s, i) for s, i, _ in questions}),
    }
    for name, guard in GUARDS.items():
        fired = [guard.check(text) is not None for _, _, text in questions]
        on_p = [f for f, p in zip(fired, personal, strict=True) if p]
        on_n = [f for f, p in zip(fired, personal, strict=True) if not p]
        entry: dict[str, Any] = {
            "refusal_rate_personal": round(sum(on_p) / max(len(on_p), 1), 4),
            "refusal_rate_not_personal": round(sum(on_n) / max(len(on_n), 1), 4),
            "refusal_rate_all": round(sum(fired) / max(len(fired), 1), 4),
        }
        if name == "personalized":
            tp = sum(on_p)
            entry["precision"] = round(tp / max(sum(fired), 1), 4)
            entry["recall"] = round(tp / max(len(on_p), 1), 4)
            by_intent: dict[tuple[str, str], list[bool]] = defaultdict(list)
            for (s, i, _), f in zip(questions, fired, strict=True):
                by_intent[(s, i)].append(f)
            rates = {k: sum(v) / len(v) for k, v in by_intent.items()}
            entry["most_refused_not_personal"] = [
                {"intent": f"{s}:{i}", "rate": round(r, 3)}
                for (s, i), r in sorted(rates.items(), key=lambda kv: -kv[1])
                if not labels[(s, i)] and r > 0
            ][:10]
            entry["least_refused_personal"] = [
                {"intent": f"{s}:{i}", "rate": round(r, 3)}
                for (s, i), r in sorted(rates.items(), key=lambda kv: kv[1])
                if labels[(s, i)]
            ][:10]
            rules = Counter(m.rule for _, _, t in questions if (m := guard.check(t)) is not None)
            entry["by_rule"] = dict(rules.most_common())
        report[name] = entry
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("train", "test"), default="test")
    args = parser.parse_args()
    labels = load_labels()
    parts = halves(labels)
    questions = load_questions(args.split)
    unlabelled = {(s, i) for s, i, _ in questions} - labels.keys()
    if unlabelled:
        raise SystemExit(f"intents without a label: {sorted(unlabelled)[:5]}")
    results = {
        "split": args.split,
        "protocol": "rules written against the train questions of the tune half only; "
        "held_out = the other half's intents, the headline numbers",
        "held_out": measure([q for q in questions if q[:2] in parts["held_out"]], labels),
        "tune": measure([q for q in questions if q[:2] in parts["tune"]], labels),
        "all": measure(questions, labels),
    }
    for part in ("held_out", "tune", "all"):
        p = results[part]["personalized"]
        print(
            f"{part:9s} personalized precision {p['precision']:.3f} recall {p['recall']:.3f} "
            f"refuses {p['refusal_rate_not_personal']:.1%} of non-personal, "
            f"high_risk refuses {results[part]['high_risk']['refusal_rate_all']:.1%}"
        )
    name = "guard_eval" if args.split == "test" else "guard_eval_train"
    write_json(name, results)


if __name__ == "__main__":
    main()
