"""L3 tiers through the engine: restart from disk or Redis, sharing between engines,
lookup order L1 → L2 → L3, tenant isolation in every tier, corrupt blocks, faults.

Every reuse is checked against a plain full forward (an engine with prefix
caching off). Each test uses its own server salt, so its keys (and the HMAC of
its records) never meet another test's in the shared Redis.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
import torch

from prefix.config import EngineConfig
from prefix.errors import EngineConfigError
from prefix.model.loader import LoadedModel
from prefix.model.sampling import SamplingParams
from prefix.model.tokenize import PromptEncoder
from prefix.serve.engine import PrefixEngine
from prefix.serve.metrics import EngineMetrics
from prefix.tiers.disk_store import DiskBlockStore
from prefix.tiers.kv_record import BlockLayout
from prefix.tiers.l3 import L3Tier
from tests.gateway.failure_peers import RawUpstream, closed_port

ATOL = 1e-4
BLOCK = 4
REDIS_URL = "redis://127.0.0.1:6379/0"


def tokens(n: int, seed: int = 0, vocab: int = 128) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=gen).tolist()


A = tokens(13, seed=1)  # 3 full blocks + 1 token: 3 reusable blocks


def make(loaded: LoadedModel, salt: str, **kw: Any) -> PrefixEngine:
    cfg: dict[str, Any] = {"block_size": BLOCK, "num_blocks": 8, "server_salt": salt} | kw
    return PrefixEngine(EngineConfig(**cfg), loaded=loaded)


def tier(engine: PrefixEngine, name: str) -> L3Tier:
    assert engine.tiers is not None
    found = [t for t in engine.tiers.l3 if t.name == name]
    assert found, [t.name for t in engine.tiers.l3]
    return found[0]


def keys_of(engine: PrefixEngine, prompt: list[int], namespace: str) -> list[bytes]:
    req = engine.request(prompt, SamplingParams(max_tokens=1), namespace=namespace)
    seq = engine.new_sequence(req)
    seq.extend_keys()
    return seq.block_keys


def block_file(disk: Path, engine: PrefixEngine, key: bytes) -> Path:
    store = tier(engine, "l3_disk").store
    return Path(store.directory) / key.hex()[:2] / f"{key.hex()}.kvb"  # type: ignore[attr-defined]


@pytest.fixture
def salt() -> str:
    return f"l3-test-{uuid.uuid4().hex}"


@pytest.fixture
def plain(tiny_llama: LoadedModel) -> PrefixEngine:
    return PrefixEngine(
        EngineConfig(block_size=BLOCK, num_blocks=64, enable_prefix_caching=False),
        loaded=tiny_llama,
    )


def reference(plain: PrefixEngine, prompt: list[int]) -> torch.Tensor:
    return plain.prefill_logits(prompt, namespace="t")[0]


def compute_and_close(engine: PrefixEngine, prompt: list[int], namespace: str) -> None:
    _, cached = engine.prefill_logits(prompt, namespace=namespace)
    assert cached == 0
    assert engine.flush_tiers(10)
    engine.close()


def store_config(store: str, tmp_path: Path) -> dict[str, Any]:
    if store == "disk":
        return {"kv_disk_path": str(tmp_path)}
    return {"kv_redis_url": REDIS_URL, "kv_redis_ttl_seconds": 120}


@pytest.mark.parametrize("store", ["disk", "redis"])
def test_restart_serves_prefix_from_l3(
    tiny_llama: LoadedModel, plain: PrefixEngine, salt: str, tmp_path: Path, store: str
) -> None:
    cfg = store_config(store, tmp_path)
    compute_and_close(make(tiny_llama, salt, **cfg), A, "t")
    restarted = make(tiny_llama, salt, **cfg)  # a fresh pool: L1 is empty
    logits, cached = restarted.prefill_logits(A, namespace="t")
    restarted.pool.check_integrity()
    assert cached == 12  # all 3 reusable blocks came from L3, none recomputed
    torch.testing.assert_close(logits, reference(plain, A), atol=ATOL, rtol=0)
    stats = tier(restarted, f"l3_{store}").stats()
    assert stats["hits"] == 3 and stats["corrupt"] == 0
    assert stats["bytes_out"] == 3 * restarted.kv_cache.kv[:, :, 0].numel() * 4
    text = EngineMetrics(restarted).render().decode()
    assert f'prefix_tier_hits_total{{tier="l3_{store}"}} 3.0' in text
    restarted.close()


@pytest.mark.parametrize("store", ["disk", "redis"])
def test_l3_isolates_tenants(
    tiny_llama: LoadedModel, plain: PrefixEngine, salt: str, tmp_path: Path, store: str
) -> None:
    cfg = store_config(store, tmp_path)
    compute_and_close(make(tiny_llama, salt, **cfg), A, "tenant-a")
    restarted = make(tiny_llama, salt, **cfg)
    logits, cached = restarted.prefill_logits(A, namespace="tenant-b")
    assert cached == 0  # negative: another tenant's identical prompt finds nothing
    torch.testing.assert_close(logits, reference(plain, A), atol=ATOL, rtol=0)
    restarted.close()
    again = make(tiny_llama, salt, **cfg)
    _, cached = again.prefill_logits(A, namespace="tenant-a")
    assert cached == 12  # positive control: the owner hits after the same restart
    again.close()


def test_two_engines_share_blocks_through_redis(
    tiny_llama: LoadedModel, plain: PrefixEngine, salt: str
) -> None:
    cfg = {"kv_redis_url": REDIS_URL, "kv_redis_ttl_seconds": 120}
    first, second = make(tiny_llama, salt, **cfg), make(tiny_llama, salt, **cfg)
    _, cached = first.prefill_logits(A, namespace="t")
    assert cached == 0
    assert first.flush_tiers(10)
    logits, cached = second.prefill_logits(A, namespace="t")
    assert cached == 12  # computed by the first engine, reused by the second
    torch.testing.assert_close(logits, reference(plain, A), atol=ATOL, rtol=0)
    assert tier(second, "l3_redis").hits == 3
    # another server salt is another deployment: nothing is shared with it
    stranger = make(tiny_llama, salt + "-other", **cfg)
    assert stranger.prefill_logits(A, namespace="t")[1] == 0
    for engine in (first, second, stranger):
        engine.close()


def test_lookup_order_l1_l2_l3(
    tiny_llama: LoadedModel, plain: PrefixEngine, salt: str, tmp_path: Path
) -> None:
    engine = make(tiny_llama, salt, host_tier_bytes=1 << 20, kv_disk_path=str(tmp_path))
    assert engine.tiers is not None and engine.host_tier is not None
    engine.prefill_logits(A, namespace="t")
    assert engine.flush_tiers(10)
    for i in range(3):  # push A out of L1 into L2
        engine.prefill_logits(tokens(13, seed=100 + i), namespace="other")
    a_keys = keys_of(engine, A, "t")[:3]
    assert all(engine.pool.lookup(k) is None for k in a_keys)
    assert engine.host_tier.discard(a_keys[2])  # block 2 only on disk now
    disk = tier(engine, "l3_disk")
    l2_hits, disk_hits = engine.host_tier.hits, disk.hits
    logits, cached = engine.prefill_logits(A, namespace="t")
    engine.pool.check_integrity()
    assert cached == 12
    assert engine.host_tier.hits - l2_hits == 2  # blocks 0, 1 from L2
    assert disk.hits - disk_hits == 1  # block 2 from disk
    torch.testing.assert_close(logits, reference(plain, A), atol=ATOL, rtol=0)
    engine.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "other_key"])
def test_corrupt_disk_block_is_a_miss(
    tiny_llama: LoadedModel, plain: PrefixEngine, salt: str, tmp_path: Path, damage: str
) -> None:
    cfg = {"kv_disk_path": str(tmp_path)}
    first = make(tiny_llama, salt, **cfg)
    compute_and_close(first, A, "t")
    engine = make(tiny_llama, salt, **cfg)
    a_keys = keys_of(engine, A, "t")
    path = block_file(tmp_path, engine, a_keys[1])
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01  # one bit of one KV value
    elif damage == "truncate":
        data = data[: len(data) - 100]
    else:  # a valid record of another block, renamed to this key's file
        data = bytearray(block_file(tmp_path, engine, a_keys[0]).read_bytes())
    path.write_bytes(bytes(data))
    logits, cached = engine.prefill_logits(A, namespace="t")
    assert cached == 4  # block 0 reused; the chain stops at the damaged block 1
    torch.testing.assert_close(logits, reference(plain, A), atol=ATOL, rtol=0)
    disk = tier(engine, "l3_disk")
    assert disk.corrupt == 1
    assert engine.flush_tiers(10)  # the recomputed blocks were written again
    engine.close()
    repaired = make(tiny_llama, salt, **cfg)
    assert repaired.prefill_logits(A, namespace="t")[1] == 12
    repaired.close()


def test_redis_down_requests_still_succeed(
    tiny_llama: LoadedModel, plain: PrefixEngine, salt: str
) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    engine = make(tiny_llama, salt, kv_redis_url=url, kv_tier_timeout_s=0.2)
    logits, cached = engine.prefill_logits(A, namespace="t")
    assert cached == 0
    torch.testing.assert_close(logits, reference(plain, A), atol=ATOL, rtol=0)
    engine.flush_tiers(10)
    stats = tier(engine, "l3_redis").stats()
    assert stats["hits"] == 0 and stats["write_errors"] + stats["dropped_writes"] > 0
    engine.close()


def test_redis_slow_is_bounded_and_never_delays_writes(
    tiny_llama: LoadedModel, plain: PrefixEngine, salt: str
) -> None:
    with RawUpstream("silent") as silent:  # accepts connections, never answers
        engine = make(
            tiny_llama,
            salt,
            kv_redis_url=f"redis://127.0.0.1:{silent.port}/0",
            kv_tier_timeout_s=0.3,
            kv_tier_write_buffer_bytes=1,  # room for one block
        )
        push = tokens(13, seed=7)
        engine.prefill_logits(push, namespace="t")  # its 3 writes hang in the writer
        start = time.perf_counter()
        logits, cached = engine.prefill_logits(A, namespace="t")
        elapsed = time.perf_counter() - start
        assert cached == 0
        torch.testing.assert_close(logits, reference(plain, A), atol=ATOL, rtol=0)
        # one bounded read (0.3 s) at most; writes fail fast behind the breaker or drop
        assert elapsed < 2.0, elapsed
        stats = tier(engine, "l3_redis").stats()
        assert stats["errors"] >= 1 and stats["write_errors"] + stats["dropped_writes"] >= 1
        engine.close()


def test_real_model_restart_from_disk(smol_loaded: LoadedModel, tmp_path: Path) -> None:
    cfg: dict[str, Any] = {"block_size": 16, "num_blocks": 32, "kv_disk_path": str(tmp_path)}
    prompt = PromptEncoder(smol_loaded.tokenizer).encode(
        "You are a careful assistant for a bank. Answer in one sentence. " * 4
    )
    salt = f"smol-{uuid.uuid4().hex}"
    first = PrefixEngine(EngineConfig(server_salt=salt, **cfg), loaded=smol_loaded)
    compute_and_close(first, prompt, "t")
    restarted = PrefixEngine(EngineConfig(server_salt=salt, **cfg), loaded=smol_loaded)
    logits, cached = restarted.prefill_logits(prompt, namespace="t")
    assert cached == (len(prompt) - 1) // 16 * 16 and cached > 0
    full = PrefixEngine(
        EngineConfig(block_size=16, num_blocks=32, enable_prefix_caching=False), loaded=smol_loaded
    )
    torch.testing.assert_close(logits, full.prefill_logits(prompt)[0], atol=ATOL, rtol=0)
    restarted.close()


def test_redis_records_carry_a_ttl(tiny_llama: LoadedModel, salt: str) -> None:
    engine = make(tiny_llama, salt, kv_redis_url=REDIS_URL, kv_redis_ttl_seconds=120)
    engine.prefill_logits(A, namespace="t")
    assert engine.flush_tiers(10)
    store = tier(engine, "l3_redis").store
    client = redis.Redis.from_url(REDIS_URL)
    for key in keys_of(engine, A, "t")[:3]:
        assert 0 < client.ttl(store.redis_key(key)) <= 120  # type: ignore[attr-defined]
    engine.close()


class GatedDiskStore(DiskBlockStore):
    """A real disk store whose writes wait for a gate: a store slower than the engine."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, 1 << 30, namespace="0123456789abcdef")
        self.gate = threading.Event()

    def put(self, key: bytes, record: bytes) -> None:
        self.gate.wait(10)
        super().put(key, record)


def test_slow_store_never_blocks_the_engine(tiny_llama: LoadedModel, tmp_path: Path) -> None:
    engine = make(tiny_llama, "gated")
    shape = tuple(engine.kv_cache.kv[:, :, 0].shape)
    store = GatedDiskStore(tmp_path)
    l3 = L3Tier(
        store,
        fingerprint=b"f" * 32,
        layout=BlockLayout("float32", shape),
        dtype=torch.float32,
        write_queue=2,
    )
    blocks = [torch.full(shape, float(i)) for i in range(5)]
    start = time.perf_counter()
    queued = [l3.put_async(bytes([i]) * 32, b) for i, b in enumerate(blocks)]
    assert time.perf_counter() - start < 1.0  # the engine thread never waits on the store
    # one block is in the writer's hands, two wait in the queue, the rest are dropped
    assert queued.count(True) in (2, 3) and l3.stats()["dropped_writes"] == queued.count(False)
    blocks[0].fill_(-1.0)  # the engine reuses its block at once: the copy was taken
    store.gate.set()
    assert l3.flush(10)
    records = l3.fetch([bytes([0]) * 32])
    out = torch.empty(shape)
    assert l3.load(bytes([0]) * 32, records[0], out)
    assert torch.equal(out, torch.zeros(shape))
    assert l3.stats()["writes"] == queued.count(True)
    l3.close()


def test_an_l3_tier_needs_a_server_salt(tiny_llama: LoadedModel, tmp_path: Path) -> None:
    # without a salt the record HMAC has no secret: anyone able to write could plant KV
    for store in ({"kv_disk_path": str(tmp_path)}, {"kv_redis_url": REDIS_URL}):
        with pytest.raises(EngineConfigError, match="server_salt"):
            EngineConfig(**store)  # type: ignore[arg-type]
    EngineConfig(server_salt="s", kv_disk_path=str(tmp_path))  # positive control


def test_a_disk_tier_must_hold_blocks(tiny_llama: LoadedModel, salt: str, tmp_path: Path) -> None:
    with pytest.raises(EngineConfigError, match="at least two blocks"):
        make(tiny_llama, salt, kv_disk_path=str(tmp_path), kv_disk_bytes=1000)
    make(tiny_llama, salt, kv_disk_path=str(tmp_path), kv_disk_bytes=1 << 20).close()


class BrokenDiskStore(DiskBlockStore):
    """A real disk store whose writes hit an unexpected bug."""

    def put(self, key: bytes, record: bytes) -> None:
        raise RuntimeError("a bug in a store")


def test_an_unexpected_write_error_neither_kills_the_writer_nor_hangs_close(
    tiny_llama: LoadedModel, tmp_path: Path
) -> None:
    shape = (2, 2, 4, 2, 8)
    l3 = L3Tier(
        BrokenDiskStore(tmp_path, 1 << 20, namespace="0123456789abcdef"),
        fingerprint=b"f" * 32,
        layout=BlockLayout("float32", shape),
        dtype=torch.float32,
        write_queue=2,
    )
    for i in range(4):
        l3.put_async(bytes([i]) * 32, torch.zeros(shape))
        assert l3.flush(5)  # the writer survived the previous error
    assert l3.stats()["write_errors"] == 4 and l3._writer.is_alive()
    start = time.perf_counter()
    l3.close()
    assert time.perf_counter() - start < 5
    assert not l3.put_async(b"k" * 32, torch.zeros(shape))  # closed: dropped, not queued


class SlowDiskStore(DiskBlockStore):
    """A real disk store answering its first batch quickly, then slower than the budget."""

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        self.calls = getattr(self, "calls", 0) + 1
        time.sleep(0.05 if self.calls == 1 else 2.0)
        return super().get_many(keys)


def test_one_admission_reads_l3_for_a_bounded_time(
    tiny_llama: LoadedModel, plain: PrefixEngine, salt: str, tmp_path: Path
) -> None:
    cfg = {"kv_disk_path": str(tmp_path), "num_blocks": 64, "kv_tier_timeout_s": 0.1}
    long = tokens(81, seed=3)  # 20 reusable blocks of 4: two read batches of 16
    compute_and_close(make(tiny_llama, salt, **cfg), long, "t")
    engine = make(tiny_llama, salt, **cfg)
    disk = tier(engine, "l3_disk")
    disk.store = SlowDiskStore(tmp_path, 1 << 30, namespace=disk.store.namespace)  # type: ignore[attr-defined]
    start = time.perf_counter()
    logits, cached = engine.prefill_logits(long, namespace="t")
    elapsed = time.perf_counter() - start
    # the first batch came back inside the 0.4 s budget; the second was cut at its end
    assert cached == 16 * BLOCK, cached
    assert elapsed < 1.5, elapsed
    assert engine.tiers is not None and engine.tiers.num_budget_exhausted == 1
    assert disk.stats()["errors"] == 1
    torch.testing.assert_close(logits, reference(plain, long), atol=ATOL, rtol=0)
    engine.close()
