"""``read_json`` (protocol/http.py) refuses, with a 400 that quotes nothing of the body,
what ``json.loads`` accepts but strict JSON, UTF-8 or a recursive walk cannot carry on:
non-finite numbers, lone surrogates, nesting deeper than ``MAX_JSON_DEPTH``. Header
numbers are ASCII digits only (``header_int``). No socket, no model."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import pytest
from starlette.requests import Request

from protocol.http import HEADER_INT_CAP, MAX_JSON_DEPTH, ApiError, header_int, read_json

LIMIT = 1_000_000
SECRET = "zebra"  # user text that must never appear in an error message


def request(raw: bytes, headers: dict[str, bytes] | None = None) -> Request:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(k.encode(), v) for k, v in (headers or {}).items()],
    }
    return Request(scope, receive)


def read(raw: bytes, headers: dict[str, bytes] | None = None) -> dict[str, Any]:
    return asyncio.run(read_json(request(raw, headers), LIMIT))


def refused(raw: bytes) -> ApiError:
    with pytest.raises(ApiError) as caught:
        read(raw)
    err = caught.value
    assert err.status == 400
    assert err.body()["error"]["type"] == "invalid_request_error"
    assert SECRET not in err.message
    return err


def chat(extra: str = "", content: str = f'"hi {SECRET}"') -> bytes:
    messages = f'[{{"role": "user", "content": {content}}}]'
    return f'{{"model": "m", "messages": {messages}{extra}}}'.encode()


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (chat(content=f'"hi \\ud800 {SECRET}"'), "messages"),  # a lone high surrogate, escaped
        (chat(content=f'"hi \\udfff {SECRET}"'), "messages"),  # a lone low surrogate
        (chat(content=f'"{SECRET} \\ude00\\ud83d"'), "messages"),  # a pair in the wrong order
        # the surrogate's own bytes: json.loads decodes bytes with "surrogatepass"
        (chat().replace(b"hi ", b"\xed\xa0\x80 "), "messages"),
        (chat(', "metadata": {"\\ud800": 1}'), None),  # in a key, under no API field
        (chat(', "\\ud800": 1'), None),  # a top-level key
        (chat(f', "{SECRET}": "\\ud800"'), None),  # under a client's own key: not named
    ],
    ids=["high", "low", "reversed-pair", "raw-bytes", "key", "top-key", "own-key"],
)
def test_lone_surrogates_are_a_400(raw: bytes, param: str | None) -> None:
    err = refused(raw)
    assert "Unicode" in err.message
    assert err.param == param


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        (', "temperature": 1e400', "temperature"),
        (', "temperature": -1e400', "temperature"),
        (', "metadata": {"x": 1e999}', None),
        (', "logit_bias": {"1": [2, 3e308, 1e309]}', "logit_bias"),
    ],
)
def test_numbers_too_large_for_a_float_are_a_400(extra: str, param: str | None) -> None:
    err = refused(chat(extra))
    assert "number" in err.message
    assert err.param == param


def nested(depth: int) -> bytes:
    """A chat body whose ``foo`` field makes the whole body ``depth`` levels deep."""
    inner = depth - 1  # the body object is the first level
    return chat(f', "foo": {"[" * inner}{"]" * inner}')


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 500, 960, 990])
def test_nesting_deeper_than_the_cap_is_a_400(depth: int) -> None:
    assert str(MAX_JSON_DEPTH) in refused(nested(depth)).message


def test_what_strict_json_can_carry_is_read_as_before() -> None:
    assert read(nested(MAX_JSON_DEPTH))["foo"]  # exactly at the cap
    body = read(chat(', "temperature": 1.7976931348623157e308', content='"\\ud83d\\ude00 ok"'))
    assert body["messages"][0]["content"] == "\U0001f600 ok"  # an escaped pair is one emoji
    assert json.loads(json.dumps(body, allow_nan=False)) == body


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("0060", 60),
        ("86400", 86400),
        ("1" * 5000, HEADER_INT_CAP),  # past int()'s own digit limit: capped, not parsed
        ("²", None),  # str.isdigit() says yes, int() says no
        ("٣", None),  # Arabic-Indic three: int() would read 3
        ("１２", None),  # fullwidth digits
        ("", None),
        (" 1", None),
        ("1 ", None),
        ("-1", None),
        ("+1", None),
        ("1e3", None),
        (None, None),
    ],
)
def test_header_numbers_are_ascii_digits(value: str | None, expected: int | None) -> None:
    assert header_int(value) == expected


def test_a_content_length_of_odd_digits_is_not_a_500() -> None:
    # Latin-1 "²" as a header's bytes: isdigit() was true and int() raised.
    assert read(chat(), {"content-length": b"\xb2"})["model"] == "m"
    with pytest.raises(ApiError) as caught:
        read(chat(), {"content-length": b"9" * 5000})
    assert caught.value.status == 413


@pytest.mark.parametrize(
    ("encoding", "named"),
    [(b"gzip", True), (b"GZip", True), (b"br", True), (b"deflate, gzip", False), (b"zebra", False)],
)
def test_a_compressed_body_is_a_415_that_says_so(encoding: bytes, named: bool) -> None:

    with pytest.raises(ApiError) as caught:
        read(gzip.compress(chat()), {"content-encoding": encoding})
    err = caught.value
    assert (err.status, err.code) == (415, "unsupported_content_encoding")
    assert "uncompressed" in err.message and SECRET not in err.message
    assert (encoding.decode().lower() in err.message) is named


def test_a_coding_on_a_second_content_encoding_line_is_a_415_too() -> None:
    """Starlette's ``headers.get`` reads the first line only: "identity" then "gzip"
    was read as identity, and the gzip bytes got a JSON error about byte 0x8b."""
    req = request(gzip.compress(chat()))
    req.scope["headers"] = [(b"content-encoding", b"identity"), (b"content-encoding", b"gzip")]
    with pytest.raises(ApiError) as caught:
        asyncio.run(read_json(req, LIMIT))
    assert (caught.value.status, caught.value.code) == (415, "unsupported_content_encoding")
    # The control: two identity lines are no coding.
    req = request(chat())
    req.scope["headers"] = [(b"content-encoding", b"identity"), (b"content-encoding", b"")]
    assert asyncio.run(read_json(req, LIMIT))["model"] == "m"


def test_an_identity_content_encoding_is_read_as_usual() -> None:
    assert read(chat(), {"content-encoding": b"identity"})["model"] == "m"  # positive control


def test_a_body_that_does_not_decode_says_where_not_what() -> None:
    """A body that is not UTF-8 quoted the byte found (``'utf-8' codec can't decode byte
    0xff``), and a number past int()'s digit limit a Python hint (``use
    sys.set_int_max_str_digits()``): the client's bytes and the interpreter's words, not
    what is wrong with the request (a review)."""
    err = refused(b'{"model": "m", "messages": [{"role": "user", "content": "hi \xff\xfe"}]}')
    assert err.message.startswith("the request body is not UTF-8 (at byte ")
    assert "0xff" not in err.message and "codec" not in err.message
    err = refused(chat(', "max_tokens": ' + "9" * 5000))
    assert err.message == "the request body is not valid JSON: a number has too many digits"
    assert "sys." not in err.message
    # the controls: NaN is named, a syntax error says where
    assert refused(chat(', "temperature": NaN')).message.endswith("NaN is not valid JSON")
    where = refused(chat(', "x": [1,}')).message
    assert where.startswith("the request body is not valid JSON: Expecting value at char ")
    # json's own message ends in "at" here: said once ("… character at at char" before)
    where = refused(b'{"model": "m", "messages": "a\nb"}').message
    said = "the request body is not valid JSON: Invalid control character at char "
    assert where.startswith(said)


def test_a_body_that_does_not_arrive_in_time_is_a_408() -> None:
    """The deadline covers the whole body: a client that declared a body and sent part
    of it is refused once ``timeout`` has passed (tests/gateway/proxy/test_body_timeout.py
    over real sockets)."""
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b'{"model": ', "more_body": True}
        await asyncio.sleep(3600)  # the rest never comes
        raise AssertionError("unreachable")

    scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
    with pytest.raises(ApiError) as caught:
        asyncio.run(read_json(Request(scope, receive), LIMIT, timeout=0.05))
    err = caught.value
    assert err.status == 408 and err.code == "request_timeout"
    assert err.headers == {"Connection": "close"}
    # control: the same reader without a deadline, and with one that is not reached
    assert read(chat())["model"] == "m"
    assert asyncio.run(read_json(request(chat()), LIMIT, timeout=None))["model"] == "m"
