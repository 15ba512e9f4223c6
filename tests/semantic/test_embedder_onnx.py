"""The embedder's ONNX Runtime forward: the default on CPU, the same vectors as
torch (real BANKING77 questions, alone, batched and in bulk, in input order), the
same refusals, and a refused or failed export that falls back to torch."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from gateway.settings import Settings
from semantic import Embedder, embedder_onnx
from semantic.embedders import build_embedder
from semantic.errors import EmbedderError, InvalidQuestionError

DATA = Path(
    os.environ.get("CACHEGATE_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def torch_embedder() -> Embedder:
    return Embedder(backend="torch", progress=False)


@pytest.fixture(scope="module")
def questions() -> list[str]:
    path = DATA / "banking77" / "test.csv"
    if not path.exists():
        pytest.skip(f"BANKING77 not found at {path}")
    with path.open(newline="", encoding="utf-8") as f:
        rows = [row["text"] for row in csv.DictReader(f)]
    return rows[::13][:240]  # every 13th: all intents, short and long questions


def test_onnx_is_the_default_on_cpu_and_torch_is_kept_on_request(
    embedder: Embedder, torch_embedder: Embedder
) -> None:
    assert embedder_onnx.is_available()
    assert embedder.backend == "onnx"
    assert torch_embedder.backend == "torch"
    # Same computation, same files: the same embedder id, so stored vectors stay valid.
    assert embedder.embedder_id == torch_embedder.embedder_id


def test_onnx_vectors_equal_torch_alone_batched_and_in_bulk(
    embedder: Embedder, torch_embedder: Embedder, questions: list[str]
) -> None:
    for text in questions[:40]:
        np.testing.assert_allclose(
            embedder.embed([text]), torch_embedder.embed([text]), atol=embedder_onnx.MAX_ABS_DIFF
        )
    batch = questions[:32]  # one padded forward
    np.testing.assert_allclose(
        embedder.embed(batch), torch_embedder.embed(batch), atol=embedder_onnx.MAX_ABS_DIFF
    )
    # More than batch_size: length-sorted batches, rows back in the caller's order
    # (torch takes encode() here, which sorts too, so the check is independent).
    assert len(questions) > embedder.batch_size
    bulk = embedder.embed(questions)
    assert bulk.shape == (len(questions), embedder.dim) and bulk.dtype == np.float32
    np.testing.assert_allclose(bulk, torch_embedder.embed(questions), atol=1e-5)
    np.testing.assert_allclose(bulk[7], embedder.embed([questions[7]])[0], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(bulk, axis=1), 1.0, atol=1e-5)


def test_onnx_refuses_a_question_past_the_window_in_bulk_too(embedder: Embedder) -> None:
    too_long = "card " * embedder.max_tokens
    with pytest.raises(InvalidQuestionError, match="tokens"):
        embedder.embed(["How do I reset my card PIN?", too_long])
    with pytest.raises(InvalidQuestionError, match="tokens"):
        embedder.embed(["How do I reset my card PIN?"] * embedder.batch_size + [too_long])


def test_a_graph_that_differs_from_torch_is_refused(embedder: Embedder) -> None:
    def off_by_a_little(features: Mapping[str, Any]) -> np.ndarray:
        return embedder._torch_forward(features) + 1e-3

    with pytest.raises(EmbedderError, match="differs from torch"):
        embedder_onnx.build_onnx_forward(embedder._model, 1, off_by_a_little)


@pytest.fixture
def failing_export(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise EmbedderError("onnx export of the embedder failed: RuntimeError")

    monkeypatch.setattr(embedder_onnx, "build_onnx_forward", fail)
    yield


@pytest.mark.usefixtures("failing_export")
def test_auto_falls_back_to_torch_when_the_export_fails(
    capsys: pytest.CaptureFixture[str], torch_embedder: Embedder
) -> None:
    fallback = Embedder(progress=True)
    assert fallback.backend == "torch"
    assert "embedding through torch" in capsys.readouterr().err
    text = "what is the exchange rate for euros today"
    np.testing.assert_allclose(fallback.embed([text]), torch_embedder.embed([text]), atol=1e-6)


@pytest.mark.usefixtures("failing_export")
def test_onnx_asked_for_explicitly_raises_when_the_export_fails() -> None:
    with pytest.raises(EmbedderError, match="onnx export"):
        Embedder(backend="onnx", progress=False)


def test_backend_is_validated_in_the_embedder_and_the_settings() -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        Embedder(backend="tensorrt", progress=False)
    with pytest.raises(ValidationError):
        Settings(embedder_backend="tensorrt")
    assert Settings().embedder_backend == "auto"


def test_build_embedder_passes_the_backend_to_minilm() -> None:
    built = build_embedder("minilm", backend="torch", progress=False)
    assert isinstance(built, Embedder) and built.backend == "torch"
