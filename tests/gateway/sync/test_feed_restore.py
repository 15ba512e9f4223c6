"""The database goes back in time under running replicas (a restore to an earlier
point, a failover to a standby that lost its last commits): the change log's seqs and
the entry ids are handed out again. A feed whose position is above the log's head
used to read nothing new ever after, and its index kept the old question's vector
under an id whose row now holds another question and answer: a wrong answer served.
Now the feed notices its position above the head and rebuilds from the entries table.
Real PostgreSQL and SQLite; the restore is simulated by deleting the last writes and
setting the sequences back, as a restore would leave them."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from tests.gateway.sync.feed_support import feeding, replicas, store, wait_for
from tests.semantic.helpers import chat

HOURS = "What are your opening hours?"
REFUND = "What is your refund policy?"
BACKENDS = ["sqlite_url", pytest.param("pg_url", marks=pytest.mark.postgres)]


def go_back(cache: SemanticCache, entry_id: int) -> None:
    """Undo the last entry and its log rows, sequences included."""
    with cache.entries.engine.begin() as conn:
        conn.execute(text("DELETE FROM semantic_entries WHERE id = :i"), {"i": entry_id})
        seq = conn.execute(
            text("SELECT min(seq) FROM cache_changes WHERE entry_id = :i"), {"i": entry_id}
        ).scalar_one()
        conn.execute(text("DELETE FROM cache_changes WHERE seq >= :s"), {"s": seq})
        if conn.dialect.name == "postgresql":
            for table, column, value in (
                ("semantic_entries", "id", entry_id - 1),
                ("cache_changes", "seq", seq - 1),
            ):
                name = f"pg_get_serial_sequence('{table}', '{column}')"
                conn.execute(
                    text(f"SELECT setval({name}, :v, :called)"),
                    {"v": max(value, 1), "called": value >= 1},
                )
        else:
            for table, value in (("semantic_entries", entry_id - 1), ("cache_changes", seq - 1)):
                conn.execute(
                    text("UPDATE sqlite_sequence SET seq = :v WHERE name = :t"),
                    {"v": value, "t": table},
                )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_feed_above_the_restored_log_rebuilds(
    embedder: Embedder, backend: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(backend))
    with replicas(url, embedder) as (a, b), feeding(url, b, poll_seconds=0.1) as feed:
        hours = store(a, chat(HOURS), "Nine to five.")
        assert wait_for(lambda: b.lookup(chat(HOURS)).hit, timeout=5.0) is not None
        go_back(a, hours)
        refund = store(a, chat(REFUND), "Thirty days.")
        assert refund == hours  # the id is handed out again, to another question
        assert wait_for(lambda: feed.stats()["rebuilds"] >= 1, timeout=5.0) is not None
        asked = b.lookup(chat(HOURS))
        assert not asked.hit  # not the refund answer under the old question's vector
        served = b.lookup(chat(REFUND))  # the control: the new row is indexed as itself
        assert served.hit and served.answer is not None
        assert served.answer["choices"][0]["message"]["content"] == "Thirty days."


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pruned_log_is_not_taken_for_a_restore(
    embedder: Embedder, backend: str, request: pytest.FixtureRequest
) -> None:
    """Pruning empties the log but never lowers its sequence: no rebuild for that."""
    url = str(request.getfixturevalue(backend))
    with replicas(url, embedder) as (a, b), feeding(url, b, poll_seconds=0.1) as feed:
        store(a, chat(HOURS))
        assert wait_for(lambda: b.lookup(chat(HOURS)).hit, timeout=5.0) is not None
        with a.entries.engine.begin() as conn:
            conn.execute(text("DELETE FROM cache_changes"))
        polls = feed.stats()["polls"]
        assert wait_for(lambda: feed.stats()["polls"] >= polls + 5, timeout=5.0) is not None
        assert feed.stats()["rebuilds"] == 0
