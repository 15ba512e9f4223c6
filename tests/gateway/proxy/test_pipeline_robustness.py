"""The pipeline never fails a request the cache cannot handle, and an answer it will not
store costs the cache nothing (gateway/proxy/pipeline.py).

* A body the cache cannot key (a text part with ``"text": null``, or anything no rule
  foresaw) skips the semantic layer as ``skipped:uncacheable:…`` and reaches the model;
  an unexpected exception is logged by its type only, never with the body's text.
* ``Cache-Control`` ages are ASCII digits; a temperature no float holds skips the cache.
* The backfill decides whether the answer is storable (finish reason, guards, coverage)
  before it makes room under the tenant's bounds: a truncated or refused answer, or a
  guarded question, evicts no good entry.
* Over a real socket in front of an HTTP upstream, the bodies that used to be 500s are
  a 400 in the OpenAI shape (what strict JSON cannot carry) or a plain proxied answer.

Real embedder and validators, a real SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Components
from gateway.metrics import GatewayMetrics
from gateway.proxy.controls import CacheControl
from gateway.proxy.pipeline import Pipeline
from protocol.http import HEADER_INT_CAP
from semantic import Embedder, SemanticCache, SemanticQuery
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import Gateway, assert_openai_error, gateway_settings, running_gateway
from tests.gateway.proxy.pipeline_support import (
    NO_CC,
    answer,
    backfill,
    body,
    ctx,
    lookup,
    questions,
    real_cache,
)
from tests.gateway.scripted_upstream import Upstream, scripted_upstream

pytestmark = pytest.mark.slow

SECRET = "zebra"  # client text that must appear in no log line and no error message


@pytest.fixture
def cache(embedder: Embedder, tmp_path: Path) -> Iterator[SemanticCache]:
    with real_cache(embedder, tmp_path / "robust.db") as semantic:
        yield semantic


# ------------------------------------------------------------------ cache controls


@pytest.mark.parametrize(
    ("header", "max_age"),
    [
        ("max-age=\u00b2", None),  # str.isdigit() is true, int() raised: a 500
        ("max-age=\u0663", None),  # int() would read an Arabic-Indic three as 3
        ('max-age="60"', 60),
        ("max-age=60, s-maxage=\u00b9", 60),
        ("s-maxage=" + "9" * 5000, HEADER_INT_CAP),  # past int()'s digit limit: a 500 too
        ("max-age=-1", None),
    ],
)
def test_cache_control_ages_are_ascii_digits(header: str, max_age: int | None) -> None:
    assert CacheControl.parse(header).max_age == max_age


# ------------------------------------------------------------------ lookup


def test_a_null_text_part_skips_the_cache(cache: SemanticCache) -> None:
    pipe = Pipeline(cache, GatewayMetrics())
    null = {"type": "text", "text": None}
    for content in ([null], [{"type": "text", "text": "hello"}, null]):
        decision = lookup(pipe, ctx(), body(content))
        assert decision.header == "skipped:uncacheable:not_text"
        assert backfill(pipe, ctx(), decision, answer("Fine.")) == "skipped:not_cacheable"
    # In the context (not the question) a null text is only a value to hash.


def test_a_question_of_only_escapes_is_empty_not_an_internal_error(
    cache: SemanticCache, caplog: pytest.LogCaptureFixture
) -> None:
    # The guards re-read the validators' prepared text, where control characters are
    # spaces: an empty text there was an EmptyTextError logged as an internal error.
    pipe = Pipeline(cache, GatewayMetrics())
    with caplog.at_level(logging.WARNING):
        for question in ("\x1b\x07\x08", "\u200b\u200b"):
            assert lookup(pipe, ctx(), body(question)).header == "skipped:uncacheable:empty"
    assert not caplog.records
    assert lookup(pipe, ctx(), body("\x1b[0m?")).status != "skipped"  # control
    ctx_null = body("What is the capital of France?")
    ctx_null["messages"][0]["content"] = [{"type": "text", "text": None}]
    assert lookup(pipe, ctx(), ctx_null).header == "miss:empty"


@pytest.mark.parametrize(
    "messages",
    [5, True, 1.5, "hi", [{"content": [{"type": [1]}]}], [{"content": [{"type": {}}]}]],
    ids=["int", "bool", "float", "str", "type-list", "type-object"],
)
def test_a_completion_with_a_messages_field_of_any_shape_reaches_the_model(
    cache: SemanticCache, messages: Any
) -> None:
    """A completion's body is not validated as a chat's: ``"messages": 5`` (or a part
    whose type is a list) was a TypeError in the cacheability check, a 500 (a review)."""
    pipe = Pipeline(cache, GatewayMetrics())
    completion = {"model": "m", "prompt": "What is the capital of Spain?", "temperature": 0}
    odd = completion | {"messages": messages}
    decision = asyncio.run(pipe.lookup(ctx(), "completion", odd, NO_CC))
    assert decision.status != "skipped" or decision.header == "skipped:media", decision.header
    # the control: the same completion without the field is looked up as ever
    assert asyncio.run(pipe.lookup(ctx(), "completion", completion, NO_CC)).header == "miss:empty"


@pytest.mark.parametrize(
    "value",
    [10**400, "nan", float("nan"), float("inf"), [1]],
    ids=["huge-int", "nan-str", "nan", "inf", "list"],
)
def test_a_temperature_no_float_holds_skips_the_cache(cache: SemanticCache, value: Any) -> None:
    pipe = Pipeline(cache, GatewayMetrics())
    decision = lookup(pipe, ctx(), body("What is the capital of France?", temperature=value))
    assert decision.header == "skipped:temperature"


@pytest.mark.parametrize("where", ["query", "lookup"])
def test_an_unexpected_error_skips_the_cache_and_logs_its_type_only(
    cache: SemanticCache,
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError(f"the question was {SECRET}")

    if where == "query":
        monkeypatch.setattr(SemanticQuery, "from_chat", broken)
    else:
        monkeypatch.setattr(cache, "lookup", broken)
    pipe = Pipeline(cache, GatewayMetrics())
    with caplog.at_level(logging.DEBUG):
        decision = lookup(pipe, ctx(), body(f"Is a {SECRET} striped?"))
    assert decision.header == "skipped:uncacheable:internal"
    assert decision.query is None  # so the backfill stores nothing
    assert any("KeyError" in r.getMessage() for r in caplog.records)
    assert SECRET not in caplog.text


# ------------------------------------------------------------------ backfill


GOOD = "What is the capital of France?"


def fill(cache: SemanticCache, policy: dict[str, Any]) -> Pipeline:
    pipe = Pipeline(cache, GatewayMetrics())
    decision = lookup(pipe, ctx(**policy), body(GOOD))
    assert backfill(pipe, ctx(**policy), decision, answer("Paris.")) == "stored"
    return pipe


@pytest.mark.parametrize(
    "policy",
    [{"max_semantic_entries": 1}, {"max_semantic_partitions": 1}],
    ids=["entries", "partitions"],
)
@pytest.mark.parametrize(
    ("question", "response", "outcome"),
    [
        ("Tell me a long story", answer("Once upon", "length"), "skipped:truncated"),
        ("Tell me a long story", answer("", "content_filter"), "skipped:refused"),
        ("Tell me a long story", {"error": {"message": "boom"}}, "skipped:error"),
        ("What is the latest news today?", answer("Nothing."), "skipped:guarded:time_sensitive"),
    ],
    ids=["truncated", "refused", "error", "guarded"],
)
def test_an_answer_that_will_not_be_stored_evicts_nothing(
    cache: SemanticCache,
    policy: dict[str, Any],
    question: str,
    response: dict[str, Any],
    outcome: str,
) -> None:
    pipe = fill(cache, policy)
    # Another partition (another system prompt) for the partition bound, the same for entries.
    system = (
        "Answer briefly."
        if "max_semantic_partitions" in policy
        else "Answer in one short sentence."
    )
    decision = lookup(pipe, ctx(**policy), body(question, system=system))
    assert decision.query is not None
    assert backfill(pipe, ctx(**policy), decision, response) == outcome
    assert questions(cache) == [GOOD]
    assert lookup(pipe, ctx(**policy), body(GOOD)).status == "hit"


def test_a_storable_answer_still_makes_room(cache: SemanticCache) -> None:
    pipe = fill(cache, {"max_semantic_entries": 1})
    decision = lookup(pipe, ctx(max_semantic_entries=1), body("How do I reset my password?"))
    assert (
        backfill(pipe, ctx(max_semantic_entries=1), decision, answer("Use the link.")) == "stored"
    )
    assert questions(cache) == ["How do I reset my password?"]


# ------------------------------------------------------------------ over a socket


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with scripted_upstream("vllm") as upstream:
        yield upstream


@pytest.fixture(scope="module")
def gw(
    up: Upstream, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("robustness")
    settings = gateway_settings(data_dir, upstream_url=up.url)
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


def raw_chat(extra: str = "", content: str = f'"hi {SECRET}"') -> bytes:
    messages = f'[{{"role": "user", "content": {content}}}]'
    return f'{{"model": "{rec.MODEL}", "messages": {messages}{extra}}}'.encode()


@pytest.mark.parametrize(
    "raw",
    [
        raw_chat(content=f'"hi \\ud800 {SECRET}"'),
        raw_chat(', "temperature": 1e400'),
        raw_chat(', "metadata": {"x": 1e999}'),
        raw_chat(', "foo": ' + "[" * 959 + "]" * 959),
        raw_chat(', "metadata": ' + "[" * 959 + "]" * 959),
    ],
    ids=["lone-surrogate", "temperature-1e400", "metadata-1e999", "deep-foo", "deep-metadata"],
)
def test_what_strict_json_cannot_carry_is_a_400_before_the_upstream(
    gw: Gateway, up: Upstream, raw: bytes
) -> None:
    before = len(up.received)
    with gw.http(gw.tenant("strict")[1]) as http:
        r = http.post(
            "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
        )
    err = assert_openai_error(r, 400, "invalid_request_error")
    assert SECRET not in json.dumps(err)
    assert len(up.received) == before  # refused before anything was forwarded


def test_odd_cache_control_and_null_text_parts_are_proxied(gw: Gateway) -> None:
    with gw.http(gw.tenant("odd")[1]) as http:
        plain = {"model": rec.MODEL, "messages": [{"role": "user", "content": "hi you"}]}
        # Latin-1 "²" as the header's bytes: isdigit() was true and int() raised, a 500.
        odd = {b"cache-control": b"max-age=\xb2"}
        r = http.post("/v1/chat/completions", json=plain, headers=odd)
        assert r.status_code == 200, r.text
        null_part = {"role": "user", "content": [{"type": "text", "text": None}]}
        r = http.post("/v1/chat/completions", json={"model": rec.MODEL, "messages": [null_part]})
        assert r.status_code == 200, r.text
        assert r.headers["x-cachegate-semantic"] == "skipped:uncacheable:not_text"


class _CutFails:
    """A verification whose cut cannot be chosen (a bad stored score, a bug)."""

    async def apply(self, *_args: Any) -> Any:
        raise ValueError("the cut is not a probability")


def test_a_verifier_cut_that_cannot_be_chosen_serves_nothing(cache: SemanticCache) -> None:
    q = body("What is the capital of France?")
    plain = Pipeline(cache, GatewayMetrics())
    assert backfill(plain, ctx(), lookup(plain, ctx(), q), answer("Paris.")) == "stored"
    assert lookup(plain, ctx(), q).status == "hit"  # positive control
    broken = Pipeline(cache, GatewayMetrics(), verification=_CutFails())  # type: ignore[arg-type]
    decision = lookup(broken, ctx(), q)
    assert decision.header == "skipped:uncacheable:internal" and decision.result is None
