from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semantic.embedder import Embedder
from semantic.embedder_base import TextEmbedder
from semantic.errors import EmbedderError, InvalidQuestionError
from semantic.model_files import bundled_model_path, model_digest


def test_bundled_model_is_local() -> None:
    path = bundled_model_path()
    assert (path / "config.json").is_file()
    assert any(path.glob("*.safetensors"))


def test_vectors_are_normalized_float32(embedder: Embedder) -> None:
    assert isinstance(embedder, TextEmbedder)
    vectors = embedder.embed(["How do I reset my password?", "今天天气如何"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, embedder.dim) == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_batching_does_not_change_vectors(embedder: Embedder) -> None:
    texts = [f"question number {i} about refunds" for i in range(5)]
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_paraphrase_scores_above_unrelated(embedder: Embedder) -> None:
    a, b, c = embedder.embed(
        ["How do I reset my password?", "How can I reset my password?", "What is the weather?"]
    )
    assert float(a @ b) > 0.95
    assert float(a @ c) < 0.5


def test_embedder_id_names_model_dim_and_digest(
    embedder: Embedder, other_embedder: Embedder
) -> None:
    name, dim, digest = embedder.embedder_id.split(":")
    assert (name, dim) == ("all-MiniLM-L6-v2", "384")
    assert digest == model_digest(bundled_model_path())[:16]
    # Loaded by path under another name: same digest, different id.
    assert other_embedder.embedder_id.startswith("minilm-by-path:384:")
    assert other_embedder.embedder_id.endswith(digest)
    assert other_embedder.embedder_id != embedder.embedder_id


def test_digest_changes_with_any_model_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "README.md").write_text("docs")
    before = model_digest(tmp_path)
    (tmp_path / "README.md").write_text("other docs")  # documentation does not count
    assert model_digest(tmp_path) == before
    (tmp_path / "config.json").write_text('{"pooling": "cls"}')
    assert model_digest(tmp_path) != before


def test_too_many_tokens_is_refused_not_truncated(embedder: Embedder) -> None:
    # Under the character limit but over the 256-token window: truncation would
    # make every question sharing this head identical to the model.
    long_question = "please explain the refund policy " * 60
    assert len(long_question) < 4096
    with pytest.raises(InvalidQuestionError, match="tokens"):
        embedder.embed([long_question])
    # Positive control: the same text cut to fit is embedded.
    assert embedder.embed([long_question[:600]]).shape == (1, 384)


@pytest.mark.parametrize("bad", ["", b"\xc3\x28", "x" * 5000])
def test_bad_text_is_a_typed_error(embedder: Embedder, bad: object) -> None:
    with pytest.raises(InvalidQuestionError):
        embedder.embed([bad])  # type: ignore[list-item]


def test_single_string_is_a_type_error(embedder: Embedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("not a list")


def test_missing_model_directory(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="not found"):
        Embedder(tmp_path / "nope", progress=False)
