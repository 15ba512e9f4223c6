"""Which intents the served hard negatives come from (issue 12): a misfire rate's anatomy.

A hard negative is two questions of different intents that the embedder puts close
(bench/verifier_pairs.py). The eval split is split by intent, so its hard negatives come
from a few neighbouring intents, and the misfires a results file lists
(``served_negatives``, written by bench/semantic_eval_verifier.py) can all come from a
handful of them. This counts them by intent pair: each question is looked up in
BANKING77 and CLINC150 (``../shared/data``), and Chinese ones in the translated and
written questions (``bench/data/zh_*_questions.jsonl``), by the text as it appears
there, case and surrounding space aside.

    .venv/bin/python bench/misfire_intents.py \\
        [--results bench/results/semantic_eval_verifier_minilm_1500.json ...]

Prints a table per results file and embedder, and writes
bench/results/misfire_intents.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.semantic_data import DATA_DIR, load_banking77, load_clinc150

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
OUT = RESULTS / "misfire_intents.json"
DEFAULT_RESULTS = (
    RESULTS / "semantic_eval_verifier_minilm_1500.json",
    RESULTS / "semantic_eval_verifier.json",
)
ZH_FILES = (
    HERE / "data" / "zh_intent_questions.jsonl",
    HERE / "data" / "zh_written_questions.jsonl",
)
#: What a question is filed under when no source names it.
UNKNOWN = "?"


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def intent_index(data_dir: Path = DATA_DIR, zh_files: Iterable[Path] = ZH_FILES) -> dict[str, str]:
    """Question text (as :func:`_key` folds it) → ``source:intent``; a text filed under
    more than one (a few are, across the sources) → all of them, sorted, joined by ``|``."""
    labels: dict[str, set[str]] = {}
    for q in load_banking77(data_dir) + load_clinc150(data_dir):
        labels.setdefault(_key(q.text), set()).add(f"{q.source}:{q.intent}")
    for path in zh_files:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            labels.setdefault(_key(row["zh"]), set()).add(f"{row['source']}:{row['intent']}")
    return {text: "|".join(sorted(names)) for text, names in labels.items()}


def intent_of(index: dict[str, str], text: str) -> str:
    """``source:intent`` of ``text``, or :data:`UNKNOWN`."""
    return index.get(_key(text), UNKNOWN)


def by_intent_pair(
    served: dict[str, list[dict[str, Any]]], index: dict[str, str], suffix: str = "/hard"
) -> list[dict[str, Any]]:
    """Served negatives of the kinds ending in ``suffix``, counted per (kind, intent
    pair), most first."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for kind, rows in served.items():
        if not kind.endswith(suffix):
            continue
        for row in rows:
            a, b = sorted(intent_of(index, row[q]) for q in ("a", "b"))
            counts[(kind, a, b)] += 1
    return [
        {"kind": kind, "intents": [a, b], "served": n}
        for (kind, a, b), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def anatomy(path: Path, index: dict[str, str]) -> dict[str, Any]:
    result = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    for name, e in result["embedders"].items():
        rows = by_intent_pair(e["served_negatives"], index)
        hard = [k for k in result["counts"] if k.endswith("/hard")]
        # The results list at most MAX_LISTED served negatives a kind: say when it is short.
        served = {k: round(e["verifier"].get(k, 0.0) * result["counts"][k]) for k in hard}
        listed = {k: len(e["served_negatives"].get(k, [])) for k in hard}
        out[name] = {
            "retrieval_threshold": e["retrieval_threshold"],
            "counts": result["counts"],
            "hard_served": sum(r["served"] for r in rows),
            "complete": all(listed[k] == served[k] for k in hard),
            "by_intent_pair": rows,
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, nargs="+", default=list(DEFAULT_RESULTS))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    index = intent_index()
    report: dict[str, Any] = {}
    for path in args.results:
        report[path.name] = anatomy(path, index)
        for name, a in report[path.name].items():
            print(
                f"{path.name} {name} (T {a['retrieval_threshold']}): {a['hard_served']} served"
                + ("" if a["complete"] else " (the results list only some)")
            )
            for r in a["by_intent_pair"]:
                print(f"  {r['served']:3d}  {r['kind']:9s} {' / '.join(r['intents'])}")
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
