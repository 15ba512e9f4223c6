"""A detached, JSON-only copy of what the cache stores: exactly what the database will
give back later (sets become sorted lists; NaN and non-JSON values are refused)."""

from __future__ import annotations

import json
from typing import Any

from semantic.errors import InvalidRequestError


def json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def json_copy(value: Any, what: str) -> Any:
    """A detached, JSON-only copy: exactly what the database will give back later."""
    try:
        return json.loads(json.dumps(value, default=json_default, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"{what} is not JSON serializable: {exc}") from exc
