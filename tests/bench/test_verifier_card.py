"""bench/verifier_card.py: the card's retrain commands stay runnable shell, one flag per
continued line (an f-string swallowed the backslash-newlines once, joining each command
into one line with runs of spaces)."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

from bench import verifier_card, verifier_eval
from bench.verifier_training import TrainConfig
from validators.verifier import MODEL_DIR


def _bash_block(card: str) -> list[str]:
    section = card.split("## How to retrain", 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()


def _assert_runnable(lines: list[str]) -> None:
    assert lines
    for i, line in enumerate(lines):
        # a flag after a run of spaces inside a line is a joined continuation
        assert not re.search(r"\S {2,}--", line), line
        if line.startswith("    --"):
            assert lines[i - 1].endswith(" \\"), line
        if line.endswith("\\"):
            assert lines[i + 1].startswith("    --"), line


def test_the_written_card_keeps_its_line_continuations(tmp_path: Path) -> None:
    shutil.copy(MODEL_DIR / "zh_encoder.json", tmp_path / "zh_encoder.json")
    card = tmp_path / "MODEL_CARD.md"
    verifier_card.write(
        card,
        counts=Counter(),
        chosen=[],
        n_zh=0,
        stats={"steps": 1, "planned_steps": 1, "minutes": 0.1},
        cfg=TrainConfig(),
        calibration=json.loads((MODEL_DIR / "calibration.json").read_text()),
        fixtures=[],
        result=json.loads(verifier_eval.RESULTS.read_text()),
        timing="",
    )
    lines = _bash_block(card.read_text())
    _assert_runnable(lines)
    assert any("--trainable-layers 10" in line for line in lines)  # the shipped Chinese run


def test_the_shipped_card_keeps_its_line_continuations() -> None:
    _assert_runnable(_bash_block((MODEL_DIR / "MODEL_CARD.md").read_text()))
