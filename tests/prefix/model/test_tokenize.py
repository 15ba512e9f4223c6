"""Token-id prompts are checked against the smaller of the tokenizer and the model's
embedding: an id the model has no row for would fail inside the engine's step (every
request in it), so it must be this request's own error."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from prefix.errors import RequestError
from prefix.model.tokenize import PromptEncoder
from tests.prefix.tiny_models import save_tiny_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> object:
    directory: Path = tmp_path_factory.mktemp("tiny-tokenizer")
    save_tiny_tokenizer(directory)
    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)


def test_ids_past_the_models_rows_are_a_request_error(tokenizer: object) -> None:
    size = len(tokenizer)  # type: ignore[arg-type]
    assert PromptEncoder(tokenizer).encode([0, size - 1]) == [0, size - 1]  # control
    smaller = PromptEncoder(tokenizer, vocab_size=size - 4)
    assert smaller.encode([0, size - 5]) == [0, size - 5]
    with pytest.raises(RequestError, match="out of range"):
        smaller.encode([0, size - 4])
    with pytest.raises(RequestError, match="out of range"):
        PromptEncoder(tokenizer).encode([size])
    # a model with more rows than the tokenizer has tokens: the tokenizer bounds it
    with pytest.raises(RequestError, match="out of range"):
        PromptEncoder(tokenizer, vocab_size=size + 10).encode([size])
