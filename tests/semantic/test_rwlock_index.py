"""The vector index's searches share its readers-writer lock: a memory-only search
never waits for a change (it raises WouldBlockError), runs beside other searches, and
a blocking search waits for the change instead.
"""

from __future__ import annotations

import numpy as np
import pytest

from semantic.errors import WouldBlockError
from semantic.index import VectorIndex
from tests.semantic.rwlock_support import BLOCKED, Holder, Worker, run


def test_index_searches_share_the_lock_and_never_wait_for_a_change() -> None:
    dim = 16
    rng = np.random.default_rng(11)
    vecs = rng.standard_normal((8, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = VectorIndex(dim, use_gpu=False)
    index.add(np.arange(100, 108), vecs)
    lock = index._lock

    # Another thread is changing the index: a memory-only lookup does not wait.
    writer = Holder(lock, "write")
    try:
        writer.wait_inside()
        with pytest.raises(WouldBlockError) as raised:
            index.search(vecs[3], k=2, blocking=False)
        assert raised.value.reason == "index_busy"
        with pytest.raises(WouldBlockError):
            index.live_count(blocking=False)
    finally:
        writer.release()

    # Another thread is searching (holds it to read): the search runs beside it.
    reader = Holder(lock, "read")
    try:
        reader.wait_inside()
        best = index.search(vecs[3], k=2, blocking=False)
        cosines = vecs @ vecs[3]
        expected = [(100 + int(i), float(cosines[i])) for i in np.argsort(-cosines)[:2]]
        assert [entry_id for entry_id, _ in best] == [103, expected[1][0]]
        assert [score for _, score in best] == pytest.approx([1.0, expected[1][1]], abs=1e-5)
        assert index.live_count(blocking=False) == 8
        assert run(lambda: index.search(vecs[6], k=1, blocking=False))[0][0] == 106
        lock.check_integrity()
    finally:
        reader.release()

    # And a blocking search waits for the change instead of raising.
    writer = Holder(lock, "write")
    try:
        writer.wait_inside()
        searching = Worker(lambda: index.search(vecs[5], k=1))
        searching.start()
        searching.join(BLOCKED)
        assert searching.is_alive()  # waiting for the writer
    finally:
        writer.release()
    assert searching.finish()[0][0] == 105
    lock.check_integrity()
