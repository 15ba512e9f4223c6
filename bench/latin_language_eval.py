"""Latin-script questions in other languages than English: the language test, and the
cache's decision on them before and since it (semantic/latin_language.py).

1. **The test.** False positives: every English question of the shared data
   (BANKING77, CLINC150, PAWS-X en, MeanCache) read as another language. Recall: the
   720 questions of ``bench/data/latin_questions.jsonl`` (six languages, written for
   this repository), split by intent into the half looked at while writing the test
   (``dev``) and the half never looked at (``test``).
2. **The decision**, over pairs of that file in one language: positives (same intent),
   hard negatives (each question's nearest question of another intent by e5's cosine)
   and every other pair of two intents; and over ``cross`` pairs, the same question in
   two languages (its cached answer is in the other one: never to be served).
   *Before*: ``auto`` as it was (MiniLM takes every Latin-script question, the English
   cross-encoder judges them). *Now*: the test sends a non-English question to e5 and
   its pair to the multilingual cross-encoder, and refuses a pair in two languages it
   can tell apart. Both at the gateway's retrieval threshold for ``auto`` and the
   verifier's default cut (target 1%, float32), after the entity validator, as the
   cache decides.

    .venv/bin/python bench/latin_language_eval.py

Writes bench/results/latin_language_eval.json and prints the figures.
"""

from __future__ import annotations

import csv
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import environment, write_json
from gateway.verification import retrieval_threshold_for
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder
from semantic.latin_language import (
    bundled_english_words,
    foreign_language,
    foreign_languages,
    is_non_english,
)
from validators import Validator, ValidatorError
from validators.verifier import DEFAULT_TARGET_MISFIRE, PairVerifier

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
QUESTIONS = ROOT / "bench" / "data" / "latin_questions.jsonl"


def english_questions() -> list[str]:
    texts: list[str] = []
    for name in ("train.csv", "test.csv"):
        with (DATA / "banking77" / name).open(encoding="utf-8") as f:
            texts += [row["text"] for row in csv.DictReader(f)]
    clinc = json.loads((DATA / "clinc150" / "data_full.json").read_text(encoding="utf-8"))
    texts += [text for rows in clinc.values() for text, _ in rows]
    for line in (DATA / "pawsx" / "pawsx.en.dev.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        texts += [row["a"], row["b"]]
    for path in sorted((DATA / "meancache_contextual").glob("*.json")):
        texts += _queries(json.loads(path.read_text(encoding="utf-8")))
    return sorted(set(texts))


def _queries(node: Any) -> list[str]:
    """Every string of a MeanCache file but the model's responses."""
    if isinstance(node, list):
        return [q for item in node for q in _queries(item)]
    if isinstance(node, dict):
        out: list[str] = []
        for key, value in node.items():
            if isinstance(value, str):
                out += [] if "Response" in key else [value]
            else:
                out += _queries(value)
        return out
    return []


def detector(rows: Sequence[dict[str, str]], words: frozenset[str]) -> dict[str, Any]:
    english = english_questions()
    flagged = [t for t in english if is_non_english(t, words)]
    intents = sorted({r["intent"] for r in rows})
    looked_at = set(intents[::2])
    recall: dict[str, Any] = {}
    for half, chosen in (("dev", True), ("test", False)):
        part = [r for r in rows if (r["intent"] in looked_at) == chosen]
        found = {r["text"]: is_non_english(r["text"], words) for r in part}
        by_lang = {
            lang: round(float(np.mean([found[r["text"]] for r in part if r["lang"] == lang])), 4)
            for lang in sorted({r["lang"] for r in part})
        }
        recall[half] = {
            "questions": len(part),
            "recall": round(float(np.mean(list(found.values()))), 4),
        }
        recall[half] |= {"by_language": by_lang}
    return {
        "english_questions": len(english),
        "english_read_as_foreign": len(flagged),
        "false_positive_rate": round(len(flagged) / len(english), 6),
        "false_positives": flagged,
        "recall": recall,
        "languages_guessed": _guessed(rows, words),
    }


def _guessed(rows: Sequence[dict[str, str]], words: frozenset[str]) -> dict[str, float]:
    """Share of each language's found questions given its own code (function words)."""
    out = {}
    for lang in sorted({r["lang"] for r in rows}):
        guesses = [foreign_language(r["text"], words) for r in rows if r["lang"] == lang]
        found = [g for g in guesses if g is not None]
        out[lang] = round(sum(g == lang for g in found) / max(len(found), 1), 4)
    return out


def pairs_of(
    rows: Sequence[dict[str, str]], e5: E5Embedder
) -> tuple[list[tuple[int, int]], list[str]]:
    vectors = e5.embed([r["text"] for r in rows])
    pairs: list[tuple[int, int]] = []
    kinds: list[str] = []
    for lang in sorted({r["lang"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["lang"] == lang]
        for i, j in itertools.combinations(idx, 2):
            pairs.append((i, j))
            kinds.append("positive" if rows[i]["intent"] == rows[j]["intent"] else "negative")
        for i in idx:
            others = [j for j in idx if rows[j]["intent"] != rows[i]["intent"]]
            nearest = others[int(np.argmax(vectors[others] @ vectors[i]))]
            pairs.append((i, nearest))
            kinds.append("hard")
    # The same question in two languages: its answer is in the other one, never served.
    by_slot: dict[tuple[str, int], list[int]] = {}
    seen: dict[tuple[str, str], int] = {}
    for i, r in enumerate(rows):
        n = seen[(r["intent"], r["lang"])] = seen.get((r["intent"], r["lang"]), -1) + 1
        by_slot.setdefault((r["intent"], n), []).append(i)
    for same in by_slot.values():
        for i, j in itertools.combinations(same, 2):
            pairs.append((i, j))
            kinds.append("cross")
    return pairs, kinds


def decide(
    texts: Sequence[str],
    pairs: Sequence[tuple[int, int]],
    routed: RoutedEmbedder,
    verifier: PairVerifier,
    accepted: np.ndarray,
) -> np.ndarray:
    """Served or not, per pair, as the cache decides (a question equal to the stored one
    is left out of the pairs: these are all different questions)."""
    vectors = routed.embed(list(texts))
    cosine = np.asarray([float(vectors[i] @ vectors[j]) for i, j in pairs])
    threshold = retrieval_threshold_for(routed.embedder_id)
    cut = verifier.cut_for(DEFAULT_TARGET_MISFIRE)
    # Only what the index retrieves and the validator accepts reaches the verifier.
    asked = np.flatnonzero(accepted & (cosine >= threshold))
    ab = [(texts[pairs[int(k)][0]], texts[pairs[int(k)][1]]) for k in asked]
    scores: list[float] = []
    for lo in range(0, len(ab), 64):
        verdicts = verifier.verdicts_for_pairs(ab[lo : lo + 64])
        scores += [v.score if v.supported else 0.0 for v in verdicts]
        print(f"verifier: {len(scores)}/{len(ab)}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    served = np.zeros(len(pairs), dtype=bool)
    served[asked] = np.asarray(scores) > cut
    return served


def rates(served: np.ndarray, kinds: np.ndarray, langs: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("positive", "hard", "negative", "cross"):
        m = kinds == kind
        out[kind] = {
            "served": int(served[m].sum()),
            "pairs": int(m.sum()),
            "rate": round(float(served[m].mean()), 4),
        }
        out[kind]["by_language"] = {
            lang: round(float(served[m & (langs == lang)].mean()), 4)
            for lang in sorted(set(langs[m]))
        }
    return out


def main() -> int:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    words = bundled_english_words()
    result: dict[str, Any] = {"environment": environment(), "detector": detector(rows, words)}
    d = result["detector"]
    print(
        f"English questions read as another language: {d['english_read_as_foreign']} of "
        f"{d['english_questions']}; recall dev {d['recall']['dev']['recall']:.3f}, "
        f"test {d['recall']['test']['recall']:.3f}"
    )
    e5 = E5Embedder(progress=False)
    texts = [r["text"] for r in rows]
    pairs, kind_list = pairs_of(rows, e5)
    kinds = np.asarray(kind_list)
    langs = np.asarray([rows[i]["lang"] for i, _ in pairs])
    validator = Validator()
    accepted = np.asarray([_accepts(validator, texts[i], texts[j]) for i, j in pairs])
    languages: Callable[[str], frozenset[str] | None] = lambda t: foreign_languages(t, words)  # noqa: E731
    setups = {
        "before": (Embedder(progress=False, english_only=False), PairVerifier(threads=2)),
        "now": (Embedder(progress=False), PairVerifier(threads=2, foreign_languages=languages)),
    }
    result["pairs"] = {
        k: int((kinds == k).sum()) for k in ("positive", "hard", "negative", "cross")
    }
    for name, (first, verifier) in setups.items():
        served = decide(texts, pairs, RoutedEmbedder(first, e5), verifier, accepted)
        result[name] = rates(served, kinds, langs)
        # the served pairs no cache should serve, to read by hand
        result[name]["served_wrong"] = [
            {"kind": str(kinds[k]), "a": texts[pairs[k][0]], "b": texts[pairs[k][1]]}
            for k in np.flatnonzero(served & (kinds != "positive"))
        ]
        r = result[name]
        print(
            f"{name:6s} positives {r['positive']['rate']:.2%}  hard negatives "
            f"{r['hard']['rate']:.2%} ({r['hard']['served']}/{r['hard']['pairs']})  other "
            f"negatives {r['negative']['served']}/{r['negative']['pairs']}  the same question "
            f"in two languages {r['cross']['served']}/{r['cross']['pairs']}"
        )
    write_json("latin_language_eval", result)
    return 0


def _accepts(validator: Validator, a: str, b: str) -> bool:
    try:
        return validator.check(a, b, None, 1.0, None, ()) is None
    except ValidatorError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
