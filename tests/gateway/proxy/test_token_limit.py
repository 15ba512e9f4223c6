"""A tenant's ``rate_limit_tpm`` (gateway/proxy/token_limit.py): the bucket arithmetic on
each store (this process, Redis, PostgreSQL), then a live gateway over the tiny random
Llama: admitted while the bucket holds a token, charged an answer's tokens after it, a
429 with the token headers once in debt; a tenant without the limit beside it as the
control, and a stream whose client left charged what it was sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy.exc import OperationalError

from gateway.app import Components
from gateway.policy import TenantPolicy
from gateway.proxy.ratelimit import (
    ALWAYS,
    DEBT_MINUTES,
    BucketStore,
    LocalBuckets,
    token_bucket_key,
)
from gateway.proxy.ratelimit_shared import KEY_PREFIX, PostgresBuckets, RedisBuckets
from migrations.runner import upgrade_database
from prefix.model.loader import LoadedModel
from tests.gateway.conftest import (
    PG_SERVER_URL,
    Gateway,
    assert_openai_error,
    gateway_settings,
    running_gateway,
    wait_until,
)
from tests.gateway.proxy.test_client_disconnect import slow_engine

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(params=["local", "redis", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BucketStore]:
    if request.param == "local":
        yield LocalBuckets()
    elif request.param == "redis":
        try:
            redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping()
        except redis.RedisError:
            pytest.skip("Redis on 127.0.0.1:6379 is unreachable")
        yield RedisBuckets(REDIS_URL)
    else:
        pg_schema = request.getfixturevalue("pg_schema")
        url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
        try:
            upgrade_database(url)
        except OperationalError:
            pytest.skip("PostgreSQL on 127.0.0.1:5432 is unreachable")
        yield PostgresBuckets(url)


def test_a_token_bucket_admits_while_it_holds_one_and_charges_into_debt(
    store: BucketStore,
) -> None:
    tenant, other = f"tpm:t-{uuid.uuid4().hex[:8]}", f"tpm:u-{uuid.uuid4().hex[:8]}"
    try:
        admitted = store.take(tenant, 600, 0.0)  # a check takes nothing
        assert admitted.allowed and admitted.tokens == pytest.approx(600, abs=1)
        assert store.take(tenant, 600, 450.0, ALWAYS).allowed  # the answer's tokens
        assert store.take(tenant, 600, 0.0).allowed  # ~150 left: admitted
        store.take(tenant, 600, 2000.0, ALWAYS)  # past what is left: a debt, kept whole
        refused = store.take(tenant, 600, 0.0)
        assert not refused.allowed
        # (before session 44 the debt stopped at -600: what an answer cost past a
        # minute's tokens was written off, and the limit overshot many times over)
        assert refused.tokens == pytest.approx(-1850, abs=2)
        assert refused.wait == pytest.approx(1851 / 10, abs=0.5)  # 10 tokens a second
        assert store.take(other, 600, 0.0).allowed  # control: another tenant's bucket
        # the debt stops at DEBT_MINUTES of the limit
        store.take(tenant, 600, 1e9, ALWAYS)
        deepest = -DEBT_MINUTES * 600
        assert store.take(tenant, 600, 0.0).tokens == pytest.approx(deepest, abs=2)
        # a limit lowered meanwhile: the debt is cut to what the new one allows, so it
        # is waited out within DEBT_MINUTES + 1 minutes of the new limit, not days
        lowered = store.take(tenant, 6, 0.0)
        assert not lowered.allowed and lowered.tokens == pytest.approx(-DEBT_MINUTES * 6, abs=1)
        assert lowered.wait == pytest.approx((DEBT_MINUTES * 6 + 1) * 10, abs=5)
    finally:
        store.drop(tenant)
        store.drop(other)


def test_a_token_bucket_key_fits_the_store_for_any_tenant_id() -> None:
    assert token_bucket_key("acme", "n" * 39) == f"tpm:minted:{'n' * 39}"
    assert token_bucket_key("acme", "") == "tpm:acme"
    long = token_bucket_key("x" * 64, "")  # a tenant of before migration 0005
    assert len(long) <= 64 and long != token_bucket_key("y" * 64, "")
    assert KEY_PREFIX  # the Redis keys add their own prefix outside the 64


@pytest.fixture(scope="module")
def gw(tiny_llama: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    # slowed (30 ms a step): a stream's client leaves long before its answer ends
    engine = slow_engine(tiny_llama, max_num_seqs=8)
    settings = gateway_settings(tmp_path_factory.mktemp("tpm"), semantic_enabled=False)
    with running_gateway(settings, Components(engine=engine)) as gateway:
        yield gateway


def bucket(gw: Gateway, key: str) -> float:
    """The tenant's token bucket now, read without taking anything."""
    ctx = gw.tenants.authenticate(key)
    assert ctx.policy.rate_limit_tpm is not None
    store = gw.app.state.rate_limiter.store
    taken = store.take(
        token_bucket_key(ctx.tenant_id, ctx.namespace_id), ctx.policy.rate_limit_tpm, 0.0, ALWAYS
    )
    assert taken.tokens is not None
    return float(taken.tokens)


def completion(gw: Gateway, max_tokens: int, **extra: object) -> dict[str, object]:
    body = {"model": gw.model, "prompt": "one two three four", "max_tokens": max_tokens}
    return body | {"ignore_eos": True} | extra


def test_a_tenant_is_charged_its_answers_tokens_and_refused_in_debt(gw: Gateway) -> None:
    # one token a second; and 100 requests a minute, whose headers every answer carries
    _, key = gw.tenant("tpm", TenantPolicy(rate_limit_tpm=60, rate_limit_rpm=100))
    _, free = gw.tenant("tpm-free")
    with gw.http(key) as client:
        first = client.post("/v1/completions", json=completion(gw, 40))
        assert first.status_code == 200, first.text
        assert first.headers["x-ratelimit-limit-tokens"] == "60"
        assert first.headers["x-ratelimit-remaining-tokens"] == "60"
        used = first.json()["usage"]
        spent = used["prompt_tokens"] + used["completion_tokens"]
        assert spent > 40
        # charged on the limiter's threads once the answer is out: 60 - spent (+ refill)
        assert wait_until(lambda: bucket(gw, key) < 60 - spent + 5)
        second = client.post("/v1/completions", json=completion(gw, 40))  # ~15 left: in
        assert second.status_code == 200, second.text
        assert wait_until(lambda: bucket(gw, key) < 0)
        refused = client.post("/v1/completions", json=completion(gw, 1))
    err = assert_openai_error(refused, 429, "rate_limit_error")
    assert err["code"] == "rate_limit_exceeded" and "tokens per minute" in err["message"]
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["x-ratelimit-remaining-tokens"] == "0"
    # the request bucket's too, read without taking a token (the token 429 spends none;
    # before session 44 it carried only the token headers)
    assert refused.headers["x-ratelimit-limit-requests"] == "100"
    assert int(refused.headers["x-ratelimit-remaining-requests"]) >= 97
    # control: a tenant without the limit is served, and told nothing about tokens
    with gw.http(free) as client:
        r = client.post("/v1/completions", json=completion(gw, 40))
    assert r.status_code == 200 and "x-ratelimit-limit-tokens" not in r.headers


def test_a_stream_whose_client_left_is_charged_what_it_was_sent(gw: Gateway) -> None:
    _, key = gw.tenant("tpm-stream", TenantPolicy(rate_limit_tpm=600))  # 10 a second
    with (
        gw.http(key) as client,
        client.stream("POST", "/v1/completions", json=completion(gw, 150, stream=True)) as r,
    ):
        assert r.status_code == 200
        lines = r.iter_lines()
        read = [line for line, _ in zip(lines, range(20), strict=False) if line.startswith("data")]
    assert len(read) >= 5
    assert wait_until(lambda: bucket(gw, key) < 600 - 3, timeout=3)
    charged = 600 - bucket(gw, key)
    # the chunks sent before it left (a refill of 10 a second on top), not 150 + prompt
    assert 3 < charged < 100


PROMPT = "word " * 80  # 400 characters: 100 tokens at four a token


def test_a_request_whose_client_leaves_mid_answer_is_charged_its_prompt(gw: Gateway) -> None:
    """A non-streamed request cut while its answer is generated was charged nothing,
    so a client could have the upstream prefill any prompt for free (before its first
    token: relay/test_token_limit_relay.py)."""
    _, key = gw.tenant("tpm-leaving", TenantPolicy(rate_limit_tpm=600))  # 10 a second
    with gw.http(key, timeout=0.4) as client, pytest.raises(httpx.ReadTimeout):
        client.post("/v1/completions", json=completion(gw, 60, prompt=PROMPT))
    assert wait_until(lambda: bucket(gw, key) < 600 - 100, timeout=3)
