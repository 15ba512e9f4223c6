"""One L3 block store as the engine sees it: verified reads, asynchronous writes.

The stores (:mod:`prefix.tiers.disk_store`, :mod:`prefix.tiers.redis_store`) move opaque
records; this class turns KV tensors into records and back
(:mod:`prefix.tiers.kv_record`), so every block read is checked against the model
fingerprint, the layout, the key it was asked under and its HMAC before a
single value reaches the KV cache. A record that fails is a miss (and is
deleted, so the next computation rewrites it), never wrong KV.

Writes never delay a request: the engine thread only copies the block to host
memory (the GPU block may be reused by the next step) and enqueues it; a writer
thread encodes and stores it. When the queue is full the block is dropped and
counted; a later computation of the same prefix writes it again. Reads run on
the engine thread's behalf, batched (one round trip per ``READ_BATCH`` keys) and
bounded by what is left of the admission's read budget: a store's own timeout is
per socket operation, so a server that answers slowly but steadily would outlast
it, and the engine thread holds the engine lock while it waits. The read runs on
a reader thread the engine stops waiting for at the deadline (the store is then
interrupted); a store that fails or times out counts as a miss.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import torch

from prefix.errors import CorruptBlockError, ForeignRecordError, TierError
from prefix.tiers.kv_record import BlockLayout, BlockStore, decode_block, encode_block

log = logging.getLogger("cachegate.prefix")

__all__ = ["L3Tier"]

READ_BATCH = 16  # keys fetched per round trip; the chain usually stops well before
TOUCH_EVERY_S = 60.0  # a key served from above is refreshed here at most this often
MAX_TOUCHED = 65_536  # keys whose last touch is remembered (LRU)
TOUCH_QUEUE = 64  # admissions' touches waiting; more are dropped (a refresh, not data)
LOG_EVERY_S = 10.0  # at most one read or write failure warning in this many seconds

Records = list[bytes | None]


class _Reader:
    """One daemon thread running a store's reads, so that the engine can stop waiting.

    A daemon thread, not an executor: a read stuck on a dead disk must not hold up
    interpreter exit. One read at a time; while an abandoned one still runs, later
    reads time out at once instead of queueing behind it.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Records], Future[Records]] | None]
        self._jobs = queue.SimpleQueue()
        self._last: Future[Records] | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def run(self, fn: Callable[[], Records], timeout: float) -> Records:
        """``fn()``'s result or exception; TimeoutError past ``timeout`` seconds."""
        if self._last is not None and not self._last.done():
            raise TimeoutError("the previous read is still running")
        future: Future[Records] = Future()
        self._last = future
        self._jobs.put((fn, future))
        return future.result(timeout)  # concurrent.futures.TimeoutError is TimeoutError

    def stop(self) -> None:
        self._jobs.put(None)

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the waiting engine thread, if any
                future.set_exception(exc)


class L3Tier:
    """Write-through and read-back of KV blocks in one :class:`BlockStore`."""

    def __init__(
        self,
        store: BlockStore,
        *,
        fingerprint: bytes,
        layout: BlockLayout,
        dtype: torch.dtype,
        integrity_key: bytes = b"",
        write_queue: int = 256,
    ) -> None:
        self.store = store
        self.name = store.name
        self.fingerprint = fingerprint
        self.layout = layout
        self.dtype = dtype
        self.integrity_key = integrity_key
        # Bounded in blocks: the caller sizes it from a byte budget (tier_setup.py), since
        # every queued block is a full host copy.
        self._queue: queue.Queue[tuple[bytes, torch.Tensor] | None] = queue.Queue(write_queue)
        # Keys to refresh (touch_async), on a thread and a bound of their own: on the
        # write queue they crowded out the blocks just computed (a review).
        self._touches: queue.Queue[list[bytes] | None] = queue.Queue(TOUCH_QUEUE)
        self._touched: OrderedDict[bytes, float] = OrderedDict()  # key -> when, LRU first
        self._closed = threading.Event()
        self._stats_lock = threading.Lock()
        self.hits = self.misses = self.corrupt = self.errors = self.foreign = 0
        # A store that is down fails every read and write; its breaker makes them fast,
        # and one warning every LOG_EVERY_S says so (one a block flooded the log).
        self._last_warning = float("-inf")
        self._quiet = 0
        self.writes = self.dropped_writes = self.write_errors = 0
        self.bytes_in = self.bytes_out = 0  # into the store / back into the KV cache
        self.seconds = 0.0  # reading, verifying and copying in (engine thread)
        self.write_seconds = 0.0  # encoding and storing (writer thread)
        self._writer = threading.Thread(
            target=self._write_loop, name=f"kv-{self.name}", daemon=True
        )
        self._writer.start()
        self._toucher = threading.Thread(
            target=self._touch_loop, name=f"kv-{self.name}-touch", daemon=True
        )
        self._toucher.start()
        self._reader = _Reader(f"kv-{self.name}-read")

    # ---- write (engine thread enqueues, writer thread stores) ----------------------
    def put_async(self, key: bytes, block: torch.Tensor) -> bool:
        """Queue ``block`` for storage under ``key``; False when the queue is full.

        Only computed blocks come here (blocks loaded from a tier are not written
        back), so a block is rewritten only when its chain broke earlier and it was
        recomputed: rare, harmless, and it repairs a store that lost it.
        """
        if self._closed.is_set() or self._queue.full():  # drop before paying for the copy
            with self._stats_lock:
                self.dropped_writes += 1
            return False
        host = block.to("cpu", copy=True)  # the pool may hand this block to another request
        try:
            self._queue.put_nowait((key, host))
        except queue.Full:
            with self._stats_lock:
                self.dropped_writes += 1
            return False
        return True

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued block is written (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued (up to ``timeout``), stop the writer, close the store.

        Never blocks past the timeout: a writer stuck on a dead store is abandoned
        (it is a daemon thread) and what it still held is lost, as a cache may.
        """
        if self._closed.is_set():  # a second close queued a stop signal for nobody
            return
        self._closed.set()  # later put_async calls drop instead of queueing for nobody
        self.flush(timeout)
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=1.0)  # the writer's stop signal
        self._writer.join(timeout=5.0)
        with contextlib.suppress(queue.Full):
            self._touches.put(None, timeout=1.0)
        self._toucher.join(timeout=5.0)
        self._reader.stop()
        self.store.close()

    def touch_async(self, keys: Sequence[bytes]) -> None:
        """Keys just served from a level above (L1, L2): their copy here is refreshed
        (Redis TTL, disk LRU and file time) on a thread of their own, each key at most every
        TOUCH_EVERY_S. Without it a prefix hot in the pool was written here once, looked
        least recently used, and was the first to go: restarts and failovers lost exactly
        the hottest prefixes (a review, session 41). Dropped when the queue is full."""
        if self._closed.is_set() or getattr(self.store, "touch", None) is None:
            return
        now = time.monotonic()
        due = []
        with self._stats_lock:
            for key in keys:
                last = self._touched.get(key)
                if last is None or now - last >= TOUCH_EVERY_S:
                    self._touched[key] = now
                    self._touched.move_to_end(key)
                    due.append(key)
            while len(self._touched) > MAX_TOUCHED:
                self._touched.popitem(last=False)
        if due:
            with contextlib.suppress(queue.Full):
                self._touches.put_nowait(due)

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._write(*item)
            finally:
                self._queue.task_done()

    def _touch_loop(self) -> None:
        while (keys := self._touches.get()) is not None:
            try:
                self.store.touch(keys)  # type: ignore[attr-defined]
            except TierError as exc:
                self._warn("touch failed", exc)
            except Exception:  # the thread must live on
                log.exception("kv tier %s: unexpected error touching blocks", self.name)

    def _write(self, key: bytes, host: torch.Tensor) -> None:
        start = time.perf_counter()
        try:
            # [L, 2, B, Hkv, D] -> flat bytes, dtype-agnostic (numpy has no bfloat16).
            payload = host.contiguous().view(-1).view(torch.uint8).numpy()
            record = encode_block(
                key,
                self.fingerprint,
                self.layout,
                payload.data,
                integrity_key=self.integrity_key,
            )
            self.store.put(key, record)
        except TierError as exc:
            with self._stats_lock:
                self.write_errors += 1
            self._warn("write failed", exc)
            return
        except Exception:  # a bug or MemoryError must not kill the writer for good
            with self._stats_lock:
                self.write_errors += 1
            log.exception("kv tier %s: unexpected error writing a block", self.name)
            return
        with self._stats_lock:
            self.writes += 1
            self.bytes_in += len(payload)
            self.write_seconds += time.perf_counter() - start

    # ---- read (engine thread) ------------------------------------------------------
    def fetch(self, keys: Sequence[bytes], timeout: float | None = None) -> Records:
        """Raw records of ``keys`` in one round trip; all None when the store fails.

        With a ``timeout`` (what is left of the read budget) the read runs on the
        reader thread; past it the store is interrupted and TimeoutError raised.
        """
        start = time.perf_counter()
        batch = list(keys)
        if self._closed.is_set():  # the reader is stopped: it would wait out the budget
            return [None] * len(batch)
        try:
            if timeout is None:
                records = self.store.get_many(batch)
            else:
                records = self._reader.run(lambda: self.store.get_many(batch), timeout)
        except TierError as exc:
            with self._stats_lock:
                self.errors += 1
                self.seconds += time.perf_counter() - start
            self._warn("read failed, treated as a miss", exc)
            return [None] * len(keys)
        except TimeoutError:
            interrupt = getattr(self.store, "interrupt", None)
            if interrupt is not None:  # stop the abandoned read from holding a connection
                with contextlib.suppress(Exception):
                    interrupt()
            with self._stats_lock:
                self.seconds += time.perf_counter() - start
            raise
        with self._stats_lock:
            self.seconds += time.perf_counter() - start
        return records

    def count_error(self) -> None:
        """A read that was not attempted (the admission's read budget ran out)."""
        with self._stats_lock:
            self.errors += 1

    def load(self, key: bytes, record: bytes | None, dst: torch.Tensor) -> bool:
        """Verify ``record`` (fetched for ``key``) and copy it into ``dst``; False on a miss."""
        if record is None:
            with self._stats_lock:
                self.misses += 1
            return False
        start = time.perf_counter()
        try:
            payload = decode_block(
                record,
                key=key,
                fingerprint=self.fingerprint,
                layout=self.layout,
                integrity_key=self.integrity_key,
            )
        except ForeignRecordError:  # another release's block: its engines still read it
            with self._stats_lock:
                self.foreign += 1
                self.misses += 1
            return False
        except CorruptBlockError as exc:
            log.warning("kv tier %s: dropping a corrupt block: %s", self.name, exc)
            with contextlib.suppress(TierError):  # it stays a miss either way
                self.store.discard(key)
            with self._stats_lock:
                self.corrupt += 1
                self.misses += 1
            return False
        with warnings.catch_warnings():  # read-only buffer: we only read it, into dst
            warnings.simplefilter("ignore", UserWarning)
            flat = torch.frombuffer(payload, dtype=torch.uint8)
        dst.copy_(flat.view(self.dtype).view(dst.shape))  # flat bytes -> [L, 2, B, Hkv, D]
        with self._stats_lock:
            self.hits += 1
            self.bytes_out += len(payload)
            self.seconds += time.perf_counter() - start
        return True

    def _warn(self, what: str, exc: Exception) -> None:
        """One warning every LOG_EVERY_S, with how many were held back since."""
        now = time.monotonic()
        with self._stats_lock:
            if now - self._last_warning < LOG_EVERY_S:
                self._quiet += 1
                return
            quiet, self._quiet, self._last_warning = self._quiet, 0, now
        more = f" ({quiet} more failures in the last {LOG_EVERY_S:g} s)" if quiet else ""
        log.warning("kv tier %s: %s: %s%s", self.name, what, exc, more)

    # ---- metrics ---------------------------------------------------------------------
    def stats(self) -> dict[str, int | float]:
        store = self.store.stats()
        with self._stats_lock:
            lookups = self.hits + self.misses
            return {
                "hits": self.hits,
                "misses": self.misses,
                "hit_rate": self.hits / lookups if lookups else 0.0,
                "corrupt": self.corrupt,
                "foreign": self.foreign,
                "errors": self.errors,
                "writes": self.writes,
                "dropped_writes": self.dropped_writes,
                "write_errors": self.write_errors,
                "queued_writes": self._queue.qsize(),
                "bytes_in": self.bytes_in,
                "bytes_out": self.bytes_out,
                "seconds": self.seconds,
                "write_seconds": self.write_seconds,
                "num_blocks": store.get("num_blocks", -1),
                "used_bytes": store.get("used_bytes", -1),
                "capacity_bytes": store.get("capacity_bytes", -1),
            }
