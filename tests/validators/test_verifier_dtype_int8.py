"""The int8 English verifier (``dtype="int8"``: validators/verifier_dtype.py, its graph
in validators/verifier_en.py): it runs in ONNX Runtime only, reads its own calibration
(``calibration_int8.json``) and refuses to load without one of its weights (no float32
fallback: its scores drift by the size of the cuts' margins), decides clear pairs as
float32 does at each one's own cut, keeps each cut's promise on its own scores, and
scores a pair the same whatever pairs share its call (one row per forward)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from validators.verifier import CALIBRATION_FILES, MODEL_DIR, PairVerifier
from validators.verifier_en import FORWARD_CHUNK, INT8_FORWARD_CHUNK
from validators.verifier_errors import VerifierModelError
from validators.verify_batcher import DEFAULT_MAX_ROWS

pytestmark = pytest.mark.slow

#: A pair is "clear" when its float32 score lies this far above the float32 cut, or
#: CLEAR_BELOW below it (probabilities crowd near 1: 0.01 there is ~0.5 in logit); int8
#: moves a score by ~0.01 on average (the model card's int8 section).
CLEAR_ABOVE, CLEAR_BELOW = 0.01, 0.08

#: Real questions of the kinds the cache sees (BANKING77/CLINC150-like): paraphrases,
#: direction and polarity swaps, neighbouring intents; scores span the whole range.
PAIRS = [
    ("How do I reset my password?", "I forgot my password, how can I reset it?"),
    ("How do I convert Celsius to Fahrenheit?", "What's the way to convert Celsius to Fahrenheit?"),
    ("How do I convert Celsius to Fahrenheit?", "How do I convert Fahrenheit to Celsius?"),
    ("Why was my card payment declined?", "Why was my card payment accepted?"),
    ("How can I change my PIN?", "how do i change my card pin"),
    ("What is the exchange rate for euros?", "euro exchange rate today"),
    ("How do I close my account?", "I want to close my account, how?"),
    ("How do I close my account?", "How do I open an account?"),
    ("Where can I find my IBAN?", "how do i get my iban number"),
    ("Can I cancel a transfer?", "How do I cancel a bank transfer I made?"),
    ("What are the side effects of aspirin?", "what side effects does aspirin have"),
    ("What are the side effects of aspirin?", "What is the dosage of aspirin?"),
    ("how long does a transfer take to arrive", "when will my transfer arrive"),
    ("Is there a fee for topping up by card?", "Do you charge for card top ups?"),
    ("What time does the store open?", "What time does the store close?"),
    ("how do i order a new card", "I need to order a replacement card"),
    ("how do i order a new card", "how do i activate my new card"),
    ("What's the weather like tomorrow?", "will it rain tomorrow"),
    ("Tell me a joke", "say something funny"),
    ("set an alarm for 7 am", "wake me up at 7"),
    ("book a table for two", "cancel my table reservation"),
    ("how much is my car insurance", "what is my car insurance premium"),
]


def calibration(dtype: str) -> dict[str, Any]:
    return json.loads((MODEL_DIR / CALIBRATION_FILES[dtype]).read_text())  # type: ignore[index]


@pytest.fixture(scope="module")
def fp32() -> PairVerifier:
    return PairVerifier(cache_size=0, zh=False)


@pytest.fixture(scope="module")
def int8() -> PairVerifier:
    return PairVerifier(cache_size=0, zh=False, dtype="int8")


def test_int8_runs_in_onnx_runtime_only() -> None:
    with pytest.raises(VerifierModelError, match="ONNX Runtime only"):
        PairVerifier(cache_size=0, zh=False, dtype="int8", backend="torch")


def test_int8_reads_its_own_calibration(fp32: PairVerifier, int8: PairVerifier) -> None:
    assert int8.backend == "onnx" and int8.dtype == "int8"
    assert int8.calibration_dtype == "int8" and int8.calibration == calibration("int8")
    assert fp32.model_id != int8.model_id  # verdicts of one never answer for the other
    shipped = calibration("int8")
    meta = json.loads((MODEL_DIR / "verifier.json").read_text())
    assert shipped["dtype"] == "int8" and shipped["weights_sha256"] == meta["weights_sha256"]
    assert shipped["counts"] == calibration("float32")["counts"]
    # Each cut keeps its promise on the scores of its own dtype.
    for v in (int8, fp32):
        cut = v.cut_for(0.01)
        for negatives in v.calibration["negatives"].values():
            assert sum(s > cut for s in negatives) <= 0.01 * len(negatives)


def test_int8_scores_move_but_clear_pairs_are_decided_alike(
    fp32: PairVerifier, int8: PairVerifier
) -> None:
    a = [v.score for v in fp32.verdicts_for_pairs(PAIRS)]
    b = [v.score for v in int8.verdicts_for_pairs(PAIRS)]
    assert a != b  # a different graph: not float32 under another name
    assert sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a) < 0.05
    cut32, cut8 = fp32.cut_for(0.01), int8.cut_for(0.01)
    clear = [
        (x, y)
        for x, y in zip(a, b, strict=True)
        if x > cut32 + CLEAR_ABOVE or x < cut32 - CLEAR_BELOW
    ]
    assert len(clear) >= 15
    # Each at its own cut: the same decision on every clear pair, both ways.
    assert all((x > cut32) == (y > cut8) for x, y in clear), clear
    assert {x > cut32 for x, _ in clear} == {True, False}


def test_an_int8_score_does_not_depend_on_the_pairs_beside_it(
    fp32: PairVerifier, int8: PairVerifier
) -> None:
    # ONNX Runtime quantizes activations with one scale per batch: in a shared forward
    # a pair's score moved with its neighbours (another tenant's, through the batcher).
    # Each int8 row runs alone, so it scores exactly as alone.
    target, *others = PAIRS[:6]
    alone = int8.verdicts_for_pairs([target])[0].score
    beside = int8.verdicts_for_pairs([target, *others])[0].score
    assert int8.en.forward_chunk == INT8_FORWARD_CHUNK == 1
    assert beside == alone
    # Nothing to share, so concurrent lookups are not merged either (a merged lookup
    # would wait for every other's forwards); float32 keeps merging them.
    assert int8.batcher.max_rows == 1 and fp32.batcher.max_rows == DEFAULT_MAX_ROWS
    # Control: with the rows sharing one forward, as before, the neighbours move it.
    int8.en.forward_chunk = FORWARD_CHUNK
    try:
        shared = int8.verdicts_for_pairs([target, *others])[0].score
        assert shared != alone
    finally:
        int8.en.forward_chunk = INT8_FORWARD_CHUNK


def model_copy(tmp_path: Path, int8_calibration: str | None) -> Path:
    """The shipped model directory (linked) with ``int8_calibration`` (None: none)."""
    copy = tmp_path / "model"
    copy.mkdir()
    for path in MODEL_DIR.iterdir():
        if path.name != CALIBRATION_FILES["int8"]:
            (copy / path.name).symlink_to(path)
    if int8_calibration is not None:
        (copy / CALIBRATION_FILES["int8"]).write_text(int8_calibration)
    return copy


def test_without_its_own_calibration_int8_refuses_to_load(tmp_path: Path) -> None:
    with pytest.raises(VerifierModelError, match="calibrate-dtype int8"):
        PairVerifier(model_copy(tmp_path, None), cache_size=0, zh=False, dtype="int8")


def test_an_int8_calibration_of_other_weights_or_dtype_is_refused(tmp_path: Path) -> None:
    stale = {**calibration("int8"), "weights_sha256": "0" * 64}
    with pytest.raises(VerifierModelError, match="no int8 calibration"):
        PairVerifier(model_copy(tmp_path, json.dumps(stale)), cache_size=0, zh=False, dtype="int8")
    other = tmp_path / "other"
    other.mkdir()
    bf16 = calibration("bfloat16")  # right weights, wrong dtype
    with pytest.raises(VerifierModelError, match="no int8 calibration"):
        PairVerifier(model_copy(other, json.dumps(bf16)), cache_size=0, zh=False, dtype="int8")
    # Nor one with no scores (a calibration that was never finished).
    empty = tmp_path / "empty"
    empty.mkdir()
    unscored = {**calibration("int8"), "negatives": {}}
    with pytest.raises(VerifierModelError, match="no int8 calibration"):
        PairVerifier(model_copy(empty, json.dumps(unscored)), cache_size=0, zh=False, dtype="int8")
    # Positive control: the same copy with the shipped file loads.
    ok = tmp_path / "ok"
    ok.mkdir()
    v = PairVerifier(
        model_copy(ok, json.dumps(calibration("int8"))), cache_size=0, zh=False, dtype="int8"
    )
    assert v.calibration_dtype == "int8"
