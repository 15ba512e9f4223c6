"""L3 disk store: one file per KV block record, bounded by bytes, least recently used out first.

Layout: ``root/<namespace>/<hex[:2]>/<hex>.kvb`` where ``hex = key.hex()`` and the
namespace is a digest of the model fingerprint, so two models never share a
directory (and a record that strays anyway fails ``decode_block``'s checks).

Writes are atomic: the record goes to ``.<hex>.<random>.tmp`` in the target
directory and is then ``os.replace``-d onto its name, so readers see the old
file, the new file, or none, never a partial one. Temp files left by a crash are
deleted at start-up. There is no fsync: after a power cut a file may come back
empty or torn, which the record's checksum turns into a miss.

The index (key → size, in LRU order) lives in memory and is rebuilt from the
files at construction (oldest mtime first). It is per process: when several
processes share one directory, an index miss still looks at the disk and adopts
a file that another process wrote, a file that another process evicted is a
miss, and each process enforces the byte bound over the files it knows about.
A start-up in one process deletes every temp file, including one that another
process is writing at that moment; that write is then simply dropped.

Evictions delete their files outside the lock, by path: a put of a key whose old
file is still being deleted waits for that unlink (in one process), so it never
deletes the new record.

Reads do not touch the file's mtime except when it is older than
``touch_interval_s``, so LRU order survives a restart roughly, at little cost.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from prefix.errors import TierUnavailableError
from prefix.tiers.disk_files import GONE, SUFFIX, TMP_SUFFIX, scan, unlink
from prefix.tiers.kv_record import check_namespace

log = logging.getLogger("cachegate.prefix")

__all__ = ["DiskBlockStore"]

_FULL = (errno.ENOSPC, errno.EDQUOT)  # the filesystem (or a quota) has no room left
_EVICT_WAIT_S = 30.0  # a put waits at most this for its key's pending unlink
REGROW_EVERY_S = 30.0  # a lowered capacity looks at the free space at most this often


class DiskBlockStore:
    name = "l3_disk"

    def __init__(
        self,
        root: str | Path,
        capacity_bytes: int,
        *,
        namespace: str,
        touch_interval_s: float = 300.0,
    ) -> None:
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int):
            raise ValueError(f"capacity_bytes must be an int, got {capacity_bytes!r}")
        if capacity_bytes < 1:
            raise ValueError(f"capacity_bytes must be >= 1, got {capacity_bytes}")
        self.namespace = check_namespace(namespace)
        self.capacity_bytes = capacity_bytes
        # What was asked for: a full filesystem lowers capacity_bytes (_shrink_for), and
        # it comes back toward this as room frees up (_regrow; before, a neighbour that
        # filled the volume once left the store at a tenth of its size until restart).
        self.configured_bytes = capacity_bytes
        self._next_regrow = 0.0
        self.touch_interval_s = touch_interval_s
        self.directory = Path(root) / namespace
        self._lock = threading.Lock()
        self._index: OrderedDict[bytes, int] = OrderedDict()  # key -> size, LRU first
        self._used = 0
        # Bytes of puts between their eviction and their rename: counted against the
        # capacity, so two puts at once cannot each make room for only their own record.
        self._reserved = 0
        self._evicting: set[bytes] = set()  # out of the index, file not yet deleted
        self._evicted = threading.Condition(self._lock)  # notified as _evicting shrinks
        self.hits = self.misses = self.puts = self.errors = 0
        self.bytes_read = self.bytes_written = 0
        self.num_evictions = self.num_rejected = 0
        # An unusable directory is a configuration error: the OSError reaches the caller.
        self.directory.mkdir(parents=True, exist_ok=True)
        self._rebuild()

    # ---- index -------------------------------------------------------------
    def _rebuild(self) -> None:
        for key, size in scan(self.directory):
            self._index[key] = size
            self._used += size
        self._unlink_victims(self._evict_to_fit(0))

    def _path(self, key: bytes) -> Path:
        if not isinstance(key, bytes) or not key:
            raise ValueError(f"block key must be non-empty bytes, got {key!r}")
        name = key.hex()
        return self.directory / name[:2] / (name + SUFFIX)

    def _remember(self, key: bytes, size: int, *, use: bool) -> None:
        """Put ``key`` in the index (lock held), as MRU when ``use`` or when new."""
        old = self._index.get(key)
        if old is not None:
            self._used -= old
            if use:
                self._index.move_to_end(key)
        self._index[key] = size
        self._used += size

    def _sync(self, key: bytes, path: Path, *, use: bool) -> bool:
        """Make the index agree with the file: the stat and any eviction's unlinks run
        outside the lock (a stalled filesystem must not hold /metrics, other readers or
        the engine thread behind it), the index changes under it. A file being evicted
        (out of the index, its unlink not done yet) is not adopted back."""
        try:
            size = os.stat(path).st_size
        except GONE:
            with self._lock:
                self._forget(key)
            return False
        with self._lock:
            if key in self._evicting:
                return False
            self._remember(key, size, use=use)
            victims = self._evict_to_fit(0)  # an adopted file counts against the capacity
        self._unlink_victims(victims)
        return True

    def _forget(self, key: bytes) -> bool:
        size = self._index.pop(key, None)
        if size is not None:
            self._used -= size
        return size is not None

    def _evict_to_fit(self, incoming: int, *, landed: bool = False) -> list[bytes]:
        """Drop LRU entries (lock held) until ``incoming`` more bytes fit; their keys, for
        the caller to delete the files of (:meth:`_unlink_victims`) once the lock is
        released. Until then they are ``_evicting``: a reader does not adopt them back.
        ``landed``: only the files written count (a put that has just landed must not be
        evicted for one still writing)."""
        victims: list[bytes] = []
        pending = 0 if landed else self._reserved
        while self._index and self._used + pending + incoming > self.capacity_bytes:
            victim, size = self._index.popitem(last=False)
            self._used -= size
            victims.append(victim)
            self._evicting.add(victim)
            self.num_evictions += 1
        return victims

    def _unlink_victims(self, victims: list[bytes]) -> None:
        try:
            for victim in victims:
                unlink(self._path(victim))
        finally:
            if victims:
                with self._lock:
                    self._evicting.difference_update(victims)
                    self._evicted.notify_all()

    def _fail(self, what: str, key: bytes, exc: OSError) -> TierUnavailableError:
        with self._lock:
            self.errors += 1
        return TierUnavailableError(f"disk store {what} {key.hex()[:16]}: {exc}")

    # ---- store -------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                data = f.read()
        except GONE:
            with self._lock:
                self.misses += 1
                known = key in self._index
            if known:  # evicted by another process, or a put of ours won a race
                with contextlib.suppress(OSError):
                    self._sync(key, path, use=False)
            return None
        except OSError as exc:
            raise self._fail("read", key, exc) from exc
        with self._lock:
            self.hits += 1
            self.bytes_read += len(data)
            known = key in self._index
            if known:
                self._index.move_to_end(key)
        if not known:  # written by another process: adopt it, unless evicted meanwhile
            with contextlib.suppress(OSError):
                self._sync(key, path, use=True)
        if time.time() - st.st_mtime > self.touch_interval_s:
            with contextlib.suppress(OSError):  # only an LRU hint for the next restart
                os.utime(path)
        return data

    def touch(self, keys: Sequence[bytes]) -> None:
        """Keys served from a level above: most recently used here too (and their files'
        times, the LRU order a restart reads, when older than ``touch_interval_s``)."""
        now = time.time()
        with self._lock:
            held = [key for key in keys if key in self._index]
            for key in held:
                self._index.move_to_end(key)
        for key in held:
            with contextlib.suppress(OSError):
                path = self._path(key)
                if now - os.stat(path).st_mtime > self.touch_interval_s:
                    os.utime(path)

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """Each key on its own: one unreadable file (an I/O error, a directory in its
        place) is a miss for that block, not for the intact ones of the batch (a review,
        session 41); only when every read fails does the batch fail, as a store down."""
        out: list[bytes | None] = []
        failed: list[TierUnavailableError] = []
        for key in keys:
            try:
                out.append(self.get(key))
            except TierUnavailableError as exc:
                failed.append(exc)
                out.append(None)
        if failed and len(failed) == len(out):  # not one read: the store, not a file
            raise failed[0]
        return out

    def put(self, key: bytes, record: bytes) -> None:
        path = self._path(key)
        size = len(record)
        if size > self.capacity_bytes:
            with self._lock:
                self.num_rejected += 1
            log.warning("disk store: a %d-byte record exceeds the whole capacity", size)
            return
        try:
            try:
                self._write(key, path, record)
            except OSError as exc:
                if exc.errno not in _FULL or not self._shrink_for(size):
                    raise
                self._write(key, path, record)  # once more, with room made
        except FileNotFoundError:
            log.debug("disk store: temp file of %s removed by another process", key.hex()[:16])
        except OSError as exc:
            raise self._fail("write", key, exc) from exc
        if self.capacity_bytes < self.configured_bytes and time.monotonic() >= self._next_regrow:
            self._regrow()

    def _regrow(self) -> None:
        """Raise a capacity a full filesystem lowered back toward the configured one, to
        what the volume's free space allows now (leaving a tenth of the configured size
        free); looked at every REGROW_EVERY_S at most."""
        self._next_regrow = time.monotonic() + REGROW_EVERY_S
        try:
            free = shutil.disk_usage(self.directory).free
        except OSError:
            return
        with self._lock:
            room = self._used + free - self.configured_bytes // 10
            grown = min(self.configured_bytes, max(self.capacity_bytes, room))
            if grown <= self.capacity_bytes:
                return
            self.capacity_bytes = grown
        log.warning("disk store: room on the filesystem again; capacity raised to %d bytes", grown)

    def _write(self, key: bytes, path: Path, record: bytes) -> None:
        """The write, the evictions it needs and the rename, every syscall outside the
        lock (a stalled rename held it, and with it /metrics and every reader, for as
        long as the filesystem stalled); the index changes under it."""
        size = len(record)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=TMP_SUFFIX, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(record)
            with self._lock:
                # The old file of this key, being evicted, is unlinked by its path: a
                # rename before that unlink put a new record where it deleted it (and the
                # index kept a block that no file held).
                self._evicted.wait_for(lambda: key not in self._evicting, _EVICT_WAIT_S)
                self._forget(key)
                victims = self._evict_to_fit(size)
                self._reserved += size
            try:
                self._unlink_victims(victims)
                os.replace(tmp, path)
            except BaseException:
                with self._lock:
                    self._reserved -= size
                raise
        except BaseException:
            unlink(tmp)
            raise
        with self._lock:
            self._reserved -= size
            if key not in self._evicting:  # else adopted by a reader, evicted since: going
                self._remember(key, size, use=True)
            self.puts += 1
            self.bytes_written += size
            # Puts that reserved together while the index had too little left to evict
            # land over the bound: the oldest goes now, not at some later put.
            victims = self._evict_to_fit(0, landed=True)
        self._unlink_victims(victims)

    def _shrink_for(self, size: int) -> bool:
        """The filesystem is full (of our own files, or others'): lower the capacity to
        what fits, evicting a tenth of what is held (at least room for this record).
        Without it the store filled a volume smaller than its capacity, and from then on
        every write failed before any eviction: nothing new was kept across restarts.
        False when there is nothing of ours to evict."""
        with self._lock:
            if not self._index:
                return False
            free = max(size, self._used // 10)
            self.capacity_bytes = max(size, self._used - free + size)
            victims = self._evict_to_fit(size)
            capacity = self.capacity_bytes
        self._unlink_victims(victims)
        log.warning(
            "disk store: the filesystem is full; capacity lowered to %d bytes (%d evicted)",
            capacity,
            len(victims),
        )
        return True

    def contains(self, key: bytes) -> bool:
        """Whether the file exists now (a stat; not a use, no LRU move)."""
        path = self._path(key)
        try:
            return self._sync(key, path, use=False)
        except OSError as exc:
            raise self._fail("stat", key, exc) from exc

    def discard(self, key: bytes) -> bool:
        path = self._path(key)
        with self._lock:
            known = self._forget(key)
        try:
            os.unlink(path)
        except GONE:
            return known
        except OSError as exc:
            raise self._fail("unlink", key, exc) from exc
        return True

    # ---- metrics -----------------------------------------------------------
    def stats(self) -> dict[str, int | float]:
        """Without the lock: /metrics renders on the event loop, and a writer stalled in
        the filesystem must never hold it (the counts may be a moment apart)."""
        hits, misses = self.hits, self.misses
        lookups = hits + misses
        return {
            "capacity_bytes": self.capacity_bytes,
            "num_blocks": len(self._index),
            "used_bytes": self._used,
            "hits": hits,
            "misses": misses,
            "hit_rate": hits / lookups if lookups else 0.0,
            "puts": self.puts,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "num_evictions": self.num_evictions,
            "num_rejected": self.num_rejected,
            "errors": self.errors,
        }

    def keys(self) -> list[bytes]:
        """Indexed keys from least to most recently used."""
        with self._lock:
            return list(self._index)

    def close(self) -> None:
        """Nothing to release: every file is closed after each call."""

    def __repr__(self) -> str:
        return (
            f"DiskBlockStore({str(self.directory)!r}, blocks={len(self._index)}, used={self._used})"
        )
