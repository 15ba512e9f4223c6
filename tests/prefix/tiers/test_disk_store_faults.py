"""The disk store's faults below the store itself (a review, session 41): one
unreadable record is a miss for its block alone, and a capacity a full filesystem
lowered grows back as room returns."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from prefix.errors import TierUnavailableError
from prefix.tiers.disk_store import DiskBlockStore
from tests.prefix.tiers.test_disk_store import NS, key, record


def test_one_unreadable_file_is_a_miss_for_its_block_alone(tmp_path: Path) -> None:
    """A directory where a record should be (a botched copy or restore) failed the whole
    read batch, the intact blocks before it included, and never healed (a review,
    session 41); now only its own key misses."""
    size = len(record(0))
    store = DiskBlockStore(tmp_path, 10 * size, namespace=NS)
    for i in range(3):
        store.put(key(i), record(i))
    bad = store.directory / key(1).hex()[:2] / f"{key(1).hex()}.kvb"
    bad.unlink()
    bad.mkdir()  # read: IsADirectoryError
    assert store.get_many([key(0), key(1), key(2)]) == [record(0), None, record(2)]
    assert store.stats()["errors"] >= 1
    with pytest.raises(TierUnavailableError):  # the control: all unreadable is a failure
        store.get_many([key(1)])


def test_a_capacity_a_full_filesystem_lowered_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A neighbour that filled the volume once left the store at a tenth of its size
    until restart (a review, session 41); it grows back as the free space allows."""
    import prefix.tiers.disk_store as disk_store

    size = len(record(0))
    store = DiskBlockStore(tmp_path, 20 * size, namespace=NS)
    for i in range(20):
        store.put(key(i), record(i))
    assert store._shrink_for(size)  # what an ENOSPC does
    lowered = store.capacity_bytes
    assert lowered < 20 * size
    monkeypatch.setattr(disk_store, "REGROW_EVERY_S", 0.0)
    usage = shutil.disk_usage(tmp_path)
    tight = usage._replace(free=size)  # still full: no more room than before
    monkeypatch.setattr(disk_store.shutil, "disk_usage", lambda path: tight)
    store.put(key(30), record(30))
    assert store.capacity_bytes == lowered
    roomy = usage._replace(free=10**12)  # the neighbour is gone
    monkeypatch.setattr(disk_store.shutil, "disk_usage", lambda path: roomy)
    store.put(key(31), record(31))
    assert store.capacity_bytes == store.configured_bytes == 20 * size
    assert store.stats()["capacity_bytes"] == 20 * size


def test_an_unreadable_record_among_plain_misses_is_no_store_failure(tmp_path: Path) -> None:
    size = len(record(0))
    store = DiskBlockStore(tmp_path, 10 * size, namespace=NS)
    store.put(key(1), record(1))
    bad = store.directory / key(1).hex()[:2] / f"{key(1).hex()}.kvb"
    bad.unlink()
    bad.mkdir()
    assert store.get_many([key(1), key(5)]) == [None, None]  # one failed, one not there
