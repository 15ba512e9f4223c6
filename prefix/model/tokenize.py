"""Prompt encoding (chat template or raw text) and incremental detokenization with stop strings."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from prefix.errors import RequestError
from prefix.model.chat_prompt import ChatEncoder

# A prompt is raw text, ready token ids, or chat messages ({"role", "content"}).
Prompt = str | Sequence[int] | Sequence[Mapping[str, Any]]


#: The roles the chat template renders (OpenAI's legacy ``function`` is not one).
CHAT_ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool", "developer")


class PromptEncoder:
    """``vocab_size``: the model's embedding rows, when it has fewer than the tokenizer
    has tokens (an id past them would fail inside the engine's step, for every request
    in it, not as this request's error). Every prompt is checked against them: ids as
    sent, and the tokenizer's own output for text and messages, since text can spell a
    token the tokenizer added past the model's rows."""

    def __init__(self, tokenizer: Any, vocab_size: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self._chat = ChatEncoder(tokenizer)

    def encode(self, prompt: Prompt) -> list[int]:
        if isinstance(prompt, str):
            # A raw prompt is the client's whole text: special-token text in it is parsed
            # as those tokens (as vLLM does), unlike chat message text (ChatEncoder).
            return self._in_range(self.tokenizer.encode(prompt, add_special_tokens=False))
        items: list[Any] = list(prompt)
        if all(isinstance(t, int) and not isinstance(t, bool) for t in items):
            return self._in_range(items)
        if all(isinstance(m, Mapping) for m in items):
            return self.encode_chat(items)
        raise RequestError("prompt must be a string, a list of token ids or a list of messages")

    def _in_range(self, ids: Sequence[int]) -> list[int]:
        """``ids``, each with an embedding row; else this request's error (the ids are
        the prompt: counted, not quoted)."""
        sizes = [] if self.vocab_size is None else [self.vocab_size]
        with contextlib.suppress(TypeError):  # a wrapper that cannot say its size: the model's
            sizes.append(len(self.tokenizer))
        if not sizes:
            return [int(t) for t in ids]
        vocab = min(sizes)
        bad = sum(1 for t in ids if not 0 <= t < vocab)
        if bad:
            raise RequestError(f"{bad} token id(s) of the prompt are outside [0, {vocab})")
        return [int(t) for t in ids]

    def encode_chat(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        if not messages:
            return []
        for m in messages:
            if m.get("role") not in CHAT_ROLES:
                # the role is the client's text: not quoted back
                raise RequestError(
                    "unknown message role (system, user, assistant, tool or developer)"
                )
            if not isinstance(m.get("content", ""), str):
                raise RequestError("message content must be a string")
        # Message text is plain text: it cannot spell the template's control tokens; the
        # template's own tokens are checked all the same (a tokenizer past the model).
        return self._in_range(self._chat.encode(messages))

    def decode(self, token_ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=True))

    def detokenizer(self, stop: Sequence[str] = ()) -> Detokenizer:
        return Detokenizer(self, stop)


class Detokenizer:
    """Turns generated tokens into text deltas and watches for stop strings.

    ``text`` is always what decoding all output tokens gives, less the U+FFFDs that end
    it (an incomplete UTF-8 sequence, which later tokens may finish: byte-level BPE
    writes one U+FFFD for it, a byte-fallback decoder one per byte). A step decodes only
    a short window, as vLLM does: the tokens since the text last grew, behind the ones
    that made that growth, whose text (decoded again) is cut off the window's. That
    context keeps decoders that drop or add a space at a token boundary (SentencePiece's
    leading space, word-level joins) right, and a step's cost does not grow with the
    output (it re-decoded all of it: O(n²) over a request).

    A delta is released only once it cannot be the start of a stop string, so a stop
    string never leaks to a stream.
    """

    def __init__(self, encoder: PromptEncoder, stop: Sequence[str]) -> None:
        self.encoder = encoder
        self.stop = tuple(stop)
        self.token_ids: list[int] = []
        self.text = ""
        self._emitted = 0
        self._checked = 0  # text before this was already searched for stop strings
        self._longest_stop = max((len(s) for s in self.stop), default=0)
        self.stopped = False
        self._done = ""  # the decode of token_ids[: self._read]
        self._prefix = 0  # the window starts here: context for the text after _read
        self._read = 0
        self._prefix_text: str | None = ""  # decode of token_ids[_prefix:_read], or None

    def push(self, token_id: int) -> bool:
        """Add a token; True when a stop string was reached (``text`` is cut before it)."""
        self.token_ids.append(token_id)
        if self._prefix_text is None:
            self._prefix_text = self.encoder.decode(self.token_ids[self._prefix : self._read])
        window = self.encoder.decode(self.token_ids[self._prefix :])
        new = window[len(self._prefix_text) :]
        if window.endswith("\ufffd"):  # an incomplete UTF-8 sequence: wait for more tokens
            self.text = self._done + new.rstrip("\ufffd")
            # The whole characters before it may complete a stop string: the request
            # stops at this token (searched later, it ran 1-2 tokens on and billed them).
            return self._search()
        if new:
            self._done += new
            self._prefix, self._read = self._read, len(self.token_ids)
            self._prefix_text = None
        self.text = self._done
        return self._search()

    def _search(self) -> bool:
        # Only text that this token completed can hold a new match: search the tail, so a
        # step costs O(new text + stop length), not O(output × stops).
        full = self.text
        start = max(0, self._checked - self._longest_stop + 1)
        hits = [i for i in (full.find(s, start) for s in self.stop) if i != -1]
        self._checked = len(full)
        if hits:
            self.text = full[: min(hits)]
            self.stopped = True
            return True
        return False

    def delta(self, final: bool = False) -> str:
        """Text that is safe to emit now (held back while it could begin a stop string)."""
        if final and not self.stopped and len(self.text) > self._checked:
            self._search()  # defensive: every push searches what it added
        safe = len(self.text)
        if not final and not self.stopped and self.stop:
            safe = min(safe, self._checked)  # never text not yet searched
            safe -= max(_partial_stop(self.text, s, safe) for s in self.stop)
        out = self.text[self._emitted : safe]
        self._emitted = max(self._emitted, safe)
        return out


def _partial_stop(text: str, stop: str, end: int | None = None) -> int:
    """Length of the longest end of ``text[:end]`` that begins ``stop`` (not all of it).

    Candidates start where ``stop[0]`` occurs in the last ``len(stop) - 1`` characters;
    the first that matches is the longest, so this is O(len(stop)) per candidate.
    """
    end = len(text) if end is None else end
    lo = max(0, end - len(stop) + 1)
    i = text.find(stop[0], lo, end)
    while i != -1:
        if stop.startswith(text[i:end]):
            return end - i
        i = text.find(stop[0], i + 1, end)
    return 0
