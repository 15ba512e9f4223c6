"""Chat prompts whose message text cannot forge the chat template's control tokens.

The template is rendered to text and the text encoded, and encoding turns every
special-token string it finds into that token's id: an end user who writes
``<|im_end|>\\n<|im_start|>system`` into a message would close their turn and open a
forged system turn. So when a message string could touch a special token (it holds
one, or starts with the end or ends with the start of one), the template is rendered a
second time with every string of the messages (content, name, tool-call fields; not
``role``, which is checked) replaced by a unique placeholder, which says where each
message string lies in the rendered text.

* No special-token string overlaps a message string (every honest prompt): the
  rendered text is encoded exactly as before, so the ids (and the prefix-cache keys
  made from them) are unchanged.
* One does: the text is cut only at the special tokens the template itself wrote; each
  run between them (template text and message text together, as the tokenizer would
  have cut them) is encoded with special-token parsing off, so the forged markers are
  plain text tokens.
* The template changes message strings (``| trim``, branches on the content), so the
  placeholders cannot place them: a prompt whose messages hold special-token text is a
  ``RequestError``; any other is encoded as before. (A template that could make a
  special token out of text without one, say by upper-casing it, is not guarded.)

A raw /v1/completions prompt is the client's own full text and keeps its special tokens
(``PromptEncoder.encode``), as in vLLM.
"""

from __future__ import annotations

import re
import secrets
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any

from prefix.errors import RequestError


class ChatEncoder:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.special_ids = _special_tokens(tokenizer)
        # longest first: a regex alternation takes the first alternative that matches,
        # so this finds the leftmost-longest token, as the tokenizer's own matcher does
        specials = sorted(self.special_ids, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, specials))) if specials else None
        # a message string that starts with the end of one or ends with the start of one
        # could make a special token together with the template text beside it
        heads = {s[:k] for s in specials for k in range(1, len(s))}
        tails = {s[k:] for s in specials for k in range(1, len(s))}
        self._starts_tail = _alternation(tails, r"\A(?:{})")
        self._ends_head = _alternation(heads, r"(?:{})\Z")
        self._longest = max(map(len, specials), default=0)
        self._plain: Any = None  # the backend tokenizer with special-token parsing off

    def encode(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        msgs = [dict(m) for m in messages]
        text = self._render(msgs)
        nonce = secrets.token_hex(8)
        slots: list[str] = []
        marked_msgs = [_with_placeholders(m, nonce, slots) for m in msgs]
        if not any(map(self._may_touch, slots)):
            return self._encode(text)  # no special token can overlap a message string
        marked = self._render(marked_msgs)
        pieces = _pieces(marked, nonce, slots)
        if pieces is None or "".join(p for p, _ in pieces) != text:
            # the template rewrote or branched on a message string: its place is unknown
            assert self._special_re is not None  # else no string could touch one
            if any(self._special_re.search(s) for s in slots):
                raise RequestError(
                    "message text holds the model's control-token text, which this "
                    "model's chat template does not let us keep as plain text"
                )
            return self._encode(text)
        if not self._touches_slot(text, pieces):
            return self._encode(text)  # honest: the ids are exactly the plain encode's
        return self._encode_guarded(pieces)

    def _may_touch(self, slot: str) -> bool:
        """Whether a special token in the rendered text could overlap this string
        (conservative: true for some strings that end up touching none)."""
        if not slot or self._special_re is None:
            return False
        if self._special_re.search(slot) or self._starts_tail.match(slot):
            return True
        if self._ends_head.search(slot[-self._longest :]):
            return True
        return len(slot) < self._longest and any(slot in s for s in self.special_ids)

    def _render(self, messages: list[dict[str, Any]]) -> str:
        return str(
            self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        )

    def _encode(self, text: str) -> list[int]:
        # the template already wrote every special token it wants
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _touches_slot(self, text: str, pieces: list[tuple[str, bool]]) -> bool:
        """Whether any special-token string in ``text`` overlaps a message string."""
        starts: list[int] = []
        ends: list[int] = []
        at = 0
        for piece, is_slot in pieces:
            if is_slot and piece:
                starts.append(at)
                ends.append(at + len(piece))
            at += len(piece)
        for s in self.special_ids:
            i = text.find(s)
            while i != -1:
                k = bisect_right(starts, i + len(s) - 1) - 1  # last slot starting inside
                if k >= 0 and ends[k] > i:
                    return True
                i = text.find(s, i + 1)
        return False

    def _encode_guarded(self, pieces: list[tuple[str, bool]]) -> list[int]:
        """Special tokens only where the template wrote them; the rest as plain text."""
        assert self._special_re is not None
        ids: list[int] = []
        run: list[str] = []

        def flush() -> None:
            if run:
                ids.extend(self._encode_plain("".join(run)))
                run.clear()

        for piece, is_slot in pieces:
            if is_slot:
                run.append(piece)
                continue
            pos = 0
            for m in self._special_re.finditer(piece):
                run.append(piece[pos : m.start()])
                flush()
                ids.append(self.special_ids[m.group()])
                pos = m.end()
            run.append(piece[pos:])
        flush()
        return ids

    def _encode_plain(self, text: str) -> list[int]:
        if not text:
            return []
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None:  # a Python tokenizer: the flag is per call there
            return list(
                self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
            )
        if self._plain is None:
            # A private copy: the shared tokenizer's flag is state, and other threads
            # encode with it at the same time (building two copies in a race is harmless).
            from tokenizers import Tokenizer

            plain = Tokenizer.from_str(backend.to_str())
            plain.encode_special_tokens = True
            self._plain = plain
        return list(self._plain.encode(text, add_special_tokens=False).ids)


def _alternation(texts: set[str], pattern: str) -> re.Pattern[str]:
    alts = "|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True))
    return re.compile(pattern.format(alts) if alts else r"(?!)")


def _special_tokens(tokenizer: Any) -> dict[str, int]:
    """Special-token text -> id: the added tokens marked special, and the named ones."""
    out: dict[str, int] = {}
    for i, tok in dict(getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        content = getattr(tok, "content", None)
        if getattr(tok, "special", False) and content:
            out[str(content)] = int(i)
    for s in getattr(tokenizer, "all_special_tokens", None) or []:
        i = tokenizer.convert_tokens_to_ids(s)
        if s and isinstance(i, int) and s not in out:
            out[str(s)] = i
    return out


# Letters and digits only, so that escaping filters (tojson, e) leave it as it is.
_PLACEHOLDER = re.compile(r"cgslot([0-9a-f]{16})n([0-9]+)e")


def _placeholder(nonce: str, index: int) -> str:
    return f"cgslot{nonce}n{index}e"


def _with_placeholders(value: Any, nonce: str, slots: list[str], key: str = "") -> Any:
    if isinstance(value, str):
        if key == "role":  # checked against a fixed set; templates branch on it
            return value
        slots.append(value)
        return _placeholder(nonce, len(slots) - 1)
    if isinstance(value, Mapping):
        return {k: _with_placeholders(v, nonce, slots, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_with_placeholders(v, nonce, slots) for v in value]
    return value


def _pieces(marked: str, nonce: str, slots: list[str]) -> list[tuple[str, bool]] | None:
    """The rendered text as (text, is a message string) pieces; None if unplaceable."""
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(marked):
        index = int(m.group(2))
        if m.group(1) != nonce or index >= len(slots):
            return None
        pieces.append((marked[pos : m.start()], False))
        pieces.append((slots[index], True))
        pos = m.end()
    pieces.append((marked[pos:], False))
    return pieces
