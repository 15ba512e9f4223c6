"""A tiny typed, length-prefixed serialization used to hash partition components.

Why not ``json.dumps(sort_keys=True)``: JSON text is not injective across types
and structures we care about once strings are concatenated, and it varies with
float formatting options. Here every value is written as a type tag plus either
a length-prefixed payload or a terminated decimal, so ``["ab", "c"]`` and
``["a", "bc"]`` differ, ``None`` differs from ``""``, ``True`` differs from ``1``,
and dict key order does not matter.

JSON numbers compare by value, as they do for an OpenAI server: an integral
float is written as the integer (``1.0`` == ``1``); NaN and infinity are
rejected because JSON has no such values. Values nested deeper than
:data:`MAX_DEPTH` are rejected too (:class:`InvalidRequestError`, so the request
skips the cache) rather than recursing until Python's stack limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from semantic.errors import InvalidRequestError

#: The deepest nesting serialized. The gateway refuses bodies nested deeper than 64
#: (``protocol/http.py``); a partition key wraps a body's parts two levels deeper. A
#: fixed bound fails the same way whatever the caller's own stack depth is.
MAX_DEPTH = 128


def canonical_bytes(value: Any) -> bytes:
    """Serialize ``value`` (None, bool, int, float, str, bytes, list/tuple, str-keyed dict)."""
    out: list[bytes] = []
    _encode(value, out, 0)
    return b"".join(out)


def _encode(value: Any, out: list[bytes], depth: int) -> None:
    if isinstance(value, list | tuple | Mapping) and depth >= MAX_DEPTH:
        raise InvalidRequestError(f"a cache key component nests deeper than {MAX_DEPTH} levels")
    if value is None:
        out.append(b"N")
    elif isinstance(value, bool):  # before int: bool is an int subclass
        out.append(b"T" if value else b"F")
    elif isinstance(value, int):
        out.append(b"i%d;" % value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequestError(f"non-finite number {value!r} in a cache key component")
        if value.is_integer():
            out.append(b"i%d;" % int(value))
        else:
            out.append(b"f" + repr(value).encode("ascii") + b";")
    elif isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRequestError(f"text is not valid UTF-8: {exc.reason}") from exc
        out.append(b"s%d:" % len(data))
        out.append(data)
    elif isinstance(value, bytes | bytearray):
        out.append(b"b%d:" % len(value))
        out.append(bytes(value))
    elif isinstance(value, list | tuple):
        out.append(b"l%d:" % len(value))
        for item in value:
            _encode(item, out, depth + 1)
    elif isinstance(value, Mapping):
        keys = list(value)
        if not all(isinstance(k, str) for k in keys):
            raise InvalidRequestError("mapping keys in a cache key component must be str")
        out.append(b"d%d:" % len(keys))
        for key in sorted(keys):
            _encode(key, out, depth + 1)
            _encode(value[key], out, depth + 1)
    else:
        raise InvalidRequestError(f"cannot use a {type(value).__name__} in a cache key component")
