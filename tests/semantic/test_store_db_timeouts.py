"""PostgreSQL engines of the store carry TCP keepalives, ``tcp_user_timeout`` and a
``lock_timeout``: a table lock held elsewhere (another replica's migration) fails a
lookup or a backfill with ``StoreUnavailableError`` (which the request path answers as
a skipped lookup or backfill) within the bound, instead of hanging a worker thread.
Real PostgreSQL, with a positive control: the same lock holds a plain engine."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, make_url, text

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.errors import StoreUnavailableError
from semantic.store import EntryStore
from semantic.store_db import KEEPALIVES, LOCK_TIMEOUT_MS, make_engine, postgres_connect_args
from tests.blocking import timed
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat, reply

PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
#: What a lock-bound statement may take here: the lock timeout and a generous margin.
BOUND = LOCK_TIMEOUT_MS / 1000 + 4


# ---- the connect arguments -------------------------------------------------------------
def test_connect_args_keep_the_urls_options_after_ours() -> None:
    args = postgres_connect_args(
        "postgresql+psycopg://u@h/db?options=-csearch_path%3Dmine", connect_timeout=2.4
    )
    assert args["connect_timeout"] == 2
    assert {k: args[k] for k in KEEPALIVES} == KEEPALIVES
    # ours first: a -c lock_timeout given in the URL comes later and wins
    assert args["options"] == f"-c lock_timeout={LOCK_TIMEOUT_MS} -csearch_path=mine"
    assert "statement_timeout" not in args["options"]  # the store's engine has none


def test_connect_args_leave_what_the_url_sets() -> None:
    url = "postgresql://u@h/db?keepalives_idle=60&tcp_user_timeout=1000"  # psycopg2: libpq
    args = postgres_connect_args(url, lock_timeout_ms=None, statement_timeout_ms=1500)
    assert "keepalives_idle" not in args and "tcp_user_timeout" not in args
    assert args["keepalives"] == 1 and args["options"] == "-c statement_timeout=1500"
    plain = postgres_connect_args("postgresql://u@h/db", lock_timeout_ms=None)
    assert "options" not in plain and plain["keepalives_idle"] == 10


def test_a_driver_without_libpq_gets_the_connect_timeout_only() -> None:
    assert postgres_connect_args("postgresql+pg8000://u@h/db") == {"connect_timeout": 5}


def test_sqlite_engines_are_unchanged(tmp_path: Any) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    engine.dispose()


# ---- the real PostgreSQL ---------------------------------------------------------------
@pytest.mark.postgres
def test_the_connection_has_the_settings(pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW lock_timeout")).scalar() == "3s"
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "0"
            schema = make_url(pg_url).query["options"]
            assert isinstance(schema, str)
            assert conn.execute(text("SELECT current_schema()")).scalar() == schema.split("=")[1]
            params = conn.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
        assert {k: params[k] for k in KEEPALIVES} == {k: str(v) for k, v in KEEPALIVES.items()}
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_the_hit_paths_reads_have_a_statement_timeout(pg_url: str) -> None:
    # A lookup reads a few rows by key: a stuck server must not hold a lookup thread.
    # The store's own engine has none (a rebuild reads the whole table through it).
    store = EntryStore(pg_url)
    try:
        with store.read_engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "3s"
            assert conn.execute(text("SHOW lock_timeout")).scalar() == "3s"
        with store.engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "0"
    finally:
        store.close()


@pytest.mark.postgres
def test_a_url_given_lock_timeout_wins(pg_url: str) -> None:
    engine = make_engine(f"{pg_url}%20-clock_timeout%3D250")
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW lock_timeout")).scalar() == "250ms"
    finally:
        engine.dispose()


@pytest.fixture
def locker(pg_url: str) -> Iterator[Callable[[], None]]:
    """``lock()`` takes ACCESS EXCLUSIVE on semantic_entries in another session (as a
    migration does) until the test ends."""
    schema = str(make_url(pg_url).query["options"]).split("=")[1]
    conn = psycopg.connect(PG_DSN)

    def lock() -> None:
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute("LOCK TABLE semantic_entries IN ACCESS EXCLUSIVE MODE")

    try:
        yield lock
    finally:
        conn.rollback()
        conn.close()


@pytest.mark.postgres
def test_a_table_lock_fails_lookup_and_backfill_within_the_bound(
    embedder: Embedder, pg_url: str, locker: Callable[[], None]
) -> None:
    store = EntryStore(pg_url, memo_size=0)  # every hit reads its row from the database
    cache = SemanticCache(embedder, store, clock=ManualClock(), hit_flush_seconds=None)
    plain = create_engine(pg_url)  # what the store had before: no lock_timeout
    try:
        assert cache.store(chat(STORED), reply()).stored
        # positive control: without the lock the lookup hits (through the database)
        hit, _took = timed(lambda: cache.lookup(chat(PARAPHRASE)))
        assert not isinstance(hit, Exception) and hit.hit

        locker()
        # positive control: the lock holds a statement that has no lock_timeout
        blocked = threading.Event()

        def plain_read() -> None:
            with plain.connect() as conn:
                conn.execute(text("SELECT count(*) FROM semantic_entries"))
            blocked.set()

        threading.Thread(target=plain_read, daemon=True).start()
        assert not blocked.wait(1.5), "the lock did not hold a plain read"

        failed, took = timed(lambda: cache.lookup(chat(PARAPHRASE)))
        assert isinstance(failed, StoreUnavailableError), failed
        assert took < BOUND, took
        failed, took = timed(lambda: cache.store(chat("How do I close my account?"), reply()))
        assert isinstance(failed, StoreUnavailableError), failed
        assert took < BOUND, took
    finally:
        store.close()
        plain.dispose()
