"""Every admin route answers the declared 503 (OpenAI error shape, a fixed message that
names neither the database nor anything the caller sent) when the tenant database
cannot answer: PostgreSQL refusing connections, a SQLite file that cannot be opened, a
pool with no free connection. Positive control: the same requests on a working
database answer without a 5xx."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import Engine, create_engine

from gateway.admin.routes import router as admin_router
from gateway.admin.unavailable import DATABASE_UNAVAILABLE
from gateway.error_handlers import install_error_handlers
from gateway.metrics import GatewayMetrics
from gateway.reports.api import report_router
from gateway.review.api import review_router
from gateway.settings import Settings
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database
from tests.gateway.conftest import assert_openai_error

TOKEN = "admin-token-for-tests-0123456789"
#: What the caller sends: none of it may come back in a 503's message.
TENANT = "jane-doe-private"
NAME = "Jane Doe Private Ltd"
QUESTION = "what is the balance of account 4417"

ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/admin/tenants", {"id": TENANT, "name": NAME}),
    ("GET", "/admin/tenants", None),
    ("GET", f"/admin/tenants/{TENANT}", None),
    ("PATCH", f"/admin/tenants/{TENANT}", {"name": NAME + " 2"}),
    ("POST", f"/admin/tenants/{TENANT}/disable", None),
    ("POST", f"/admin/tenants/{TENANT}/enable", None),
    ("POST", f"/admin/tenants/{TENANT}/keys", {"name": NAME}),
    ("GET", f"/admin/tenants/{TENANT}/keys", None),
    ("DELETE", f"/admin/tenants/{TENANT}/keys/1", None),
    ("GET", f"/admin/tenants/{TENANT}/policy", None),
    ("PUT", f"/admin/tenants/{TENANT}/policy", {"sample_rate": 0.5}),
    ("PATCH", f"/admin/tenants/{TENANT}/policy", {"sample_rate": 0.25}),
    ("GET", f"/admin/tenants/{TENANT}/policy/history", None),
    ("GET", f"/admin/tenants/{TENANT}/cache/entries", None),
    ("DELETE", f"/admin/tenants/{TENANT}/cache", None),
    ("DELETE", f"/admin/tenants/{TENANT}/cache/partitions/abc", None),
    ("DELETE", f"/admin/tenants/{TENANT}/cache/entries/1", None),
    ("GET", f"/admin/tenants/{TENANT}/cache/stats", None),
    ("POST", "/admin/tenants/nobody/cache/explain", {"question": QUESTION}),
    ("GET", "/admin/audit", None),
    ("GET", "/admin/review/samples", None),
    ("GET", "/admin/review/samples/1", None),
    ("POST", "/admin/review/samples/1/label", {"label": "correct", "note": QUESTION}),
    ("DELETE", f"/admin/tenants/{TENANT}", None),
]
IDS = [f"{method} {path}" for method, path, _body in ROUTES]


def admin_client(db: Engine) -> TestClient:
    """The admin router with the gateway's error handlers over ``db`` (no semantic cache)."""
    app = FastAPI()
    app.include_router(admin_router)
    app.include_router(review_router())
    app.include_router(report_router())
    app.state.db = db
    app.state.settings = Settings(_env_file=None)  # the report reads its defaults
    install_error_handlers(app)
    app.state.admin_token = SecretStr(TOKEN)
    app.state.rate_limiter = None
    app.state.gateway = SimpleNamespace(
        tenants=TenantStore(db),
        pipeline=SimpleNamespace(cache=None, verification=None),
        metrics=GatewayMetrics("id"),
        stats=None,
        upstream=SimpleNamespace(models=lambda: ["m"], engine=None),
    )
    return TestClient(
        app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {TOKEN}"}
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def up_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('admin-db-up') / 'gateway.db'}"
    upgrade_database(url)
    return url


@pytest.fixture(scope="module")
def up(up_url: str) -> Iterator[TestClient]:
    engine = create_engine(up_url)
    with admin_client(engine) as client:
        yield client
    engine.dispose()


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=IDS)
def test_positive_control_the_database_up(
    up: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    # in order: the tenant is created first and deleted last
    r = up.request(method, path, json=body)
    assert r.status_code < 500, (r.status_code, r.text)


PORT = free_port()  # nothing listens: PostgreSQL is down
DOWN = {
    "postgres-refused": f"postgresql+psycopg://postgres@127.0.0.1:{PORT}/test",
    "sqlite-unopenable": "sqlite:////nonexistent-dir-for-cachegate-tests/gateway.db",
}


@pytest.fixture(scope="module", params=sorted(DOWN))
def down(request: pytest.FixtureRequest) -> Iterator[tuple[str, TestClient]]:
    url = DOWN[request.param]
    connect_args = {"connect_timeout": 2} if url.startswith("postgresql") else {}
    engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    with admin_client(engine) as client:
        yield url, client
    engine.dispose()


def assert_database_unavailable(r: Any, url: str) -> None:
    err = assert_openai_error(r, 503, "service_unavailable")
    assert err["message"] == DATABASE_UNAVAILABLE, err
    for leak in (url, "127.0.0.1", str(PORT), "nonexistent", TENANT, NAME, QUESTION, "nobody"):
        assert leak not in r.text, (leak, r.text)


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=IDS)
def test_every_route_is_a_503_with_the_database_down(
    down: tuple[str, TestClient], method: str, path: str, body: dict[str, Any] | None
) -> None:
    url, client = down
    assert_database_unavailable(client.request(method, path, json=body), url)


def test_an_exhausted_pool_is_a_503(up_url: str) -> None:
    engine = create_engine(up_url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    with admin_client(engine) as client:
        # positive control: answered while the pool has its connection
        assert client.get("/admin/tenants").status_code == 200
        held = engine.connect()  # the pool's only connection is busy
        try:
            for method, path, body in ROUTES:
                assert_database_unavailable(client.request(method, path, json=body), up_url)
        finally:
            held.close()
        assert client.get("/admin/tenants").status_code == 200
    engine.dispose()


def test_the_report_is_a_503_with_the_database_down(down: tuple[str, TestClient]) -> None:
    # Its positive control needs a whole gateway: tests/gateway/reports/test_reports.py.
    url, client = down
    assert_database_unavailable(client.get("/admin/reports/misfires?format=json"), url)


def test_a_database_that_hangs_is_a_503_after_the_deadline(
    up: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that hangs fails no call: an admin request waited as long as the hang
    lasted. Now every admin route gives up after its deadline (120 s; 0.5 s here) with
    a 503 that says a change may still land. The control: the same route answers once
    the database does."""
    import gateway.admin.unavailable as unavailable
    from gateway.admin.service import TenantAdmin

    monkeypatch.setattr(unavailable, "ADMIN_DEADLINE_SECONDS", 0.5)
    release = threading.Event()
    real_list = TenantAdmin.list_tenants

    def hung(self: TenantAdmin, *args: Any) -> Any:
        release.wait(10)
        return real_list(self, *args)

    monkeypatch.setattr(TenantAdmin, "list_tenants", hung)
    try:
        started = time.monotonic()
        r: Any = up.get("/admin/tenants")
        assert time.monotonic() - started < 5
        err = assert_openai_error(r, 503, "service_unavailable")
        assert err["message"] == unavailable.NO_ANSWER
        release.set()
        assert up.get("/admin/tenants").status_code == 200
    finally:
        release.set()
