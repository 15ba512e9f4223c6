"""Errors raised by ``validators``.

Hierarchy::

    ValidatorError
    ├── InvalidTextError (also ValueError)       the text cannot be validated at all
    │   ├── TextTypeError (also TypeError)       not ``str`` (or ``bytes``)
    │   ├── InvalidUTF8Error                     bytes that are not UTF-8, or lone surrogates
    │   ├── EmptyTextError                       empty or whitespace only
    │   └── TextTooLongError                     more than ``MAX_TEXT_CHARS`` characters
    ├── UnknownEntityKindError (also ValueError) a kind not in ``ENTITY_KINDS``
    ├── InvalidEntitiesError (also ValueError)   a stored entity dict that is malformed
    │   └── StaleEntitiesError                   stored by another extractor version
    ├── UnknownGuardError (also ValueError)      a guard name not in ``GUARDS``
    ├── InvalidJudgeBandError (also ValueError)  a ``JudgeBand`` outside 0 <= low <= high <= 1
    └── InvalidScoreError (also ValueError)      a similarity score that is not a finite number

Every error carries a human-readable message. ``InvalidTextError`` is a
request error (the gateway maps it to HTTP 400); ``InvalidEntitiesError`` is
recoverable: ``Validator.check`` re-extracts from the cached question instead.
"""

from __future__ import annotations


class ValidatorError(Exception):
    """Base class of every error raised by ``validators``."""


class InvalidTextError(ValidatorError, ValueError):
    """The text is not something entities or guards can be computed from."""


class TextTypeError(InvalidTextError, TypeError):
    """The text is not a ``str`` (``bytes`` are accepted when they are UTF-8)."""


class InvalidUTF8Error(InvalidTextError):
    """The bytes are not valid UTF-8, or the string holds lone surrogates."""


class EmptyTextError(InvalidTextError):
    """The text is empty or only whitespace."""


class TextTooLongError(InvalidTextError):
    """The text is longer than ``validators.text.MAX_TEXT_CHARS`` characters."""


class UnknownEntityKindError(ValidatorError, ValueError):
    """An entity kind that is not one of ``ENTITY_KINDS``."""


class InvalidEntitiesError(ValidatorError, ValueError):
    """A serialized entity dict is malformed (wrong types, unknown kinds)."""


class StaleEntitiesError(InvalidEntitiesError):
    """A serialized entity dict was written by a different extractor version."""


class UnknownGuardError(ValidatorError, ValueError):
    """A guard name that is not one of ``GUARDS``."""


class InvalidJudgeBandError(ValidatorError, ValueError):
    """A judge band that is not 0 <= low <= high <= 1 with finite bounds."""


class InvalidScoreError(ValidatorError, ValueError):
    """A similarity score that is not a finite real number."""
