"""The background watch that ends database rests (gateway/recovery.py), on its own.

Through a live gateway with a hung database: tests/gateway/test_db_rest.py.
"""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

import gateway.recovery
from gateway.db_rest import DbRest
from gateway.recovery import RecoveryWatch


class Pings:
    def __init__(self) -> None:
        self.keys_answer = False
        self.store_ok = True
        self.store_answer = False
        self.calls: list[str] = []

    async def keys(self) -> bool:
        self.calls.append("keys")
        return self.keys_answer

    async def store(self) -> bool:
        self.calls.append("store")
        if self.store_answer:
            self.store_ok = True
        return self.store_answer

    def watch(self, rest: DbRest) -> RecoveryWatch:
        waiters = [(lambda: not rest.is_ok, rest.succeeded)]
        return RecoveryWatch(waiters, self.keys, lambda: self.store_ok, self.store)


def test_nothing_is_pinged_while_nothing_rests() -> None:
    pings = Pings()
    asyncio.run(pings.watch(DbRest()).check_once())
    assert pings.calls == []


def test_the_key_rest_ends_only_when_a_ping_answers() -> None:
    pings, rest = Pings(), DbRest()
    watch = pings.watch(rest)
    rest.failed()
    asyncio.run(watch.check_once())  # the database still away: the rest stays
    assert pings.calls == ["keys"] and rest.is_resting() and watch.num_recoveries == 0
    pings.keys_answer = True
    asyncio.run(watch.check_once())
    assert rest.is_ok and not rest.is_resting() and watch.num_recoveries == 1


def test_every_waiter_is_told_and_only_those_that_wait() -> None:
    """The key store's rest and the calibration's outage wait on the same database:
    one ping answers both; one that does not wait is not told."""
    pings, rest = Pings(), DbRest()
    told: list[str] = []
    waiting = {"calibration": True, "other": False}
    waiters = [(lambda: not rest.is_ok, rest.succeeded)] + [
        (partial(waiting.__getitem__, name), partial(told.append, name)) for name in waiting
    ]
    watch = RecoveryWatch(waiters, pings.keys, lambda: pings.store_ok, pings.store)
    rest.failed()
    asyncio.run(watch.check_once())
    assert pings.calls == ["keys"] and told == [] and not rest.is_ok  # no answer yet
    pings.keys_answer = True
    asyncio.run(watch.check_once())
    assert told == ["calibration"] and rest.is_ok


def test_the_semantic_store_is_pinged_only_while_it_is_down() -> None:
    pings = Pings()
    watch = pings.watch(DbRest())
    pings.store_ok = False
    asyncio.run(watch.check_once())
    assert pings.calls == ["store"] and not pings.store_ok
    pings.store_answer = True
    asyncio.run(watch.check_once())
    assert pings.store_ok and watch.num_recoveries == 1
    asyncio.run(watch.check_once())  # well again: no more pings
    assert pings.calls == ["store", "store"]


def test_the_watch_outlives_a_ping_that_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway.recovery, "PROBE_EVERY_SECONDS", 0.01)
    pings, rest = Pings(), DbRest()
    raised: list[int] = []

    async def keys() -> bool:
        if not raised:
            raised.append(1)
            raise RuntimeError("a ping that breaks")
        return True

    async def run() -> None:
        waiters = [(lambda: not rest.is_ok, rest.succeeded)]
        watch = RecoveryWatch(waiters, keys, lambda: pings.store_ok, pings.store)
        rest.failed()
        watch.start()
        for _ in range(200):
            if rest.is_ok:
                break
            await asyncio.sleep(0.01)
        await watch.aclose()

    asyncio.run(run())
    assert raised and rest.is_ok  # the round after the error ended the rest
