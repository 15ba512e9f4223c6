from __future__ import annotations

import pytest

from semantic import errors


@pytest.mark.parametrize(
    ("cls", "bases"),
    [
        (errors.InvalidRequestError, (errors.SemanticError, ValueError)),
        (errors.InvalidQuestionError, (errors.InvalidRequestError, ValueError)),
        (errors.InvalidVectorError, (errors.SemanticError, ValueError)),
        (errors.EmbedderError, (errors.SemanticError,)),
        (errors.StoreUnavailableError, (errors.SemanticError,)),
        (errors.EntryNotFoundError, (errors.SemanticError, LookupError)),
    ],
)
def test_hierarchy_matches_the_docstring(cls: type, bases: tuple[type, ...]) -> None:
    for base in bases:
        assert issubclass(cls, base)
    assert cls.__name__ in (errors.__doc__ or "")


def test_store_unavailable_is_not_a_request_error() -> None:
    # The gateway fails open on one and bypasses on the other: they must not overlap.
    assert not issubclass(errors.StoreUnavailableError, errors.InvalidRequestError)
    assert not issubclass(errors.InvalidRequestError, errors.StoreUnavailableError)
