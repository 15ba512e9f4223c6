"""bench/semantic_eval_verifier.py keeps other embedders' columns only for the same pairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.semantic_eval_verifier import merge_previous


def _result(embedders: dict[str, Any], pairs: int = 100, cut: float = 0.945) -> dict[str, Any]:
    return {
        "split": "eval",
        "threshold_chosen_on": "cal",
        "pairs": pairs,
        "cal_pairs": 50,
        "counts": {"hard": 10, "paraphrase": 10},
        "verifier_cut": cut,
        "embedders": embedders,
    }


def test_same_pairs_keep_the_other_embedders_column(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text(json.dumps(_result({"minilm": {"t": 0.76}, "e5": {"t": 0.90}})))
    merged = merge_previous(_result({"e5": {"t": 0.94}}), out)
    # the new e5 column wins; minilm is carried over untouched
    assert merged["embedders"] == {"minilm": {"t": 0.76}, "e5": {"t": 0.94}}


def test_other_pairs_or_cut_replace_the_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text(json.dumps(_result({"minilm": {"t": 0.76}})))
    for new in (_result({"e5": {"t": 0.94}}, pairs=120), _result({"e5": {"t": 0.94}}, cut=0.9)):
        assert merge_previous(new, out)["embedders"] == {"e5": {"t": 0.94}}


def test_missing_or_broken_file_is_no_merge(tmp_path: Path) -> None:
    new = _result({"e5": {"t": 0.94}})
    assert merge_previous(new, tmp_path / "absent.json") == new
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert merge_previous(new, broken) == new
