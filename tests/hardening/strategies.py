"""Hypothesis strategies for hostile request bodies (issue 14).

Bodies are bytes, because much of what is hostile cannot be said with a Python
dict: duplicate keys, ``NaN``/``Infinity`` literals, lone surrogates escaped as
``\\udXXX`` (valid JSON text, invalid Unicode), raw invalid UTF-8, nesting deeper
than any parser's recursion limit. Structured bodies start from a valid request
and break one thing at a time, so the fuzzing reaches past parsing into the
semantic layer (non-empty partitions), the engine and streaming.

Every body that could run the model carries a tiny ``max_tokens``: the point is
the input path, not generation, and the suite must finish in about two minutes.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: Characters of every plane, surrogates and control characters included.
ANY_CHAR = st.characters(codec=None, categories=None)
#: Huge text made of characters each of which is at least one token, so an
#: oversized prompt is refused before prefill (never a minute of CPU).
HUGE_CHARS = st.sampled_from(["这", "😀", "\U00020000", "ß", "\u0301", "\ud800", "\x00"])

texts = st.one_of(
    st.text(ANY_CHAR, max_size=40),
    st.just(""),
    st.builds(lambda c, n: c * n, HUGE_CHARS, st.sampled_from([1, 60_000])),
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
)

json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(ANY_CHAR, max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)


def _dump(value: Any, ascii_only: bool) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=True)
    # Without ensure_ascii a lone surrogate is written raw: invalid UTF-8 on the wire.
    return text.encode("utf-8", "surrogatepass")


def _duplicate_keys(body: dict[str, Any], key: str, other: Any) -> bytes:
    text = json.dumps(body, allow_nan=True)
    extra = json.dumps({key: other}, allow_nan=True)[1:-1]
    return (text[:-1] + (", " if len(body) else "") + extra + "}").encode("utf-8")


def raw_bodies() -> st.SearchStrategy[bytes]:
    """Bodies that are not JSON objects, or not JSON at all."""
    depth = st.sampled_from([1, 64, 1_000, 100_000])
    return st.one_of(
        st.binary(max_size=64),
        st.builds(lambda n: b"[" * n + b"]" * n, depth),
        st.builds(lambda n: b'{"a":' * n + b"1" + b"}" * n, depth),
        st.builds(lambda v, a: _dump(v, a), json_values, st.booleans()),
        st.sampled_from([b"", b" ", b"null", b"NaN", b"Infinity", b'"\\ud800"', b"\xff\xfe"]),
    )


def structured_bodies(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """``valid`` with one thing broken: a field replaced, removed, duplicated, an
    unknown field added, or a message's content/role replaced."""
    keys = sorted(valid)

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        body = json.loads(json.dumps(valid))
        how = draw(st.sampled_from(["replace", "drop", "unknown", "message", "duplicate", "ok"]))
        if how == "replace":
            body[draw(st.sampled_from(keys))] = draw(json_values)
        elif how == "drop":
            body.pop(draw(st.sampled_from(keys)))
        elif how == "unknown":
            body[draw(st.text(ANY_CHAR, min_size=1, max_size=12))] = draw(json_values)
        elif how == "message" and "messages" in body:
            message = body["messages"][-1]
            message[draw(st.sampled_from(["content", "role", "name"]))] = draw(json_values)
        elif how == "message":
            body["prompt"] = draw(st.one_of(texts, json_values))
        elif how == "duplicate":
            key = draw(st.sampled_from(keys))
            return _duplicate_keys(body, key, draw(json_values))
        if how in ("ok", "message", "unknown") and draw(st.booleans()):
            body["stream"] = True
        if body.get("max_tokens") is None or isinstance(body["max_tokens"], int | float):
            # The input path is under test, not generation (null means "to the end of
            # the context window": minutes of CPU per example).
            body["max_tokens"] = 2
        return _dump(body, draw(st.booleans()))

    return build()


def bodies(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    return st.one_of(structured_bodies(valid), structured_bodies(valid), raw_bodies())


headers = st.fixed_dictionaries(
    {},
    optional={
        "cache-control": st.sampled_from(["no-cache", "no-store", "max-age=0", "max-age=x", ""]),
        "content-type": st.sampled_from(["application/json", "text/plain", "", "x/y; a=b"]),
        "x-request-id": st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=80),
    },
)
