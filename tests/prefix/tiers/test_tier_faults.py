"""L3 faults that must stay misses: Redis is an optimization, never a dependency.

A reply of the wrong shape (a fake RESP server), a store that raises something
unexpected, an error reply to a write (OOM under noeviction, READONLY), a server
that answers slowly but steadily. Every request still succeeds with nothing
reused, the engine thread lives on, every block goes back to the pool. Also: an
engine refuses a model computing in another dtype than its KV is fingerprinted as.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest
import redis
import torch

from prefix.config import EngineConfig
from prefix.errors import EngineConfigError, TierUnavailableError
from prefix.model.loader import LoadedModel
from prefix.model.sampling import SamplingParams
from prefix.serve.async_engine import AsyncEngine
from prefix.serve.engine import PrefixEngine
from prefix.tiers.l3 import L3Tier
from prefix.tiers.redis_store import RedisBlockStore
from tests.prefix.tiers.fake_resp import FakeRedis

REDIS_URL = "redis://127.0.0.1:6379/0"


def tokens(n: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, 128, (n,), generator=gen).tolist()


A = tokens(13, seed=1)  # 3 reusable blocks of 4


def make(loaded: LoadedModel, **kw: Any) -> PrefixEngine:
    cfg: dict[str, Any] = {"block_size": 4, "num_blocks": 8, "server_salt": uuid.uuid4().hex}
    return PrefixEngine(EngineConfig(**(cfg | kw)), loaded=loaded)


def redis_tier(engine: PrefixEngine) -> L3Tier:
    assert engine.tiers is not None
    return next(t for t in engine.tiers.l3 if t.name == "l3_redis")


def assert_pool_whole(engine: PrefixEngine) -> None:
    assert engine.pool.num_free_blocks == engine.pool.num_blocks
    engine.pool.check_integrity()


@pytest.mark.parametrize("mode", ["short", "int"])
def test_a_malformed_mget_reply_is_a_miss(tiny_llama: LoadedModel, mode: str) -> None:
    with FakeRedis(mode) as fake:
        engine = make(tiny_llama, kv_redis_url=fake.url, kv_tier_timeout_s=0.3)
        _, cached = engine.prefill_logits(A, namespace="t")
        assert cached == 0 and fake.mgets == 1
        assert_pool_whole(engine)
        assert redis_tier(engine).stats()["errors"] == 1
        engine.close()


def test_a_malformed_mget_reply_leaves_the_async_engine_alive(tiny_llama: LoadedModel) -> None:
    with FakeRedis("short") as fake:
        engine = make(tiny_llama, kv_redis_url=fake.url, kv_tier_timeout_s=0.3)
        runner = AsyncEngine(engine)
        runner.start()

        async def run(prompt: list[int]) -> int:
            req = engine.request(prompt, SamplingParams(max_tokens=2), namespace="t")
            outputs = [out async for out in runner.generate(req)]
            assert outputs[-1].finished and outputs[-1].finish_reason != "error"
            return outputs[-1].cached_tokens

        try:
            assert asyncio.run(asyncio.wait_for(run(A), 20)) == 0
            assert runner.is_alive, runner.error
            assert asyncio.run(asyncio.wait_for(run(tokens(13, seed=2)), 20)) == 0
            assert runner.is_alive, runner.error
        finally:
            runner.shutdown(5)
        assert_pool_whole(engine)
        engine.close()


def test_a_raising_lower_tier_leaves_no_block_pinned(tiny_llama: LoadedModel) -> None:
    with FakeRedis("short") as fake:
        engine = make(tiny_llama, kv_redis_url=fake.url)
        assert engine.tiers is not None

        def broken(keys: list[bytes], block_ids: list[int]) -> int:
            raise RuntimeError("a lower tier bug")

        engine.blocks.lower_tier.load_chain = broken  # type: ignore[union-attr,method-assign]
        with pytest.raises(RuntimeError, match="a lower tier bug"):
            engine.prefill_logits(A, namespace="t")
        assert_pool_whole(engine)
        engine.close()


class OddClient:
    """A client failing the way redis-py did on a server answering HELLO 3 oddly."""

    def mget(self, names: list[str]) -> Any:
        raise AttributeError("'int' object has no attribute 'get'")

    def close(self) -> None:
        pass


def test_an_unexpected_client_error_is_unavailable_not_a_crash() -> None:
    store = RedisBlockStore(REDIS_URL, namespace=uuid.uuid4().hex, client=OddClient())  # type: ignore[arg-type]
    with pytest.raises(TierUnavailableError, match="AttributeError"):
        store.get_many([b"k" * 32])
    assert store.stats()["breaker_open"] == 1  # a server we cannot understand: back off


@pytest.mark.redis
def test_a_refused_write_does_not_skip_reads(tiny_llama: LoadedModel) -> None:
    salt = uuid.uuid4().hex
    first = make(tiny_llama, server_salt=salt, kv_redis_url=REDIS_URL, kv_redis_ttl_seconds=60)
    first.prefill_logits(A, namespace="t")
    assert first.flush_tiers(10)
    first.close()
    engine = make(tiny_llama, server_salt=salt, kv_redis_url=REDIS_URL, kv_redis_ttl_seconds=60)
    tier = redis_tier(engine)
    store = tier.store
    assert isinstance(store, RedisBlockStore)

    def full(*args: Any, **kwargs: Any) -> Any:  # what redis-py raises under noeviction
        raise redis.exceptions.OutOfMemoryError(
            "command not allowed when used memory > 'maxmemory'."
        )

    store.client.set = full  # type: ignore[method-assign]
    engine.prefill_logits(tokens(13, seed=2), namespace="t")  # its write-through is refused
    assert engine.flush_tiers(10)
    assert tier.stats()["write_errors"] == 3
    _, cached = engine.prefill_logits(A, namespace="t")  # Redis still serves A
    assert cached == 12
    stats = store.stats()
    assert stats["skipped"] == 0 and stats["breaker_open"] == 0 and stats["rejected"] == 3
    engine.close()


def test_a_slow_steady_reply_is_cut_at_the_read_budget(tiny_llama: LoadedModel) -> None:
    # 7 keys: a 39-byte reply at 0.1 s a byte (~4 s), each byte inside the 0.2 s timeout
    with FakeRedis("dribble", byte_delay=0.1) as fake:
        engine = make(tiny_llama, num_blocks=16, kv_redis_url=fake.url, kv_tier_timeout_s=0.2)
        assert engine.tiers is not None and engine.tiers.read_budget_s == pytest.approx(0.8)
        waited: list[float] = []

        def other() -> None:  # another request wanting the engine meanwhile
            time.sleep(0.2)
            start = time.perf_counter()
            with engine._lock:
                waited.append(time.perf_counter() - start)

        thread = threading.Thread(target=other)
        thread.start()
        start = time.perf_counter()
        _, cached = engine.prefill_logits(tokens(29, seed=3), namespace="t")
        elapsed = time.perf_counter() - start
        thread.join(5)
        assert cached == 0
        assert elapsed < 2.0, elapsed
        assert waited and waited[0] < 2.0, waited
        assert engine.tiers.num_budget_exhausted == 1
        assert redis_tier(engine).stats()["errors"] == 1
        assert_pool_whole(engine)
        engine.close()


def test_the_admissions_of_one_step_share_one_read_budget(tiny_llama: LoadedModel) -> None:
    """A step admits several requests under the engine lock; with a budget each, a store
    that answers slowly but within its timeout (so no breaker opens) held every decoding
    stream for admissions x reply time (a review: 16 admissions took 7.7 s against a
    Redis answering in 0.4 s). Here each reply takes ~0.2 s: twelve admissions took
    ~2.4 s, one budget (0.8 s) for the step now; the rest recompute."""
    with FakeRedis("dribble", byte_delay=0.02) as fake:
        engine = make(tiny_llama, num_blocks=64, kv_redis_url=fake.url, kv_tier_timeout_s=0.2)
        assert engine.tiers is not None
        for seed in range(12):
            prompt = tokens(9, seed=10 + seed)
            engine.add_request(engine.request(prompt, SamplingParams(max_tokens=1), namespace="t"))
        start = time.perf_counter()
        engine.step()  # admits all twelve
        elapsed = time.perf_counter() - start
        assert engine.scheduler.num_waiting == 0  # the control: all twelve were admitted
        assert redis_tier(engine).stats()["hits"] + redis_tier(engine).stats()["misses"] >= 1
        assert elapsed < 1.5, elapsed
        while engine.has_unfinished():
            engine.step()
        assert_pool_whole(engine)
        engine.close()


def test_a_model_in_another_dtype_than_the_kv_is_refused(tiny_llama: LoadedModel) -> None:
    assert tiny_llama.dtype == torch.float32
    with pytest.raises(EngineConfigError, match="float32"):
        make(tiny_llama, dtype="bfloat16")  # its KV would be fingerprinted as bf16 KV
    assert make(tiny_llama, dtype="float32").fingerprint.dtype == "float32"
