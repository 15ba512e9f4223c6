"""bench/train_verifier.py: a trial recalibration into another directory keeps its
evaluation beside its model; only the shipped model's run writes the repo's file."""

from __future__ import annotations

from pathlib import Path

from bench import verifier_eval
from bench.train_verifier import eval_results_path
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
