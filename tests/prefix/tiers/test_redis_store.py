"""L3 Redis store: a real server for the semantics, dead and hung servers for the failures.

Tests marked ``redis`` use the server on 127.0.0.1:6379 (db 0) under a fresh
namespace (uuid hex) and delete their keys afterwards. A refused port and a
server that accepts but never answers must both cost at most about one
``timeout_s``; the circuit breaker must keep later calls off the network.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from prefix.errors import TierUnavailableError
from prefix.tiers.kv_record import BlockStore
from prefix.tiers.redis_store import RedisBlockStore

URL = "redis://127.0.0.1:6379/0"
TIMEOUT = 0.3
KEYS = [bytes([i]) * 32 for i in range(4)]


class CountingRedis(redis.Redis):
    """A real client that records every command and can pretend the server is down."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []
        self.down = False

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.commands.append(str(args[0]))
        if self.down:
            raise redis.exceptions.ConnectionError("pretend the server is down")
        return super().execute_command(*args, **options)


@pytest.fixture
def namespace() -> Iterator[str]:
    ns = uuid.uuid4().hex
    yield ns
    client = redis.Redis.from_url(URL)
    names = list(client.scan_iter(match=f"cachegate:kv:{ns}:*"))
    if names:
        client.delete(*names)
    client.close()


@pytest.fixture
def counting() -> Iterator[CountingRedis]:
    client = CountingRedis(host="127.0.0.1", port=6379, db=0, socket_timeout=TIMEOUT)
    yield client
    client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: connecting to it is refused


@pytest.mark.redis
def test_put_get_many_contains_discard_ttl(namespace: str, counting: CountingRedis) -> None:
    store = RedisBlockStore(URL, namespace=namespace, ttl_seconds=120, client=counting)
    assert isinstance(store, BlockStore) and store.name == "l3_redis"
    assert store.get(KEYS[0]) is None and not store.contains(KEYS[0])
    store.put(KEYS[0], b"record-0")
    store.put(KEYS[2], b"record-2")
    assert store.get(KEYS[0]) == b"record-0"
    counting.commands.clear()
    assert store.get_many(KEYS) == [b"record-0", None, b"record-2", None]
    assert counting.commands == ["MGET"]  # one round trip for the whole batch
    assert store.get_many([]) == [] and counting.commands == ["MGET"]
    assert store.contains(KEYS[2])
    ttl = counting.ttl(store.redis_key(KEYS[0]))
    assert 0 < ttl <= 120
    assert store.discard(KEYS[2]) and not store.discard(KEYS[2])
    assert store.get(KEYS[2]) is None
    stats = store.stats()
    assert stats["num_blocks"] == -1 and stats["used_bytes"] == -1
    assert stats["hits"] == 3 and stats["puts"] == 2 and stats["errors"] == 0
    store.close()
    assert counting.ping()  # a client handed in is not closed by the store


@pytest.mark.redis
def test_namespaces_are_independent(namespace: str) -> None:
    other = uuid.uuid4().hex
    a = RedisBlockStore(URL, namespace=namespace)
    b = RedisBlockStore(URL, namespace=other)
    try:
        a.put(KEYS[0], b"from-a")
        assert b.get(KEYS[0]) is None and not b.contains(KEYS[0])
        b.put(KEYS[0], b"from-b")
        assert a.get(KEYS[0]) == b"from-a" and b.get(KEYS[0]) == b"from-b"
        assert a.redis_key(KEYS[0]) == f"cachegate:kv:{namespace}:{KEYS[0].hex()}"
    finally:
        b.discard(KEYS[0])
        a.close()
        b.close()


def test_a_dead_server_fails_every_call_fast() -> None:
    start = time.monotonic()
    store = RedisBlockStore(
        f"redis://127.0.0.1:{free_port()}/0",
        namespace="deadbeef",
        timeout_s=TIMEOUT,
        retry_after_s=0.0,  # no breaker: every call reaches the (refused) network
    )
    calls = [
        lambda: store.get(KEYS[0]),
        lambda: store.get_many(KEYS),
        lambda: store.put(KEYS[0], b"x"),
        lambda: store.contains(KEYS[0]),
        lambda: store.discard(KEYS[0]),
    ]
    for call in calls:
        began = time.monotonic()
        with pytest.raises(TierUnavailableError) as info:
            call()
        assert time.monotonic() - began < 2 * TIMEOUT
        assert isinstance(info.value.__cause__, redis.exceptions.ConnectionError)
    assert store.stats()["errors"] == 5
    assert time.monotonic() - start < 5 * 2 * TIMEOUT
    store.close()


@pytest.fixture
def hung_server() -> Iterator[int]:
    """Accepts connections and never answers; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_a_hung_server_costs_about_one_timeout(hung_server: int) -> None:
    # A longer timeout than the others here: a full run on 2 busy cores once took 1.2 s
    # for one 0.3 s timeout, while what this guards against (a retry: a second wait) is
    # a whole timeout more, so the bound stays below two.
    timeout = 1.0
    store = RedisBlockStore(
        f"redis://127.0.0.1:{hung_server}/0", namespace="deadbeef", timeout_s=timeout
    )
    began = time.monotonic()
    with pytest.raises(TierUnavailableError):
        store.get(KEYS[0])
    elapsed = time.monotonic() - began
    assert 0.8 * timeout <= elapsed < 1.9 * timeout
    began = time.monotonic()
    with pytest.raises(TierUnavailableError, match="next try"):
        store.get_many(KEYS)  # the breaker is open: no second wait
    assert time.monotonic() - began < 0.05
    store.close()


@pytest.mark.redis
def test_circuit_breaker_skips_the_network_then_probes(
    namespace: str, counting: CountingRedis
) -> None:
    now = [100.0]
    store = RedisBlockStore(
        URL, namespace=namespace, client=counting, retry_after_s=1.0, clock=lambda: now[0]
    )
    store.put(KEYS[0], b"record")
    counting.down = True
    counting.commands.clear()
    with pytest.raises(TierUnavailableError):
        store.get(KEYS[0])
    assert len(counting.commands) == 1 and store.stats()["breaker_open"] == 1
    now[0] += 0.5
    for call in (lambda: store.get(KEYS[0]), lambda: store.put(KEYS[1], b"x")):
        with pytest.raises(TierUnavailableError, match="next try"):
            call()
    assert len(counting.commands) == 1  # nothing reached the client
    now[0] += 0.6  # window over: a probe on its own thread; the caller fails fast
    with pytest.raises(TierUnavailableError, match="probing"):
        store.get(KEYS[0])
    store.join_probe(5)
    assert counting.commands[1:] == ["PING"]  # still down: the breaker opens again
    with pytest.raises(TierUnavailableError, match="next try"):
        store.get(KEYS[0])
    counting.down = False
    now[0] += 1.0  # a second failure in a row: the wait doubled to 2 s
    with pytest.raises(TierUnavailableError, match="next try"):
        store.get(KEYS[0])
    now[0] += 1.0
    with pytest.raises(TierUnavailableError, match="probing"):
        store.get(KEYS[0])
    store.join_probe(5)  # the probe succeeds and closes the breaker
    assert store.get(KEYS[0]) == b"record"
    assert counting.commands[1:-1] == ["PING", "PING"]
    stats = store.stats()
    assert stats["breaker_open"] == 0 and stats["errors"] == 2 and stats["skipped"] == 6


@pytest.mark.redis
def test_the_breaker_waits_longer_while_probes_fail_and_resets_on_success(
    namespace: str, counting: CountingRedis
) -> None:
    now = [100.0]
    store = RedisBlockStore(
        URL, namespace=namespace, client=counting, retry_after_s=1.0, clock=lambda: now[0]
    )
    counting.down = True
    with pytest.raises(TierUnavailableError, match="pretend"):
        store.get(KEYS[0])  # the first failure opens the breaker
    waits = []
    for _ in range(6):
        start = now[0]
        while True:
            now[0] += 0.5
            with pytest.raises(TierUnavailableError) as info:
                store.get(KEYS[0])
            if "probing" in str(info.value):
                store.join_probe(5)
                break  # a probe reached the client, and failed
        waits.append(now[0] - start)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]  # doubled, capped
    counting.down = False
    now[0] += 30.0
    with pytest.raises(TierUnavailableError, match="probing"):
        store.get(KEYS[0])
    store.join_probe(5)
    assert store.get(KEYS[0]) is None  # a success: the next failure waits 1 s again
    counting.down = True
    with pytest.raises(TierUnavailableError, match="pretend"):
        store.get(KEYS[0])
    now[0] += 1.0
    with pytest.raises(TierUnavailableError, match="probing"):
        store.get(KEYS[0])  # probed after 1 s, not 30


def test_against_a_hung_server_no_caller_waits_for_a_probe(hung_server: int) -> None:
    """The probe is a PING on its own thread: against a Redis that hangs, only the first
    failure costs a caller (an engine read, under the engine lock) its timeout."""
    store = RedisBlockStore(
        f"redis://127.0.0.1:{hung_server}/0",
        namespace="deadbeef",
        timeout_s=0.5,
        retry_after_s=0.05,  # short waits: most calls below come after one
    )
    with pytest.raises(TierUnavailableError):
        store.get(KEYS[0])  # the first failure: one timeout
    slowest, probed = 0.0, 0
    for _ in range(30):
        time.sleep(0.06)
        began = time.monotonic()
        with pytest.raises(TierUnavailableError, match=r"probing|next try") as info:
            store.get_many(KEYS)
        slowest = max(slowest, time.monotonic() - began)
        probed += "probing" in str(info.value)
    assert slowest < 0.1  # before: a call after each wait was the probe, 0.5 s
    assert probed >= 2
    store.join_probe(5)
    assert store.stats()["errors"] >= 2  # probes did reach the server, and failed
    store.close()


def test_bad_arguments() -> None:
    for kwargs in ({"ttl_seconds": 0}, {"timeout_s": 0.0}, {"retry_after_s": -1.0}):
        with pytest.raises(ValueError):
            RedisBlockStore(URL, namespace="deadbeef", **kwargs)
    for namespace in ("", "dead", "DEADBEEF", "dead:beef", "*" * 8):
        with pytest.raises(ValueError):
            RedisBlockStore(URL, namespace=namespace)
    with pytest.raises(ValueError):
        RedisBlockStore(URL, namespace="deadbeef").get(b"")


@pytest.mark.redis
def test_a_call_started_before_a_failure_does_not_close_the_breaker(
    namespace: str, counting: CountingRedis
) -> None:
    """A slow call that succeeds after another call failed says nothing about now."""
    store = RedisBlockStore(URL, namespace=namespace, client=counting, retry_after_s=60.0)
    store.put(KEYS[0], b"record")
    started = threading.Event()
    release = threading.Event()

    def slow_success() -> list[bytes | None]:
        started.set()
        release.wait(5)
        return [b"record"]

    result: list[Any] = []
    t = threading.Thread(target=lambda: result.append(store._call("get", slow_success)))
    t.start()
    assert started.wait(5)
    counting.down = True
    with pytest.raises(TierUnavailableError):
        store.get(KEYS[0])  # fails while the slow call is in flight: breaker opens
    release.set()
    t.join(5)
    assert result == [[b"record"]]
    counting.commands.clear()
    with pytest.raises(TierUnavailableError, match="next try"):
        store.get(KEYS[0])  # still open: the older success did not close it
    assert counting.commands == []


@pytest.mark.redis
def test_a_read_hit_refreshes_the_ttl(namespace: str) -> None:
    store = RedisBlockStore(URL, namespace=namespace, ttl_seconds=300)
    client = redis.Redis.from_url(URL)
    store.put(KEYS[0], b"record")
    client.expire(store.redis_key(KEYS[0]), 5)  # about to expire
    assert store.get_many([KEYS[0], KEYS[1]]) == [b"record", None]
    assert client.ttl(store.redis_key(KEYS[0])) > 250  # a hot block stays
    assert client.ttl(store.redis_key(KEYS[1])) == -2  # a miss creates nothing
    client.close()
    store.close()
