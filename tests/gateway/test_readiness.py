"""/ready waits for the Chinese pair verifier loading in the background at start
(gateway/readiness.py): its first lookups would otherwise wait seconds for it, past
their deadline on a busy host (a full run caught them skipped). Real SQLite; the
upstream and the semantic store are stand-ins that answer, the warm-up a real thread."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from types import SimpleNamespace

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from gateway.db_rest import DbRest, Probe
from gateway.readiness import readiness
from migrations.runner import upgrade_database


async def yes() -> bool:
    return True


def test_not_ready_while_the_verifier_loads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gw.db'}"
    upgrade_database(url)
    app = FastAPI()
    app.add_api_route("/ready", partial(readiness, Probe()), methods=["GET"])
    app.state.db = create_engine(url)
    app.state.gateway = SimpleNamespace(
        upstream=SimpleNamespace(is_ready=yes),
        pipeline=SimpleNamespace(check_store=yes),
        tenants=SimpleNamespace(rest=DbRest()),
    )
    loaded = threading.Event()
    app.state.warming = threading.Thread(target=lambda: loaded.wait(10), daemon=True)
    app.state.warming.start()
    client = TestClient(app)
    try:
        r = client.get("/ready")
        assert r.status_code == 503 and r.json()["checks"]["verifier_loaded"] is False
        loaded.set()
        app.state.warming.join(5)
        r = client.get("/ready")  # the control: loaded, ready
        assert r.status_code == 200 and r.json()["checks"]["verifier_loaded"] is True
        app.state.warming = None  # no Chinese path: nothing to wait for
        assert client.get("/ready").status_code == 200
    finally:
        loaded.set()
        app.state.db.dispose()
