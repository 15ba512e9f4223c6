"""Models shared by the prefix tests: the real SmolLM2 is loaded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from prefix.loader import LoadedModel, default_model_path, load_model
from tests.prefix.tiny_models import save_tiny_model


@pytest.fixture(scope="session")
def smol_loaded() -> LoadedModel:
    """The bundled SmolLM2-135M-Instruct (fp32, CPU); ~15 s to load."""
    return load_model(default_model_path(), device="cpu", verbose=False)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    """A 2-layer random Llama (vocab 128) with a word-level tokenizer ("t5 t9 ...")."""
    directory: Path = tmp_path_factory.mktemp("tiny-llama")
    save_tiny_model(directory, "llama")
    return load_model(str(directory), device="cpu", verbose=False, cache_dir=directory / "cache")
