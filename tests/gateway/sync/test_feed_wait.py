"""The wait between two polls is under the feed's error handling too: a wait that
raises (psycopg 3.1 has no ``notifies(timeout=...)``; any bug) is counted and the
feed polls on. Before, it ended the sync thread silently while ``stats()`` still
said ``listening``, and no change reached the replica again. No model, no cache:
tenant changes through the feed's callbacks."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from gateway.sync.feed import ChangeFeed
from gateway.sync.log import log_tenant_change
from semantic.store_db import make_engine
from tests.gateway.sync.feed_support import feeding, wait_for

ROOT = Path(__file__).resolve().parents[3]


def _change(url: str, tenant: str) -> None:
    engine = make_engine(url)
    try:
        with Session(engine) as s, s.begin():
            log_tenant_change(s, tenant)
    finally:
        engine.dispose()


def _heard(feed: ChangeFeed) -> list[frozenset[str]]:
    heard: list[frozenset[str]] = []
    feed.on_tenant_change(heard.append)
    return heard


def test_a_wait_that_raises_is_counted_and_the_feed_polls_on(sqlite_url: str) -> None:
    # Broken on this feed only: patched on the class, a sync thread another test left
    # running would take the broken call, and this feed would count no error (CI saw 0).
    feed = ChangeFeed(sqlite_url, None, poll_seconds=0.1)
    calls = [0]
    wait = feed._wait

    def broken_once() -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("injected: the wait broke")
        wait()

    feed._wait = broken_once  # type: ignore[method-assign]
    feed.start()
    try:
        heard = _heard(feed)
        assert wait_for(lambda: calls[0] >= 2, timeout=5.0) is not None  # before: one, dead
        assert feed.stats()["errors"] == 1
        _change(sqlite_url, "acme")
        assert wait_for(lambda: frozenset({"acme"}) in heard, timeout=5.0) is not None
        assert feed.wait_until_caught_up(5)
    finally:
        feed.stop()


@pytest.mark.postgres
def test_a_listen_wait_that_raises_falls_back_to_polling(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def psycopg_3_1(timeout: float) -> bool:  # what 3.1 raised in notifies()
        raise TypeError("notifies() got an unexpected keyword argument 'timeout'")

    with feeding(pg_url, None, poll_seconds=0.2) as feed:
        assert feed.wait_until_caught_up(5) and feed.stats()["listening"]
        heard = _heard(feed)
        assert feed._listener is not None
        monkeypatch.setattr(feed._listener, "wait", psycopg_3_1)  # this feed's only
        assert wait_for(lambda: feed.stats()["errors"] >= 1, timeout=5.0) is not None
        assert not feed.stats()["listening"]  # before: still "listening", the thread dead
        _change(pg_url, "acme")
        assert wait_for(lambda: frozenset({"acme"}) in heard, timeout=5.0) is not None
        assert feed.stats()["errors"] == 1  # polling alone meanwhile: no error per poll


def test_the_postgres_extra_requires_a_psycopg_with_notifies_timeout() -> None:
    pyproject: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    (spec,) = [
        d for d in pyproject["project"]["optional-dependencies"]["postgres"] if "psycopg" in d
    ]
    floor = tuple(int(p) for p in spec.split(">=")[1].split(",")[0].split("."))
    assert floor >= (3, 2), spec  # Connection.notifies(timeout=...) is new in psycopg 3.2
