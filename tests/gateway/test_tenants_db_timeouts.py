"""Authentication when the database cannot answer in time: a pool with no free
connection (``sqlalchemy.exc.TimeoutError``), a table lock held elsewhere (the tenant
engine's ``lock_timeout``) or a statement running long (the lookup's own
``statement_timeout``). Each is the documented fallback, never a 500 or a hang: the
last answer for a known key (fail open), 503 for a key never confirmed."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, text

from gateway.admin.service import TenantAdmin
from gateway.app import Components
from gateway.errors import AuthenticationError, ServiceUnavailableError
from gateway.tenants import AUTH_STATEMENT_TIMEOUT_MS, TenantStore
from migrations.runner import upgrade_database
from semantic.store_db import LOCK_TIMEOUT_MS, postgres_connect_args
from tests.blocking import timed
from tests.gateway.conftest import (
    PG_DSN,
    PG_SERVER_URL,
    assert_openai_error,
    gateway_settings,
    running_gateway,
)
from tests.gateway.scripted_upstream import scripted_upstream

ADMIN_TOKEN = "admin-token-for-tests-0123456789"

#: What a lock-bound authentication may take here: its timeout and a generous margin.
BOUND = max(LOCK_TIMEOUT_MS, AUTH_STATEMENT_TIMEOUT_MS) / 1000 + 4


def tenant_with_key(store: TenantStore) -> str:
    admin = TenantAdmin(store, None, None)
    tenant = "t" + uuid.uuid4().hex[:8]
    admin.add_tenant("test", tenant, None)
    return admin.issue_key("test", tenant, "k").key


# ---- the pool has no free connection ---------------------------------------------------
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'gateway.db'}"
    else:
        schema: str = request.getfixturevalue("pg_schema")
        url = f"{PG_SERVER_URL}?options=-csearch_path%3D{schema}"
    upgrade_database(url)
    return url


def test_an_exhausted_pool_is_the_database_down(database_url: str) -> None:
    engine = create_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=0.5)
    store = TenantStore(engine, cache_seconds=0.0)  # every authentication asks the database
    known, never_seen = tenant_with_key(store), tenant_with_key(store)
    ctx = store.authenticate(known)  # confirmed once: a stale answer exists
    held = engine.connect()  # every pooled connection busy (a slow database under load)
    try:
        assert store.authenticate(known) == ctx  # fail open on the last answer
        with pytest.raises(ServiceUnavailableError) as refused:
            store.authenticate(never_seen)
        assert refused.value.status == 503
        assert database_url.split("?")[0] not in refused.value.message
    finally:
        held.close()
    # positive control: with the connection back, the database answers again
    assert store.authenticate(never_seen).tenant_id != ctx.tenant_id
    with pytest.raises(AuthenticationError):
        store.authenticate("cg-" + "x" * 43)
    engine.dispose()


# ---- a table lock held elsewhere, on the real PostgreSQL -------------------------------
@pytest.fixture
def pg_url(pg_schema: str) -> str:
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    return url


@pytest.fixture
def lock_keys(pg_schema: str) -> Iterator[Callable[[], None]]:
    """``lock()`` takes ACCESS EXCLUSIVE on api_keys and tenants in another session (as
    another replica's migration would) until the test ends."""
    conn = psycopg.connect(PG_DSN)

    def lock() -> None:
        conn.execute(f'SET search_path = "{pg_schema}"')
        conn.execute("LOCK TABLE api_keys, tenants IN ACCESS EXCLUSIVE MODE")

    try:
        yield lock
    finally:
        conn.rollback()
        conn.close()


def tenant_engine(url: str) -> Engine:
    """The tenant engine as ``gateway.app`` makes it."""
    return create_engine(
        url,
        pool_pre_ping=True,
        connect_args=postgres_connect_args(url, connect_timeout=5),
        hide_parameters=True,
    )


@pytest.mark.postgres
@pytest.mark.parametrize(
    "url_options",
    [
        pytest.param("", id="lock_timeout"),
        # the URL switches the lock timeout off: the lookup's statement timeout bounds it
        pytest.param("%20-clock_timeout%3D0", id="statement_timeout"),
    ],
)
def test_a_table_lock_fails_authentication_within_the_bound(
    pg_url: str, lock_keys: Callable[[], None], url_options: str
) -> None:
    engine = tenant_engine(pg_url + url_options)
    plain = create_engine(pg_url)  # what the gateway had before: no timeouts
    store = TenantStore(engine, cache_seconds=0.0)
    try:
        with engine.connect() as conn:  # engine-wide: no statement_timeout (reports)
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "0"
            expected = "0" if url_options else f"{LOCK_TIMEOUT_MS // 1000}s"
            assert conn.execute(text("SHOW lock_timeout")).scalar() == expected
        known, never_seen = tenant_with_key(store), tenant_with_key(store)
        ctx = store.authenticate(known)  # positive control: answered without the lock

        lock_keys()
        blocked = threading.Event()  # positive control: the lock holds a plain read

        def plain_read() -> None:
            with plain.connect() as conn:
                conn.execute(text("SELECT count(*) FROM api_keys"))
            blocked.set()

        threading.Thread(target=plain_read, daemon=True).start()
        assert not blocked.wait(1.5), "the lock did not hold a plain read"

        answer, took = timed(lambda: store.authenticate(known))
        assert answer == ctx and took < BOUND, (answer, took)  # fail open
        refused, took = timed(lambda: store.authenticate(never_seen))
        assert isinstance(refused, ServiceUnavailableError), refused
        assert took < BOUND, took
    finally:
        engine.dispose()
        plain.dispose()


@pytest.mark.postgres
def test_the_gateways_tenant_engine_is_bounded(
    pg_url: str, lock_keys: Callable[[], None], tmp_path: Path
) -> None:
    """The engine ``create_app`` makes: its settings, and the request path under a lock
    (a key never confirmed: 503; the admin API: 503), with a positive control first."""
    with scripted_upstream() as up:
        settings = gateway_settings(
            tmp_path,
            pg_url,
            upstream_url=up.url,
            semantic_enabled=False,
            admin_token=ADMIN_TOKEN,
        )
        with running_gateway(settings, Components()) as gw:
            db: Engine = gw.app.state.db
            with db.connect() as conn:
                assert conn.execute(text("SHOW lock_timeout")).scalar() == "3s"
                assert conn.execute(text("SHOW statement_timeout")).scalar() == "0"
                params = conn.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
                assert params["keepalives"] == "1" and params["tcp_user_timeout"] == "20000"
            _tenant, key = gw.tenant("lock")
            admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            with gw.http(timeout=30) as http:
                # positive control: answered while nothing holds a lock
                assert http.get("/admin/tenants", headers=admin).status_code == 200
                never_seen = gw.tenant("lock")[1]
                ok = http.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
                assert ok.status_code == 200, ok.text

                lock_keys()
                started = time.monotonic()
                r = http.get("/v1/models", headers={"Authorization": f"Bearer {never_seen}"})
                assert_openai_error(r, 503, "service_unavailable")
                assert time.monotonic() - started < BOUND
                started = time.monotonic()
                err = assert_openai_error(
                    http.get("/admin/tenants", headers=admin), 503, "service_unavailable"
                )
                assert time.monotonic() - started < BOUND
                assert "127.0.0.1" not in err["message"] and "lock" not in err["message"]
