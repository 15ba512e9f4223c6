"""L3 Redis store: KV block records shared by every replica, expiring after a TTL.

Key names are ``cachegate:kv:<namespace>:<key hex>`` (the namespace is a digest
of the model fingerprint); a put is ``SET … EX ttl`` and a batch read is one
``MGET``, so an admission walk costs one round trip however many blocks it asks
for. Redis is an optimization, never a dependency: construction does not
connect, so the engine starts with Redis down, and every failure (refused,
reset, timed out, error reply, malformed reply) becomes ``TierUnavailableError``,
which the engine treats as a miss or a dropped write.

The client does no retries of its own and every socket operation is bounded by
``timeout_s``, so a dead or hung server costs one timeout, not a stall. After a
failure a small circuit breaker fails calls at once for ``retry_after_s`` (doubled
with each failed probe in a row, up to 30 s) without touching the network; the first
call after that starts a probe (a ``PING`` on a thread of its own) and fails fast
like the others, and the probe's success closes the breaker again. (Until session 38
that call was the probe: an engine read, under the engine lock, which against a Redis
that hangs cost a whole timeout every 30 s.) An error reply (a write refused under
``maxmemory`` noeviction, READONLY on a replica) does not open it: the server is
answering, and reads it serves must not be skipped. ``retry_after_s=0``: no breaker.

How many blocks and bytes are ours is unknown (the server is shared and keys
expire), so ``stats`` reports -1 for both.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from prefix.errors import TierUnavailableError
from prefix.tiers.kv_record import check_namespace

__all__ = ["RedisBlockStore"]

T = TypeVar("T")

#: The longest the breaker stays open while probes go on failing.
MAX_RETRY_AFTER_S = 30.0


class RedisBlockStore:
    name = "l3_redis"

    def __init__(
        self,
        url: str,
        *,
        namespace: str,
        ttl_seconds: int = 86400,
        timeout_s: float = 0.5,
        client: redis.Redis | None = None,
        retry_after_s: float = 1.0,
        health_check_interval_s: int = 30,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int) or ttl_seconds < 1:
            raise ValueError(f"ttl_seconds must be an int >= 1, got {ttl_seconds!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if not retry_after_s >= 0:
            raise ValueError(f"retry_after_s must be >= 0, got {retry_after_s!r}")
        self.namespace = check_namespace(namespace)
        self.prefix = f"cachegate:kv:{namespace}:"
        self.ttl_seconds = ttl_seconds
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self._clock = clock
        self._owns_client = client is None
        # from_url only parses the URL: nothing connects before the first command.
        self.client: redis.Redis = client or redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            health_check_interval=health_check_interval_s,
            retry=Retry(NoBackoff(), 0),
        )
        self._lock = threading.Lock()
        self._open_until: float | None = None  # breaker: None = closed
        self._probe: threading.Thread | None = None  # the PING in flight while open
        self._failures = 0  # failed calls so far: a generation for the breaker
        self._in_a_row = 0  # failures since the last success: the breaker's wait doubles
        self.hits = self.misses = self.puts = 0
        self.bytes_read = self.bytes_written = 0
        self.errors = self.skipped = 0
        self.rejected = 0  # error replies: the server is up, the breaker stays closed

    def redis_key(self, key: bytes) -> str:
        if not isinstance(key, bytes) or not key:
            raise ValueError(f"block key must be non-empty bytes, got {key!r}")
        return self.prefix + key.hex()

    # ---- the one way to reach the server -----------------------------------
    def _call(self, what: str, fn: Callable[[], T]) -> T:
        with self._lock:
            generation = self._failures  # a success closes the breaker only if nothing
            if self._open_until is not None and self.retry_after_s > 0:  # 0: no breaker
                now = self._clock()
                self.skipped += 1
                if now < self._open_until:
                    raise TierUnavailableError(
                        f"redis store {what}: down, next try in {self._open_until - now:.2f}s"
                    )
                if self._probe is None:  # the wait is over: a PING, off this caller
                    self._probe = threading.Thread(
                        target=self._run_probe, args=(generation,), daemon=True
                    )
                    self._probe.start()
                raise TierUnavailableError(f"redis store {what}: down, probing")
        try:
            result = fn()
        except Exception as exc:  # anything at all: Redis must never take the engine down
            # An error reply (OOM under noeviction, READONLY on a replica) means the
            # server is up and only refused this command: reads it would serve must not
            # be skipped for it. Everything else (refused, reset, timed out, a reply we
            # cannot use, a client bug) opens the breaker.
            answered = isinstance(exc, redis.exceptions.ResponseError)
            with self._lock:
                self.errors += 1
                if answered:
                    self.rejected += 1
                    if self._failures == generation:
                        self._open_until = None
                else:
                    self._failures += 1
                    self._in_a_row += 1
                    self._open_until = self._clock() + self._wait()
            raise TierUnavailableError(f"redis store {what}: {type(exc).__name__}: {exc}") from exc
        with self._lock:
            if self._failures == generation:
                self._open_until = None
                self._in_a_row = 0
        return result

    def _run_probe(self, generation: int) -> None:
        try:
            self.client.ping()
            answered = True
        except redis.exceptions.ResponseError:
            answered = True  # an error reply: the server is up
        except Exception:  # anything at all, as in _call
            answered = False
        with self._lock:
            self._probe = None
            if not answered:
                self.errors += 1
                self._failures += 1
                self._in_a_row += 1
                self._open_until = self._clock() + self._wait()
            elif self._failures == generation:  # nothing failed meanwhile
                self._open_until = None
                self._in_a_row = 0

    def join_probe(self, timeout: float | None = None) -> None:
        """Wait for the probe in flight, if any (tests; a clean shutdown)."""
        probe = self._probe
        if probe is not None:
            probe.join(timeout)

    def _wait(self) -> float:
        """How long the breaker stays open after ``_in_a_row`` failures: ``retry_after_s``,
        doubled with each failed probe, at most :data:`MAX_RETRY_AFTER_S` (a probe is a
        thread and a connection a time; while it lasts no other starts)."""
        return float(min(self.retry_after_s * 2 ** min(self._in_a_row - 1, 8), MAX_RETRY_AFTER_S))

    def interrupt(self) -> None:
        """Abort every command in flight (the engine stopped waiting for a read): closing
        the sockets wakes a reader the server keeps busy with a slow, steady reply."""
        with self._lock:
            self._failures += 1
            self._in_a_row += 1
            self._open_until = self._clock() + self._wait()
        self.client.connection_pool.disconnect()

    # ---- store -------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        names = [self.redis_key(key) for key in keys]
        out = self._call("get", lambda: self._mget(names))
        hit_names = [name for name, v in zip(names, out, strict=True) if v is not None]
        if hit_names:  # a hot prefix must not expire while it is being read
            with contextlib.suppress(TierUnavailableError):  # the records are read already
                self._call("touch", lambda: self._touch(hit_names))
        with self._lock:
            found = [len(v) for v in out if v is not None]
            self.hits += len(found)
            self.misses += len(out) - len(found)
            self.bytes_read += sum(found)
        return out

    def _mget(self, names: list[str]) -> list[bytes | None]:
        values: Any = self.client.mget(names)
        # A proxy or a server that only looks like Redis may answer with another shape;
        # trusting it would misalign records with keys or allocate what an integer says.
        if not isinstance(values, list) or len(values) != len(names):
            got = len(values) if isinstance(values, list) else type(values).__name__
            raise redis.exceptions.InvalidResponse(f"MGET of {len(names)} keys answered {got}")
        for v in values:
            if v is not None and not isinstance(v, bytes):
                raise redis.exceptions.InvalidResponse(f"MGET answered a {type(v).__name__}")
        return values

    def _touch(self, names: list[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.expire(name, self.ttl_seconds)
        pipe.execute()

    def touch(self, keys: Sequence[bytes]) -> None:
        """Keys served from a level above (L1, L2): their TTL starts again, so a prefix
        hot in the pool does not expire here first."""
        if keys:
            names = [self.redis_key(key) for key in keys]
            self._call("touch", lambda: self._touch(names))

    def put(self, key: bytes, record: bytes) -> None:
        name = self.redis_key(key)
        self._call("put", lambda: self.client.set(name, record, ex=self.ttl_seconds))
        with self._lock:
            self.puts += 1
            self.bytes_written += len(record)

    def contains(self, key: bytes) -> bool:
        name = self.redis_key(key)
        return bool(self._call("contains", lambda: self.client.exists(name)))

    def discard(self, key: bytes) -> bool:
        name = self.redis_key(key)
        return bool(self._call("discard", lambda: self.client.delete(name)))

    # ---- metrics -----------------------------------------------------------
    def stats(self) -> dict[str, int | float]:
        with self._lock:
            lookups = self.hits + self.misses
            return {
                "num_blocks": -1,
                "used_bytes": -1,
                "hits": self.hits,
                "misses": self.misses,
                "hit_rate": self.hits / lookups if lookups else 0.0,
                "puts": self.puts,
                "bytes_read": self.bytes_read,
                "bytes_written": self.bytes_written,
                "errors": self.errors,
                "skipped": self.skipped,
                "rejected": self.rejected,
                "breaker_open": int(self._open_until is not None),
            }

    def close(self) -> None:
        """Close the connection pool, unless the client was handed in (its owner closes it)."""
        if self._owns_client:
            self.client.close()

    def __repr__(self) -> str:
        return f"RedisBlockStore(namespace={self.namespace!r}, ttl={self.ttl_seconds}s)"
