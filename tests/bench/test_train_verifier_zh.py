"""bench/train_verifier_zh.py: what its command line does before a quarter hour of
training, where a mistake would otherwise surface only when the weights are written."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import train_verifier_zh


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
