"""Question text: validation, normalization and the digest used for idempotent backfill.

Validation happens before anything is embedded or written, so a bad question
never reaches the index or the database. Normalization is deliberately
conservative: it only removes differences that cannot change the answer
(Unicode compatibility forms such as full-width letters and ligatures, letter
case, runs of whitespace, trailing question marks/full stops). Text over several
lines keeps its line breaks and indentation, which in code change the answer. Anything stronger
(stemming, dropping stop words) could merge two questions with different answers,
and the normalized form is what makes two writes "the same entry". So it keeps
superscripts, subscripts and vulgar fractions (NFKC would turn ``10⁵`` into ``105``
and ``2³`` into ``23``), lowercases without case *folding* (``Maße``, measures, is
not ``Masse``, mass), and keeps a ``!`` after a digit (``52!`` is a factorial).

Two questions equal in this form also skip the pair verifier (semantic/candidates.py):
they are one entry of the store, so serving one for the other is what a backfill
of either would do anyway.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from semantic.errors import InvalidQuestionError

#: Largest question accepted, in characters. A cheap guard applied before the
#: tokenizer runs (so a multi-megabyte body costs nothing); the real limit is
#: the embedder's token window, checked in :meth:`semantic.embedder.Embedder.embed`.
MAX_QUESTION_CHARS = 4096

_WHITESPACE = re.compile(r"\s+")
#: What ``str.splitlines`` breaks on, as one pattern (with \r\n as one break).
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
#: Whitespace inside one line.
_SPACES = re.compile(r"[^\S\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
# Trailing sentence punctuation (ASCII and full-width) never changes what is asked,
# except "!" after a digit (a factorial).
_TRAILING = frozenset(" ?!.。？！…")
_BANGS = frozenset("!！")
#: Compatibility forms NFKC would fold into other characters with another meaning.
_KEPT_FORMS = ("<super>", "<sub>", "<fraction>")


def coerce_question(value: object) -> str:
    """Return ``value`` as a valid question string or raise :class:`InvalidQuestionError`.

    Accepts ``str`` or UTF-8 ``bytes``. Rejects other types, invalid UTF-8 (also
    lone surrogates in a ``str``, which cannot be stored or encoded), NUL
    characters (PostgreSQL text cannot hold them), blank text and text longer
    than :data:`MAX_QUESTION_CHARS`.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            text = bytes(value).decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise InvalidQuestionError(
                f"question is not valid UTF-8: {exc.reason}", reason="not_utf8"
            ) from exc
    elif isinstance(value, str):
        text = value
        try:
            text.encode("utf-8", errors="strict")
        except UnicodeEncodeError as exc:
            raise InvalidQuestionError(
                f"question is not valid UTF-8: {exc.reason}", reason="not_utf8"
            ) from exc
    else:
        raise InvalidQuestionError(
            f"question must be str, not {type(value).__name__}", reason="not_text"
        )
    if "\x00" in text:
        raise InvalidQuestionError("question contains a NUL character", reason="nul_character")
    if not _has_visible(text):
        raise InvalidQuestionError("question is empty", reason="empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise InvalidQuestionError(
            f"question has {len(text)} characters; the limit is {MAX_QUESTION_CHARS}",
            reason="too_many_chars",
        )
    return text


def _has_visible(text: str) -> bool:
    """Whether anything but white space, control and format characters is left: a
    question of only escapes or zero-width spaces is empty to every later step (the
    validators read control characters as spaces)."""
    return any(not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE for ch in text)


_INVISIBLE = frozenset({"Cc", "Cf"})


def normalize_question(text: str) -> str:
    """The form two questions must share to be one cache entry (see module docstring)."""
    folded = _compatibility_fold(text).lower()
    lines = [line for line in _LINE_BREAK.split(folded) if line.strip()]
    if len(lines) > 1:
        # Text over several lines keeps its line breaks and each line's indentation:
        # in code they are meaning (a dedented `print` runs once, not every loop).
        # Only runs of spaces inside a line and blank lines go.
        first = _SPACES.sub(" ", lines[0].strip())
        rest = [_indented(line) for line in lines[1:]]
        collapsed = "\n".join([first, *rest]).rstrip()
    else:
        collapsed = _WHITESPACE.sub(" ", folded).strip()
    stripped = _strip_trailing(collapsed)
    # A question made only of punctuation keeps its punctuation rather than becoming "".
    return stripped or collapsed


def _indented(line: str) -> str:
    body = line.lstrip()
    return line[: len(line) - len(body)] + _SPACES.sub(" ", body.rstrip())


def _compatibility_fold(text: str) -> str:
    """NFKC, except for the characters of :data:`_KEPT_FORMS` (kept, composed)."""
    if text.isascii():
        return text
    out: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if unicodedata.decomposition(ch).startswith(_KEPT_FORMS):
            out.append(unicodedata.normalize("NFKC", text[start:i]))
            out.append(ch)
            start = i + 1
    out.append(unicodedata.normalize("NFKC", text[start:]))
    return "".join(out)


def _strip_trailing(text: str) -> str:
    end = len(text)
    while end > 0 and text[end - 1] in _TRAILING:
        if text[end - 1] in _BANGS and end > 1 and text[end - 2].isdigit():
            break
        end -= 1
    return text[:end]


def question_digest(normalized: str) -> str:
    """SHA-256 hex of a normalized question: the fixed-width half of the unique key.

    The unique constraint uses the digest, not the text, because a PostgreSQL
    btree row is limited to about 2.7 kB and a 4,096-character question in UTF-8
    can be 16 kB.
    """
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()
