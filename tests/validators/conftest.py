"""Helpers shared by the validators tests: real data from ../shared/data."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from validators import compare_entities, extract_entities

DATA = Path(
    os.environ.get("CACHEGATE_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)


def mismatch(a: str, b: str) -> str | None:
    """The first kind on which the two questions disagree (None: they agree)."""
    return compare_entities(extract_entities(a), extract_entities(b)).mismatch_kind


@pytest.fixture(scope="session")
def banking77() -> list[tuple[str, str]]:
    path = DATA / "banking77" / "test.csv"
    if not path.exists():
        pytest.skip(f"BANKING77 not found at {path}")
    with path.open(newline="", encoding="utf-8") as f:
        return [(row["text"], row["category"]) for row in csv.DictReader(f)]


@pytest.fixture(scope="session")
def clinc150() -> dict[str, list[tuple[str, str]]]:
    path = DATA / "clinc150" / "data_full.json"
    if not path.exists():
        pytest.skip(f"CLINC150 not found at {path}")
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {split: [(t, i) for t, i in rows] for split, rows in raw.items()}
