"""Input checking and normalization shared by every extractor and guard.

``prepare(text)`` is the only entry point: it accepts ``str`` (or UTF-8
``bytes``), rejects bad input with a typed ``InvalidTextError`` and returns the
NFKC-normalized text that all patterns run on.

Limit: ``MAX_TEXT_CHARS`` (100,000 characters, counted after decoding and
before normalization). A cached *question* is short; anything longer is a
document, not a question, and is refused rather than scanned.
"""

from __future__ import annotations

import re
import unicodedata

from validators.errors import (
    EmptyTextError,
    InvalidUTF8Error,
    TextTooLongError,
    TextTypeError,
)

MAX_TEXT_CHARS = 100_000

# C0/C1 control characters except tab and newline; the extractor uses NUL as
# its mask character, so none of these may survive normalization.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_QUOTES = str.maketrans({"’": "'", "‘": "'", "`": "'", "“": '"', "”": '"'})


def prepare(text: object) -> str:
    """Validate ``text`` and return it NFKC-normalized (full-width digits and
    punctuation become ASCII, curly apostrophes become ``'``, control
    characters become spaces). Length and characters are otherwise kept."""
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidUTF8Error(f"text is not valid UTF-8: {exc}") from None
    if not isinstance(text, str):
        raise TextTypeError(f"text must be str or UTF-8 bytes, not {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise TextTooLongError(f"text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidUTF8Error(f"text holds characters UTF-8 cannot encode: {exc}") from None
    if not text.strip():
        raise EmptyTextError("text is empty")
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return _CONTROL.sub(" ", text)
