"""The shared rate-limit stores on their own (no gateway, no model): the PostgreSQL
bucket under a lock wait, and the fail-open circuit breaker in front of either store."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from gateway.proxy.ratelimit_shared import PostgresBuckets
from migrations.runner import upgrade_database
from tests.gateway.conftest import PG_SERVER_URL

NOW = "extract(epoch FROM clock_timestamp())"


@pytest.mark.postgres
def test_a_taker_that_waited_for_the_row_lock_does_not_turn_the_clock_back(
    pg_schema: str,
) -> None:
    """A take reads the server clock before it waits for the bucket's row lock. Before
    the fix it wrote that earlier time back as ``updated_at``, so the next take was
    credited the wait a second time: under concurrency far more than rpm got through
    (rpm=600, 1800 requests from 16 threads: 731-788 allowed)."""
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    buckets = PostgresBuckets(url, timeout=10.0)  # the lock wait below is not a failure
    rpm = 60  # one token a second
    try:
        assert buckets.take("t", rpm)[0]
        with buckets.engine.begin() as conn:  # empty, as of now
            conn.execute(text(f"UPDATE rate_limit_buckets SET tokens = 0, updated_at = {NOW}"))
        holder = buckets.engine.connect()  # another taker, holding the row
        holder.begin()
        holder.execute(text("SELECT 1 FROM rate_limit_buckets WHERE tenant_id = 't' FOR UPDATE"))
        waited: list[tuple[bool, float]] = []
        waiter = threading.Thread(target=lambda: waited.append(buckets.take("t", rpm)))
        waiter.start()  # reads the clock now, then waits for the lock
        time.sleep(1.5)
        # The holder takes the token that refilled meanwhile, as of its own (later) clock.
        holder.execute(text(f"UPDATE rate_limit_buckets SET tokens = 0, updated_at = {NOW}"))
        holder.commit()
        holder.close()
        waiter.join(10)
        assert waited and not waited[0][0]  # nothing refilled since the holder's take
        with buckets.engine.connect() as conn:
            lag = conn.execute(text(f"SELECT {NOW} - updated_at FROM rate_limit_buckets")).scalar()
        assert lag is not None and lag < 0.5, lag  # before: 1.5 s back, the wait
        # So the next take finds well under a token (before: the 1.5 s again, allowed).
        allowed, wait = buckets.take("t", rpm)
        assert not allowed and wait > 0.5
        assert buckets.take("u", rpm)[0]  # control: another tenant's bucket is full
    finally:
        buckets.engine.dispose()
