"""Questions and conversations of the semantic-cache benchmarks, read from ../shared/data.

The pair kinds (``Pair.kind``, rules in bench/semantic_pairs.py), the records
(``Question``, ``Conversation``, ``Pair``), the text normalization that decides
when two texts are one entry, and the loaders of BANKING77, CLINC150 and the
MeanCache contextual files. Shared by bench/semantic_eval.py and
bench/semantic_latency.py.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: ../shared/data next to the repository, or $CACHEGATE_DATA (as in tests/validators).
DATA_DIR = Path(
    os.environ.get("CACHEGATE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)

POSITIVE = "positive"
POSITIVE_RANDOM = "positive_random"
HARD = "hard"
ENTITY = "entity"
CONTEXT = "context"
KINDS = (POSITIVE, POSITIVE_RANDOM, HARD, ENTITY, CONTEXT)
NEGATIVE_KINDS = (HARD, ENTITY, CONTEXT)


@dataclass(frozen=True)
class Question:
    text: str
    intent: str
    source: str  # "banking77" or "clinc150"


@dataclass(frozen=True)
class Conversation:
    main: str
    answer: str
    followup: str


@dataclass(frozen=True)
class Pair:
    kind: str
    query: str
    cached: str
    same_answer: bool
    subkind: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subkind": self.subkind,
            "query": self.query,
            "cached": self.cached,
            "same_answer": self.same_answer,
            **self.meta,
        }


# -- loading -----------------------------------------------------------------------


_SPACES = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s?!.]+$")


# Pair builders ask it of the same ~20k texts over a million times (half of a build).
@functools.lru_cache(maxsize=1 << 18)
def normalized(text: str) -> str:
    """Case, whitespace and trailing punctuation folded: what makes two texts one entry."""
    return _TRAILING.sub("", _SPACES.sub(" ", text.casefold()).strip())


def _dedupe(questions: Iterable[Question]) -> list[Question]:
    """First occurrence of each normalized text per source (label-noise copies dropped)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for q in questions:
        key = (q.source, normalized(q.text))
        if q.text.strip() and key not in seen:
            seen.add(key)
            out.append(q)
    return out


def load_banking77(data_dir: Path = DATA_DIR) -> list[Question]:
    out = []
    for split in ("train", "test"):
        with (data_dir / "banking77" / f"{split}.csv").open(newline="", encoding="utf-8") as fh:
            out += [
                Question(r["text"].strip(), r["category"], "banking77") for r in csv.DictReader(fh)
            ]
    return _dedupe(out)


def load_clinc150(data_dir: Path = DATA_DIR) -> list[Question]:
    """In-scope questions only (the ``oos`` splits have no intent to compare)."""
    data = json.loads((data_dir / "clinc150" / "data_full.json").read_text(encoding="utf-8"))
    out = [
        Question(text.strip(), intent, "clinc150")
        for split in ("train", "val", "test")
        for text, intent in data[split]
    ]
    return _dedupe(out)


def load_conversations(data_dir: Path = DATA_DIR) -> list[Conversation]:
    """Every distinct (main question, follow-up) of the MeanCache contextual files."""
    seen: set[tuple[str, str]] = set()
    out = []
    for path in sorted((data_dir / "meancache_contextual").glob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8")):
            main = str(item["Main Query"]).strip()
            followup = str(item["Follow-Up Query"]).strip()
            key = (normalized(main), normalized(followup))
            if main and followup and key not in seen:
                seen.add(key)
                out.append(Conversation(main, str(item.get("Main Query Response", "")), followup))
    return out


def sample_per_intent(questions: Sequence[Question], per_intent: int, seed: int) -> list[Question]:
    """Up to ``per_intent`` questions of every intent, chosen with ``seed``."""
    rng = random.Random(seed)
    by_intent: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for q in questions:
        by_intent[(q.source, q.intent)].append(q)
    out = []
    for key in sorted(by_intent):
        group = by_intent[key]
        out += rng.sample(group, min(per_intent, len(group)))
    return out
