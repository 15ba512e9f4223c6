"""An L3 tier's edges (prefix/tiers/l3.py), from a review (session 41): a record in
another format version (an engine of another release sharing the store) is a miss but
is left in place, not deleted as corrupt; ``close()`` twice leaves no phantom write and
reads after it return at once; a store that is down is said in one warning every
LOG_EVERY_S, not one a block. Tiny random model, real disk store, a closed Redis port."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest

import prefix.tiers.l3 as l3
from prefix.model.loader import LoadedModel
from prefix.tiers.setup import store_namespace
from tests.gateway.failure_peers import closed_port
from tests.prefix.tiers.test_l3_tiers import (
    A,
    block_file,
    compute_and_close,
    keys_of,
    make,
    tier,
    tokens,
)


@pytest.fixture
def salt() -> str:
    return f"l3-life-{uuid.uuid4().hex}"


def test_another_versions_record_is_a_miss_left_in_place(
    tiny_llama: LoadedModel,
    salt: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = {"kv_disk_path": str(tmp_path)}
    compute_and_close(make(tiny_llama, salt, **cfg), A, "t")
    engine = make(tiny_llama, salt, **cfg)
    path = block_file(tmp_path, engine, keys_of(engine, A, "t")[1])
    data = bytearray(path.read_bytes())
    data[4:6] = (2).to_bytes(2, "little")  # the version field: a newer engine's record
    path.write_bytes(bytes(data))
    disk = tier(engine, "l3_disk")
    discarded: list[bytes] = []
    monkeypatch.setattr(disk.store, "discard", discarded.append)
    assert engine.prefill_logits(A, namespace="t")[1] == 4  # the chain stops there
    assert (disk.foreign, disk.corrupt) == (1, 0)
    assert discarded == []  # not deleted as damage (the recomputed block is written over)
    engine.close()


def test_each_record_format_from_2_on_has_a_namespace_of_its_own() -> None:
    digest = bytes(range(32))
    assert store_namespace(digest, 1) == digest.hex()[:16]  # the stores of today: as named
    assert len({store_namespace(digest, v) for v in (1, 2, 3)}) == 3


def test_a_second_close_leaves_nothing_queued_and_reads_after_close_return_at_once(
    tiny_llama: LoadedModel,
    salt: str,
    tmp_path: Path,
) -> None:
    engine = make(tiny_llama, salt, kv_disk_path=str(tmp_path))
    engine.prefill_logits(A, namespace="t")
    disk = tier(engine, "l3_disk")
    engine.close()
    disk.close()  # again
    assert disk.stats()["queued_writes"] == 0
    start = time.monotonic()
    assert disk.flush(5.0)
    assert disk.fetch([b"k" * 32], timeout=2.0) == [None]
    assert time.monotonic() - start < 1.0


def test_a_store_that_is_down_is_said_once_in_a_while(
    tiny_llama: LoadedModel,
    salt: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(l3, "LOG_EVERY_S", 3600.0)
    url = f"redis://127.0.0.1:{closed_port()}/0"
    engine = make(tiny_llama, salt, kv_redis_url=url, kv_tier_timeout_s=0.2)
    with caplog.at_level(logging.WARNING, logger="cachegate.prefix"):
        for i in range(5):
            engine.prefill_logits(tokens(13, seed=10 + i), namespace="t")
        engine.flush_tiers(10)
    redis = tier(engine, "l3_redis").stats()
    failures = redis["errors"] + redis["write_errors"]
    assert failures > 5  # the control: they happened, every read and write
    said = [r for r in caplog.records if "kv tier l3_redis" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    engine.close()


def test_a_prefix_hot_in_the_pool_is_the_last_to_leave_the_disk(
    tiny_llama: LoadedModel, salt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prefix served from the pool on every other request was written to disk once,
    looked least recently used there, and was evicted first: after a restart it was
    recomputed while a one-off prompt was cached (a review, session 41). Admissions now
    touch the lower copies of what they reuse."""
    monkeypatch.setattr(l3, "TOUCH_EVERY_S", 0.0)
    hot = tokens(13, seed=99)  # 3 reusable blocks
    probe = make(tiny_llama, salt, kv_disk_path=str(tmp_path / "probe"))
    probe.prefill_logits(hot, namespace="t")
    assert probe.flush_tiers(10)
    record_bytes = tier(probe, "l3_disk").store.stats()["used_bytes"] // 3
    probe.close()
    cfg = {"kv_disk_path": str(tmp_path / "disk"), "kv_disk_bytes": int(10.5 * record_bytes)}
    engine = make(tiny_llama, salt, num_blocks=16, **cfg)
    for i in range(8):
        engine.prefill_logits(hot, namespace="t")  # from the pool after the first
        engine.prefill_logits(tokens(13, seed=200 + i), namespace="t")  # one-offs
        assert engine.flush_tiers(10)
    engine.close()
    restarted = make(tiny_llama, salt, **cfg)
    assert restarted.prefill_logits(hot, namespace="t")[1] == 12  # was 0
    restarted.close()


@pytest.mark.redis
def test_a_touch_starts_a_redis_records_ttl_again() -> None:
    from prefix.tiers.redis_store import RedisBlockStore

    store = RedisBlockStore("redis://127.0.0.1:6379/0", namespace="abcd1234", ttl_seconds=600)
    key = uuid.uuid4().bytes * 2
    try:
        store.put(key, b"record")
        store.client.expire(store.redis_key(key), 5)  # about to expire
        store.touch([key])
        assert store.client.ttl(store.redis_key(key)) > 500
        other = uuid.uuid4().bytes * 2  # the control: an untouched key keeps its TTL
        store.put(other, b"record")
        store.client.expire(store.redis_key(other), 5)
        assert store.client.ttl(store.redis_key(other)) <= 5
    finally:
        store.client.delete(store.redis_key(key), store.redis_key(other))
        store.close()


def test_the_new_tier_series_are_on_the_engine_metrics(
    tiny_llama: LoadedModel, salt: str, tmp_path: Path
) -> None:
    from prefix.serve.metrics import EngineMetrics

    engine = make(tiny_llama, salt, kv_disk_path=str(tmp_path))
    engine.prefill_logits(A, namespace="t")
    text = EngineMetrics(engine).render().decode()
    assert 'prefix_tier_capacity_bytes{tier="l3_disk"}' in text
    assert 'prefix_tier_foreign_blocks_total{tier="l3_disk"} 0.0' in text
    engine.close()


def test_touches_never_crowd_out_writes(
    tiny_llama: LoadedModel, salt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Touches have a queue and a thread of their own: on the write queue, slow ones
    (a remote Redis) made newly computed blocks drop (a review of this change)."""
    monkeypatch.setattr(l3, "TOUCH_EVERY_S", 0.0)
    probe = make(tiny_llama, salt, kv_disk_path=str(tmp_path / "probe"))
    block_bytes = tier(probe, "l3_disk").layout.nbytes
    probe.close()
    buffer = 12 * block_bytes  # room for the writes below, not for them and ten touches
    engine = make(tiny_llama, salt, kv_disk_path=str(tmp_path), kv_tier_write_buffer_bytes=buffer)
    disk = tier(engine, "l3_disk")
    real_touch = disk.store.touch  # type: ignore[attr-defined]

    def slow_touch(keys: list[bytes]) -> None:
        time.sleep(0.2)
        real_touch(keys)

    monkeypatch.setattr(disk.store, "touch", slow_touch)
    for _ in range(10):
        disk.touch_async([b"k" * 32])
    for i in range(4):
        engine.prefill_logits(tokens(13, seed=300 + i), namespace="t")
    assert engine.flush_tiers(10)
    assert disk.stats()["dropped_writes"] == 0 and disk.stats()["writes"] == 12
    engine.close()
