"""Replica sync: a background feed that replays the change log onto this replica.

Several gateway replicas share one database; each keeps its FAISS indexes and
its tenant cache in memory. Every write logs a row in ``cache_changes`` in its
own transaction (entries: :mod:`semantic.changes`; tenants, keys and policies:
:func:`gateway.sync.log.log_tenant_change`); :class:`ChangeFeed` reads the rows
this replica has not applied yet (:mod:`gateway.sync.log`) and replays them: the
semantic ones onto the index (:func:`semantic.replay.replay`), so an entry stored
through replica A becomes a hit on replica B and an invalidation shrinks B's
index; the tenant ones by calling the tenant callbacks, so a policy or key change
drops B's auth cache.

Wake-ups. On PostgreSQL the writer's transaction also runs
``pg_notify('cachegate_changes', <schema>)``; the feed holds a dedicated
autocommit connection doing ``LISTEN`` and polls as soon as a notification for
its schema arrives (channels are per database, not per schema). It also polls
every ``poll_seconds`` regardless: that bounds the delay when a notification is
lost (listener reconnecting, database restart), and is the only mechanism on
SQLite.

Why LISTEN/NOTIFY and not Redis pub/sub: the change and its notification
commit atomically in the database that is already the source of truth, so a
rolled-back write notifies nobody and a committed one always leaves its log row;
a Redis outage cannot delay or lose an invalidation (there is no second system
on the path); and a lost notification costs at most one poll interval, because
the log, not the message, is what is replayed.

Ordering. Sequence numbers are handed out at insert, but transactions commit in
any order, so "seq > last applied" alone can miss a row with a smaller seq that
commits later. A row at or below the position is still replayed if it was written
within ``window_seconds`` before the previous poll (by the database's clock): it
is missed only if its transaction stays open longer than the window after logging
it (the log is written last, just before the commit). Each poll reads only the
rows past its position and those of the seqs it found missing below it, while
they can still pass that rule (:mod:`gateway.sync.position`); only for about one
window after a start, a resume or a rebuild, when what is missing below the
position is not known, does it re-read every row of the window there.

Retention. A feed prunes rows older than ``retention_seconds`` now and then. A
feed that has not polled successfully for about that long may have lost rows to
a pruning replica, so it rebuilds its index from the entries table instead and
tells the tenant callbacks that anything may have changed.

Failures never stop the feed: errors are counted, logged at most every 30 s, and
retried with backoff; once the database answers again the feed catches up from
its position, without a restart. That includes the wait between polls: if waiting
on the LISTEN connection raises, the error is counted, the connection closed
(``listening`` turns false) and the feed polls every ``poll_seconds`` without it
for 30 s before listening again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine

from gateway.sync.listener import Listener
from gateway.sync.log import (
    changed_tenants,
    db_now,
    last_seq,
    prune,
    read_after,
    read_missed,
    sequence_head,
    written_at,
)
from gateway.sync.position import Position
from semantic.cache import SemanticCache
from semantic.changes import Change
from semantic.replay import replay
from semantic.store_db import make_engine

# Under "cachegate", the logger the gateway's CLI turns up to INFO (a name, not an import).
log = logging.getLogger("cachegate.sync")

#: Called with the tenants whose keys, policy or state changed (empty: possibly all).
TenantCallback = Callable[[frozenset[str]], None]

_LOG_EVERY = 30.0  # seconds between two logged errors
_MAX_BACKOFF = 5.0
_LISTEN_RETRY = 30.0  # seconds polling only after waiting on the LISTEN connection failed


class ChangeFeed:
    """Replays other replicas' (and this one's) changes onto ``cache``; see the module."""

    def __init__(
        self,
        url: str,
        cache: SemanticCache | None = None,
        *,
        poll_seconds: float = 1.0,
        listen: bool = True,
        window_seconds: float = 10.0,
        retention_seconds: float = 3600.0,
        prune_every_seconds: float = 60.0,
        batch_size: int = 5000,
        connect_timeout: float = 5.0,
    ) -> None:
        if poll_seconds <= 0 or window_seconds <= 0 or retention_seconds <= window_seconds:
            raise ValueError("need poll_seconds > 0 and retention_seconds > window_seconds > 0")
        self.cache = cache
        self.poll_seconds = poll_seconds
        self.window = timedelta(seconds=window_seconds)
        self.retention_seconds = retention_seconds
        self.prune_every_seconds = prune_every_seconds
        self.batch_size = batch_size
        self._engine: Engine = make_engine(url, connect_timeout=connect_timeout)
        postgres = self._engine.dialect.name == "postgresql"
        self._listener = Listener(self._engine, connect_timeout) if listen and postgres else None
        self._callbacks: list[TenantCallback] = []
        self._pos = Position()  # its ``ref``: the database clock at the last good poll
        # (seq, logged at) of the newest row applied: rewritten, the database went back
        self._head: tuple[int, datetime] | None = None
        self._last_ok: float | None = None  # monotonic start of the last good poll
        self._last_prune = 0.0
        counters = ("applied", "read", "errors", "polls", "rebuilds", "pruned")
        self._counts = dict.fromkeys(counters, 0)
        self._poll_lock = threading.Lock()
        self._progress = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_logged = 0.0
        self._listen_retry_at = 0.0  # monotonic time the LISTEN connection may reopen

    # -- lifecycle -------------------------------------------------------------------
    def on_tenant_change(self, callback: TenantCallback) -> None:
        self._callbacks.append(callback)

    def mark(self) -> None:
        """Start from the log's current end (call before the initial rebuild, so that
        nothing committed during it is missed). Without it, ``start`` marks; if the
        database is down then, the first good poll rebuilds instead."""
        with self._poll_lock, self._engine.connect() as conn:
            now, seq = db_now(conn), last_seq(conn)
            self._head = _head_at(conn, seq)
        self._pos.reset(seq, now)
        self._last_ok = time.monotonic()

    def resume(self, seq: int, at: datetime, head_at: datetime | None = None) -> None:
        """Start from a saved position instead (an index snapshot's): the first poll
        replays every row after ``seq`` and those written within the window after
        ``at``; a position older than the retention makes it rebuild instead, and so
        does the row ``seq`` logged at another time than ``head_at`` (the database went
        back in time since: :meth:`_went_back`)."""
        with self._poll_lock, self._engine.connect() as conn:
            age = (db_now(conn) - at).total_seconds()
        self._pos.reset(seq, at)
        self._head = None if head_at is None else (seq, head_at)
        self._last_ok = time.monotonic() - max(0.0, age)

    def head_at(self) -> datetime | None:
        """When the row at the position was logged, if known (call while paused)."""
        head = self._head
        return head[1] if head is not None and head[0] == self._pos.seq else None

    def head(self) -> int:
        """The highest seq the log has handed out (a saved position past it belongs to
        another database, or one gone back in time). Not the last row's: pruning an idle
        log empties it, and a snapshot then read as ahead of it (a review, session 44)."""
        with self._engine.connect() as conn:
            return sequence_head(conn)

    @contextmanager
    def paused(self) -> Iterator[tuple[int, datetime | None]]:
        """Hold replays off; yields the position, which holds while paused (what an
        index snapshot taken meanwhile reflects)."""
        with self._poll_lock:
            yield self._pos.seq, self._pos.ref

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the feed is already started")
        if self._pos.ref is None:
            try:
                self.mark()
            except Exception as exc:  # the loop retries; its first good poll rebuilds
                self._failed(exc)
        how = "LISTEN/NOTIFY + poll" if self._listener else "poll only, every"
        log.info("replica sync: %s %.1f s (%s)", how, self.poll_seconds, self._engine.dialect.name)
        self._thread = threading.Thread(target=self._run, name="cachegate-sync", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._listener is not None:
            self._listener.close()
        self._engine.dispose()

    def wait_until_caught_up(self, timeout: float = 10.0) -> bool:
        """Wake the feed and wait for a good poll that started after this call."""
        asked = time.monotonic()
        self._wake.set()
        with self._progress:
            return self._progress.wait_for(
                lambda: self._last_ok is not None and self._last_ok >= asked, timeout
            )

    def stats(self) -> dict[str, Any]:
        """Counters since start: ``applied`` (rows replayed), ``read`` (rows the polls
        read from the log), ``errors``, ``polls``, ``rebuilds``, ``pruned``; ``last_seq``
        (the position), ``gaps`` (seqs below it that may still commit), ``lag`` (seconds
        since the last good poll began) and ``listening`` (a LISTEN connection is up)."""
        with self._progress:
            lag = None if self._last_ok is None else time.monotonic() - self._last_ok
            listening = self._listener is not None and self._listener.connected
            where = {"last_seq": self._pos.seq, "gaps": self._pos.open_gaps}
            return self._counts | where | {"lag": lag, "listening": listening}

    # -- the loop --------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            self._wake.clear()  # a wake-up asked for from now on needs another poll
            try:
                more = self.sync_once()
            except Exception as exc:  # the database is down (or a bug): never stop
                self._failed(exc)
                backoff = min(_MAX_BACKOFF, max(2 * backoff, min(self.poll_seconds, 0.5)))
                self._stop.wait(backoff)
                continue
            if backoff:
                log.warning("replica sync: recovered, caught up to seq %d", self._pos.seq)
                backoff = 0.0
            listener = self._listener
            if (
                listener is not None
                and not listener.connected
                and time.monotonic() >= self._listen_retry_at
            ):
                try:
                    listener.connect()
                    continue  # poll at once: something may have come while not listening
                except Exception as exc:
                    self._failed(exc)
            if not more:
                try:
                    self._wait()
                except Exception as exc:  # a bug, or a driver without what it needs: poll on
                    self._failed(exc)
                    if listener is not None:  # polling only, until it is opened again
                        listener.close()
                        self._listen_retry_at = time.monotonic() + _LISTEN_RETRY
                    self._wake.wait(self.poll_seconds)  # stop() wakes it too

    def _wait(self) -> None:
        deadline = time.monotonic() + self.poll_seconds
        while not self._stop.is_set() and not self._wake.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._listener is None or not self._listener.connected:
                self._wake.wait(left)
            elif self._listener.wait(min(left, 0.2)):
                return  # a notification for this schema, or the listener broke

    def _failed(self, exc: Exception) -> None:
        with self._progress:
            self._counts["errors"] += 1
        now = time.monotonic()
        if now - self._last_logged >= _LOG_EVERY:
            self._last_logged = now
            log.warning("replica sync: %s: %s (retrying)", type(exc).__name__, str(exc)[:300])

    # -- one poll --------------------------------------------------------------------
    def sync_once(self) -> bool:
        """Replay what is new; True when a full batch was read (more may be waiting)."""
        with self._poll_lock:
            started = time.monotonic()
            if self._last_ok is None or started - self._last_ok > self._rebuild_after():
                self._rebuild()
            with self._engine.connect() as conn:
                now = db_now(conn)
                plan = self._pos.plan(now, self.window)
                late = read_missed(conn, plan.floor, plan.gaps, plan.since)
                fresh = read_after(conn, self._pos.seq, self.batch_size)
                went_back = self._went_back(conn, fresh)
            if went_back:
                self._rebuild("the database's change log went back below this replica's")
                return False
            read = len(late) + len(fresh)
            late = self._pos.unapplied(late)
            todo = late + fresh
            tenants = changed_tenants(todo)
            if tenants:  # first: keys revoked need no index lock (a snapshot may hold it)
                self._notify_tenants(tenants)
            if self.cache is not None:
                replay(self.cache, todo)
            self._advance(late, fresh, now, started, read)
            if fresh:
                self._head = (fresh[-1].seq, fresh[-1].at)
            if started - self._last_prune >= self.prune_every_seconds:
                self._prune(now)
            return len(fresh) >= self.batch_size

    def _went_back(self, conn: Connection, fresh: list[Change]) -> bool:
        """Whether the database went back in time below this replica (a restore to an
        earlier point, a failover to a standby that lost the last commits): its seqs and
        entry ids are handed out again, so rows past the old position would never be
        read, and the index would keep old vectors under ids reused for other questions.
        Seen as a sequence below the position, or as the row last applied rewritten
        (logged at another time); a pruned row is neither."""
        if not fresh and sequence_head(conn) < self._pos.seq:
            return True
        if self._head is None:
            return False
        seq, at = self._head
        again = written_at(conn, seq)
        return again is not None and again != at

    def _rebuild_after(self) -> float:
        return self.retention_seconds - self.window.total_seconds()

    def _rebuild(self, why: str = "fell behind the log") -> None:
        """Start over from the entries table: the log may have lost rows we needed."""
        with self._engine.connect() as conn:
            now, seq = db_now(conn), last_seq(conn)
            self._head = _head_at(conn, seq)
        if self.cache is not None:
            self.cache.rebuild(progress=False)
        self._pos.reset(seq, now)
        with self._progress:
            self._counts["rebuilds"] += 1
        log.warning("replica sync: index rebuilt from the database (%s)", why)
        self._notify_tenants(frozenset())

    def _advance(
        self, late: list[Change], fresh: list[Change], now: datetime, t: float, read: int
    ) -> None:
        with self._progress:
            self._pos.advance(late, fresh, now)
            self._last_ok = t
            self._counts["applied"] += len(late) + len(fresh)
            self._counts["read"] += read
            self._counts["polls"] += 1
            self._progress.notify_all()

    def _prune(self, now: datetime) -> None:
        cutoff = now - timedelta(seconds=self.retention_seconds)
        with self._engine.begin() as conn:
            removed = prune(conn, cutoff)
        self._last_prune = time.monotonic()
        with self._progress:
            self._counts["pruned"] += removed

    def _notify_tenants(self, tenants: frozenset[str]) -> None:
        for callback in self._callbacks:
            try:
                callback(tenants)
            except Exception:
                log.exception("replica sync: tenant callback failed")


def _head_at(conn: Connection, seq: int) -> tuple[int, datetime] | None:
    at = written_at(conn, seq)
    return None if at is None else (seq, at)
