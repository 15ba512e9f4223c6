"""bench/train_verifier_zh.py: what its command line does before a quarter hour of
training, where a mistake would otherwise surface only when the weights are written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import train_verifier_zh
from bench.verifier_pairs import VPair


def test_an_output_directory_that_cannot_be_made_fails_before_the_pairs_are_built(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    pairs = tmp_path / "pairs.jsonl"
    with pytest.raises((FileExistsError, NotADirectoryError)):
        train_verifier_zh.main(["--pairs", str(pairs), "--out", str(blocker / "model")])
    assert not pairs.exists()  # nothing was built or trained


def test_a_missing_output_directory_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "trial" / "zh"

    def stop(path: Path, rebuild: bool) -> list:
        assert out.is_dir()  # made before the pairs are loaded
        raise SystemExit("stop here")

    monkeypatch.setattr("bench.train_verifier.load_or_build_pairs", stop)
    with pytest.raises(SystemExit, match="stop here"):
        train_verifier_zh.main(["--pairs", str(tmp_path / "p.jsonl"), "--out", str(out)])


def zh_pairs() -> list[VPair]:
    return [
        VPair(
            f"问题{i}", f"{'同' if label else '异'}{i}", label, kind, "zh", "train", "banking77-zhw"
        )
        for i in range(6)
        for label, kind in ((1, "paraphrase"), (0, "hard"))
    ]


def test_the_judges_scores_become_the_targets_of_the_pairs_it_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = zh_pairs()
    judged = pairs[:8]  # labels 1, 0, 1, 0, ...; the judge overlaps them
    scores = [0.9, 0.3, 0.6, 0.7, 0.75, 0.2, 0.5, 0.4]
    cache = tmp_path / "judge_train_zh.jsonl"
    cache.write_text(
        "".join(
            json.dumps({"a": p.a, "b": p.b, "p": s}) + "\n"
            for p, s in zip(judged, scores, strict=True)
        )
    )
    seen: dict[str, dict] = {}

    def capture(model: object, chosen: list, cfg: object, targets: dict) -> dict:
        seen["targets"] = targets
        raise SystemExit("trained")

    monkeypatch.setattr("bench.train_verifier.load_or_build_pairs", lambda path, rebuild: pairs)
    monkeypatch.setattr(train_verifier_zh, "build", lambda layers: object())
    monkeypatch.setattr(train_verifier_zh, "train", capture)
    argv = ["--out", str(tmp_path / "out"), "--no-english", "--judge-scores", str(cache)]
    with pytest.raises(SystemExit, match="trained"):
        train_verifier_zh.main([*argv, "--judge-weight", "0.25"])
    targets = seen["targets"]
    assert set(targets) == {(p.a, p.b) for p in judged}  # the unjudged keep their labels
    got = [targets[(p.a, p.b)] for p in judged]
    for p, t in zip(judged, got, strict=True):  # 3/4 the label, 1/4 the judge
        assert 0.75 * p.label <= t <= 0.75 * p.label + 0.25
    assert max(abs(t - p.label) for p, t in zip(judged, got, strict=True)) > 0.05
    # The judge's order is kept within each label: 0.9 > 0.75 > 0.6 > 0.5 for positives.
    ranked = sorted(zip(scores, got, judged, strict=True), key=lambda r: r[0], reverse=True)
    positives = [t for _, t, p in ranked if p.label]
    assert positives == sorted(positives, reverse=True)
    # Control: weight 0 (the shipped recipe) trains every pair on its label.
    with pytest.raises(SystemExit, match="trained"):
        train_verifier_zh.main(argv)
    assert seen["targets"] == {}


def refuse_to_build(path: Path, rebuild: bool) -> list:
    raise AssertionError("the pairs were loaded: the refusal came too late")


@pytest.mark.parametrize(
    "extra",
    [
        ["--judge-weight", "0.5", "--teacher-weight", "0.3"],  # two teachers of one pair
        ["--judge-weight", "1.5"],
        ["--judge-weight", "0.5", "--judge-scores", "missing.jsonl"],
    ],
)
def test_a_bad_teacher_is_refused_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    monkeypatch.setattr("bench.train_verifier.load_or_build_pairs", refuse_to_build)
    with pytest.raises(SystemExit) as stopped:
        train_verifier_zh.main(["--out", str(tmp_path / "out"), *extra])
    assert stopped.value.code == 2  # argparse's usage error
    assert not (tmp_path / "out").exists()
