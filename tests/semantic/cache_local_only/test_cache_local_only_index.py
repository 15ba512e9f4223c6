"""``lookup(..., local_only=True)`` and a partition index being changed: a writer
holding (or waiting for) the index's lock blocks a local lookup with ``index_busy``,
having written nothing; readers do not. Real embedder, real migrated SQLite file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from semantic.cache import SemanticCache
from tests.semantic.cache_local_only.support import OLD, TTL, blocked, stored_id
from tests.semantic.helpers import PARAPHRASE, STORED, chat


@contextmanager
def held_by_another_thread(lock: Callable[[], AbstractContextManager[Any]]) -> Iterator[None]:
    """``lock()`` entered by a second thread for the duration of the block."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock():
            taken.set()
            release.wait(10)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        assert taken.wait(5), "the other thread never took the lock"
        yield
    finally:
        release.set()
        thread.join(5)
    assert not thread.is_alive()


# -- 6. a partition index being changed -------------------------------------------------
def test_a_writer_on_the_partition_index_blocks_a_local_lookup_and_readers_do_not(
    cache: SemanticCache,
) -> None:
    stored_id(cache, STORED, OLD)
    query = chat(PARAPHRASE)
    index = cache.index.get(cache.partition_key(query))
    assert index is not None
    served = cache.lookup(query, TTL)
    assert cache.lookup(query, TTL, local_only=True) == served  # positive control

    with held_by_another_thread(index._lock.writing):
        assert blocked(cache, query) == "index_busy"
    with held_by_another_thread(index._lock.reading):
        assert cache.lookup(query, TTL, local_only=True) == served
    assert cache.lookup(query, TTL, local_only=True) == served


def test_a_waiting_writer_holds_local_lookups_back(cache: SemanticCache) -> None:
    stored_id(cache, STORED, OLD)
    query = chat(PARAPHRASE)
    index = cache.index.get(cache.partition_key(query))
    assert index is not None
    served = cache.lookup(query, TTL)
    lock = index._lock

    with held_by_another_thread(lock.reading):
        done = threading.Event()

        def write() -> None:
            with lock.writing():
                done.set()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        deadline = time.monotonic() + 5
        while not lock._waiting_writers and time.monotonic() < deadline:
            time.sleep(0.001)
        assert lock._waiting_writers == 1 and not done.is_set()
        assert blocked(cache, query) == "index_busy"  # a stream of reads cannot starve it
    writer.join(5)
    assert done.is_set()
    assert cache.lookup(query, TTL, local_only=True) == served
