"""Errors raised by the semantic cache.

Hierarchy::

    SemanticError
    ├── InvalidRequestError (also ValueError)   the request cannot be served from the semantic
    │   │                                       cache (it may still be fine for the model):
    │   │                                       params that do not serialize, no user message,
    │   │                                       turns after the last user message, image parts
    │   └── InvalidQuestionError                the question itself: not a str, empty, invalid
    │                                           UTF-8 (bytes or lone surrogates), NUL characters,
    │                                           more than MAX_QUESTION_CHARS characters, or more
    │                                           tokens than the embedder reads
    ├── InvalidVectorError (also ValueError)    NaN/inf, wrong dimension, zero norm, bad ids
    ├── EmbedderError                           the embedding model is missing or failed
    ├── StoreUnavailableError                   the database is down or has no schema
    ├── EntryNotFoundError (also LookupError)   no entry with that id
    └── WouldBlockError                         a memory-only lookup (``local_only``) met a
                                                step that waits: a database read or write,
                                                an embedding, a verifier forward, a busy index

How the gateway reacts: ``InvalidRequestError`` means "bypass the semantic layer
and go upstream" (never a 4xx by itself: the model may well answer a question
too long to embed); ``StoreUnavailableError`` means "fail open" (answer from the
model, skip the backfill); ``EmbedderError`` is a server fault; ``WouldBlockError``
means "run the same lookup in a worker thread" (nothing was written before it).

Messages never quote the question or any other request text: they end up in
logs and, through the gateway, in error bodies. ``reason`` is a short ASCII
token (``too_many_tokens``, ``not_text``, …) that a caller may put in a header
or a metric label as it is.

The question limits live in :mod:`semantic.question` (``MAX_QUESTION_CHARS`` =
4,096 characters, checked before tokenizing) and in the embedder (at most
``max_seq_length`` tokens, 256 for all-MiniLM-L6-v2): a sentence-transformer
silently truncates longer text, so two long questions that share their first
256 tokens would embed identically and one would be served the other's answer.
"""

from __future__ import annotations


class SemanticError(Exception):
    """Base class of every error raised by ``semantic``."""

    reason: str = "error"

    def __init__(self, message: str = "", *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class InvalidRequestError(SemanticError, ValueError):
    """The request cannot be looked up or stored in the semantic cache."""

    reason = "invalid_request"


class InvalidQuestionError(InvalidRequestError):
    """The question is not a usable, non-empty, valid UTF-8 text within the limits."""

    reason = "invalid_question"


class InvalidVectorError(SemanticError, ValueError):
    """A vector (or its id) is malformed: NaN/inf, wrong dimension or zero norm."""


class EmbedderError(SemanticError):
    """The embedding model could not be loaded or failed to embed."""


class StoreUnavailableError(SemanticError):
    """The entry store cannot be reached (or has no schema); the gateway fails open."""


class EntryNotFoundError(SemanticError, LookupError):
    """No cache entry has the requested id."""


class WouldBlockError(SemanticError):
    """A ``local_only`` lookup needs something that waits; nothing was written yet."""

    reason = "would_block"
