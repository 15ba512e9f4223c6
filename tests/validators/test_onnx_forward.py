"""The verifier's float32 forwards through ONNX Runtime: the default where they
apply, the same scores as torch on real pairs (English and Chinese), a graph that
differs refused, and torch kept for bfloat16 or on request."""

from __future__ import annotations

import csv
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from gateway.settings import Settings
from tests.validators.conftest import DATA
from validators import onnx_forward
from validators.verifier import PairVerifier
from validators.verifier_errors import VerifierModelError

ZH_QUESTIONS = Path(__file__).resolve().parents[2] / "bench" / "data" / "zh_intent_questions.jsonl"

#: Probabilities: the logits agree to MAX_LOGIT_DIFF, a probability to a quarter of it.
SCORE_TOLERANCE = onnx_forward.MAX_LOGIT_DIFF / 4


@pytest.fixture(scope="module")
def onnx_verifier() -> PairVerifier:
    return PairVerifier(cache_size=0)


@pytest.fixture(scope="module")
def torch_verifier() -> PairVerifier:
    return PairVerifier(cache_size=0, backend="torch")


def english_pairs() -> list[tuple[str, str]]:
    path = DATA / "banking77" / "test.csv"
    if not path.exists():
        pytest.skip(f"BANKING77 not found at {path}")
    with path.open(newline="", encoding="utf-8") as f:
        texts = [row["text"] for row in csv.DictReader(f)][::17][:121]
    return list(itertools.pairwise(texts))


def chinese_pairs() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in ZH_QUESTIONS.read_text(encoding="utf-8").splitlines()]
    texts = [row["zh"] for row in rows][::11][:81]
    return list(itertools.pairwise(texts))


def test_onnx_runs_float32_and_torch_runs_bfloat16_or_on_request(
    onnx_verifier: PairVerifier, torch_verifier: PairVerifier
) -> None:
    assert onnx_forward.is_available()
    assert onnx_verifier.backend == "onnx"
    assert torch_verifier.backend == "torch"
    bf16 = PairVerifier(cache_size=0, zh=False, dtype="bfloat16")
    assert bf16.backend == "torch"  # its bfloat16 products are faster in torch
    with pytest.raises(VerifierModelError, match="does not compute bfloat16"):
        PairVerifier(cache_size=0, zh=False, dtype="bfloat16", backend="onnx")


def test_english_scores_equal_torch_on_real_pairs(
    onnx_verifier: PairVerifier, torch_verifier: PairVerifier
) -> None:
    pairs = english_pairs()
    # Five candidates per call, as a lookup asks: padded batches of mixed lengths.
    for start in range(0, len(pairs), 5):
        query = pairs[start][0]
        candidates = [b for _, b in pairs[start : start + 5]]
        np.testing.assert_allclose(
            onnx_verifier.score(query, candidates),
            torch_verifier.score(query, candidates),
            atol=SCORE_TOLERANCE,
        )


def test_chinese_scores_equal_torch_on_real_pairs(
    onnx_verifier: PairVerifier, torch_verifier: PairVerifier
) -> None:
    assert onnx_verifier.zh_encoder is not None and torch_verifier.zh_encoder is not None
    assert onnx_verifier.zh_encoder.backend == "onnx"
    assert torch_verifier.zh_encoder.backend == "torch"
    pairs = chinese_pairs()
    got = onnx_verifier.zh_raw_scores(pairs)
    want = torch_verifier.zh_raw_scores(pairs)
    assert None not in got and None not in want
    np.testing.assert_allclose(
        np.asarray(got, dtype=float), np.asarray(want, dtype=float), atol=SCORE_TOLERANCE
    )
    # Served verdicts (mapped onto the common scale) agree as well.
    query, candidates = pairs[0][0], [b for _, b in pairs[:5]]
    np.testing.assert_allclose(
        onnx_verifier.score(query, candidates),
        torch_verifier.score(query, candidates),
        atol=SCORE_TOLERANCE,
    )


@pytest.fixture
def differing_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    def off(*args: Any) -> float:
        return 10 * onnx_forward.MAX_LOGIT_DIFF

    monkeypatch.setattr(onnx_forward, "max_difference", off)


@pytest.mark.usefixtures("differing_graph")
def test_a_graph_that_differs_is_refused_and_auto_stays_on_torch(
    caplog: pytest.LogCaptureFixture, torch_verifier: PairVerifier
) -> None:
    with caplog.at_level(logging.WARNING, logger="cachegate.validators.verifier"):
        fallback = PairVerifier(cache_size=0)
        assert fallback.backend == "torch"
        assert fallback.zh_encoder is not None and fallback.zh_encoder.backend == "torch"
    assert sum("differs from torch" in r.getMessage() for r in caplog.records) == 2
    pair = english_pairs()[0]
    assert fallback.score(pair[0], [pair[1]]) == torch_verifier.score(pair[0], [pair[1]])
    with pytest.raises(VerifierModelError, match="differs from torch"):
        PairVerifier(cache_size=0, zh=False, backend="onnx")


def test_backend_is_validated_in_the_verifier_and_the_settings() -> None:
    with pytest.raises(ValueError, match="verifier backend must be one of"):
        PairVerifier(cache_size=0, backend="tensorrt")
    with pytest.raises(ValidationError):
        Settings(verifier_backend="tensorrt")
    assert Settings().verifier_backend == "auto"
