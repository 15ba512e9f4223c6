"""Errors raised by the pair verifier (``validators.verifier``).

Hierarchy::

    ValidatorError (validators.errors)
    └── VerifierError
        ├── VerifierInputError (also ValueError)   a question the verifier will not score
        │   ├── VerifierTypeError (also TypeError) not ``str`` (or ``bytes``)
        │   ├── VerifierEncodingError              bytes that are not UTF-8, or lone surrogates
        │   ├── VerifierEmptyError                 empty or whitespace only
        │   └── VerifierTooLongError               more than ``MAX_QUESTION_CHARS`` characters
        ├── VerifierModelError                     the shipped model is missing or damaged
        └── VerifierCalibrationError (also ValueError) a target misfire rate outside (0, 1)

An input error means "never a hit": the caller answers from the model instead.
Messages never quote the question.
"""

from __future__ import annotations

from validators.errors import ValidatorError


class VerifierError(ValidatorError):
    """Base class of every error raised by the pair verifier."""


class VerifierInputError(VerifierError, ValueError):
    """A question the verifier refuses to score."""


class VerifierTypeError(VerifierInputError, TypeError):
    """The question is not a ``str`` (``bytes`` are accepted when they are UTF-8)."""


class VerifierEncodingError(VerifierInputError):
    """The bytes are not UTF-8, or the string holds lone surrogates."""


class VerifierEmptyError(VerifierInputError):
    """The question is empty or only whitespace."""


class VerifierTooLongError(VerifierInputError):
    """The question is longer than the verifier reads; it is refused, not truncated."""


class VerifierModelError(VerifierError):
    """The shipped verifier model cannot be loaded (missing file, bad checksum, bad shape)."""


class VerifierCalibrationError(VerifierError, ValueError):
    """A target misfire rate that is not a finite number strictly between 0 and 1."""
