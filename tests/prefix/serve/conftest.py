"""Fixtures of the engine server's tests."""

from __future__ import annotations

import dataclasses

import pytest

from prefix.model.loader import LoadedModel


@pytest.fixture(scope="module")
def tiny_chat(tiny_llama: LoadedModel) -> LoadedModel:
    """The tiny Llama with its own tokenizer copy that has a toy chat template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_llama.path)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    return dataclasses.replace(tiny_llama, tokenizer=tok, has_chat_template=True)
