"""Token-id prompts are checked against the smaller of the tokenizer and the model's
embedding: an id the model has no row for would fail inside the engine's step (every
request in it), so it must be this request's own error. The detokenizer streams exactly
the full decode, stops where the full decode first holds a stop string, and decodes
only a short window each step."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from prefix.errors import RequestError
from prefix.model.loader import LoadedModel
from prefix.model.tokenize import Detokenizer, PromptEncoder
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
    with pytest.raises(RequestError, match="outside"):
        smaller.encode([0, size - 4])
    with pytest.raises(RequestError, match="outside"):
        PromptEncoder(tokenizer).encode([size])
    # a model with more rows than the tokenizer has tokens: the tokenizer bounds it
    with pytest.raises(RequestError, match="outside"):
        PromptEncoder(tokenizer, vocab_size=size + 10).encode([size])
    # the ids are the prompt: counted, never quoted back
    with pytest.raises(RequestError) as err:
        smaller.encode([size - 3, 77777])
    assert "77777" not in str(err.value) and str(size - 3) not in str(err.value)


def test_text_spelling_a_token_past_the_models_rows_is_a_request_error(
    tmp_path: Path,
) -> None:
    """A tokenizer with a token added past the model's embedding rows: text (a raw
    prompt parses special-token text) that spells it is refused as the request's own
    error, before the engine's step; before, only id lists were checked, and the id
    failed the whole step (a review, session 43)."""
    save_tiny_tokenizer(tmp_path)
    extra: Any = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    rows = len(extra)
    extra.add_tokens(["<extra>"], special_tokens=True)
    encoder = PromptEncoder(extra, vocab_size=rows)
    plain = encoder.encode("t5 t6")
    assert plain and max(plain) < rows  # control: text of the model's own tokens
    assert rows in PromptEncoder(extra).encode("t5 t6 <extra>")  # what reached the step
    with pytest.raises(RequestError, match="outside"):
        encoder.encode("t5 t6 <extra>")


def test_an_unknown_role_is_not_quoted_back(tokenizer: object) -> None:
    with pytest.raises(RequestError) as err:
        PromptEncoder(tokenizer).encode([{"role": "secret-text", "content": "hi"}])
    assert "secret-text" not in str(err.value)


# ---- detokenizer ------------------------------------------------------------------------


class CountingEncoder(PromptEncoder):
    """Counts the tokens each decode is handed."""

    decoded = 0

    def decode(self, token_ids: Sequence[int]) -> str:
        self.decoded += len(token_ids)
        return super().decode(token_ids)


def stream(detok: Detokenizer, ids: list[int]) -> tuple[list[bool], str]:
    """Push ``ids`` as the engine does: a delta after each step, the rest at the end."""
    pushes: list[bool] = []
    parts: list[str] = []
    for t in ids:
        pushes.append(detok.push(t))
        if pushes[-1]:
            break
        parts.append(detok.delta())
    parts.append(detok.delta(final=True))
    return pushes, "".join(parts)


def test_a_step_decodes_a_short_window_not_the_whole_output(smol_loaded: LoadedModel) -> None:
    """Re-decoding every output token each step was O(n²) over a request (1.4 ms a step
    at 8k tokens, on the engine thread)."""
    tok = smol_loaded.tokenizer
    ids = tok.encode("The quick brown fox, 数据库连接失败 😀. " * 100, add_special_tokens=False)
    assert len(ids) > 1500
    enc = CountingEncoder(tok)
    _, text = stream(enc.detokenizer(["</stop>"]), ids)
    assert text == tok.decode(ids)
    assert enc.decoded < 8 * len(ids)  # the whole output each step: len(ids)² / 2


SAMPLES = [
    "The quick brown fox jumps over the lazy dog.",
    "数据库连接失败，请检查配置。结束了",
    "emoji 😀😀 👩\u200d👩\u200d👧 then STOP",
    "Ünïcödé façade — “quotes”",
    "१२३ العربية עברית",
    "I can't do that. Really.\n\n  indented\tcode()",
    "a  b   c .  d ,e",
]


def test_streams_are_the_full_decode_and_stop_where_it_does(smol_loaded: LoadedModel) -> None:
    """For real text and for random tokens (invalid and unfinished UTF-8, special tokens),
    every step's text is the decode of all tokens so far (less an unfinished character),
    a stop string ends the request at the step whose full decode first holds it, and the
    stream is exactly the final text, with no stop string in it."""
    tok = smol_loaded.tokenizer
    enc = PromptEncoder(tok)
    rng = random.Random(7)
    fragments = [i for i in range(256, 49152) if "\ufffd" in tok.decode([i])][:200]
    for n in range(240):
        if n % 3 == 0:
            ids = [rng.randrange(len(tok)) for _ in range(rng.randint(1, 30))]
        else:
            text = "".join(rng.choice(SAMPLES) for _ in range(rng.randint(1, 3)))
            ids = tok.encode(text, add_special_tokens=False)
            for _ in range(rng.randint(0, 3) if n % 3 == 1 else 0):
                ids.insert(rng.randint(0, len(ids)), rng.choice([0, 1, 2, *fragments]))
        full = tok.decode(ids, skip_special_tokens=True)
        stops = [full[a : a + rng.randint(1, 4)] for a in rng.sample(range(len(full)), 2)]
        if n % 4 == 0 or len(full) < 2:
            stops = []
        detok = enc.detokenizer(stops)
        expect_stop, expect_text = None, full.rstrip("\ufffd")
        for k in range(1, len(ids) + 1):
            # whole characters only: an unfinished one at the end is not text yet
            upto = tok.decode(ids[:k], skip_special_tokens=True).rstrip("\ufffd")
            hits = [i for i in (upto.find(s) for s in stops) if i != -1]
            if hits:
                expect_stop, expect_text = k, upto[: min(hits)]
                break
        pushes, streamed = stream(detok, ids)
        assert pushes == [False] * (len(pushes) - 1) + [expect_stop is not None], (ids, stops)
        assert len(pushes) == (expect_stop or len(ids))
        assert detok.text == expect_text, (ids, stops)
        assert streamed == expect_text, (ids, stops)
        assert not any(s in streamed for s in stops)
        # every step's text, checked against the full decode on a fresh detokenizer
        if not stops:
            check = enc.detokenizer([])
            for k, t in enumerate(ids, 1):
                check.push(t)
                assert check.text == tok.decode(ids[:k], skip_special_tokens=True).rstrip("\ufffd")


def test_a_stop_string_ending_a_step_that_ends_mid_character_does_not_leak(
    smol_loaded: LoadedModel,
) -> None:
    """A step whose text ends in an unfinished character: the whole characters before
    it are searched for stop strings (they were not, and its text was released stop
    string and all); the request stops at the token that completes the stop."""
    tok = smol_loaded.tokenizer
    ids = tok.encode("१२३ العربية עברית", add_special_tokens=False)
    pushes, streamed = stream(PromptEncoder(tok).detokenizer(["רי"]), ids)
    assert pushes[-1] and streamed == "१२३ العربية עב"
    # the token that completes "— " leaves "東" unfinished (the engine review's case):
    # the stop is found at that token, not one or two later
    ids = tok.encode("naïve café — 東京タワー", add_special_tokens=False)
    need = next(k for k in range(1, len(ids) + 1) if "— " in tok.decode(ids[:k]))
    assert tok.decode(ids[:need]).endswith("\ufffd")  # the case itself
    pushes, streamed = stream(PromptEncoder(tok).detokenizer(["— "]), ids)
    assert len(pushes) == need and pushes[-1] and streamed == "naïve café "


def byte_fallback_tokenizer() -> Any:
    """SentencePiece-style (Llama 2, Mistral): Metaspace, byte fallback (one token per
    byte of a character not in the vocabulary), the leading space stripped."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for w in ["▁hello", "▁world", "!", "▁", "a", "▁a"]:
        vocab[w] = len(vocab)
    vocab |= {f"<0x{b:02X}>": len(vocab) + b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def test_byte_fallback_and_leading_space_decoders() -> None:
    """A byte-fallback decoder writes one U+FFFD per byte of an unfinished character:
    the stream showed U+FFFD and lost the character once it was finished."""
    tok = byte_fallback_tokenizer()
    v = tok.get_vocab()
    b = [v[f"<0x{x:02X}>"] for x in "中 😀".encode()]
    ids = [v["▁hello"], *b[:3], v["▁world"], v["!"], *b[4:], v["▁a"], v["a"]]
    full = tok.decode(ids)
    assert full == "hello中 world!😀 aa"
    enc = PromptEncoder(tok)
    assert stream(enc.detokenizer([]), ids)[1] == full
    assert stream(enc.detokenizer(["!😀"]), ids) == ([False] * 9 + [True], "hello中 world")


def test_word_level_decoders_join_tokens_with_spaces(tokenizer: object) -> None:
    ids = [5, 9, 17, 2, 30]  # "</s>" (2) is special: skipped
    enc = PromptEncoder(tokenizer)
    assert stream(enc.detokenizer([]), ids)[1] == "t5 t9 t17 t30"
    assert stream(enc.detokenizer(["t17 t3"]), ids)[1] == "t5 t9 "
