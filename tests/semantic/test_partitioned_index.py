"""The partition is a hard filter (semantic/partitioned_index.py): positive control
in the same partition beside every negative one in another."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from semantic.errors import InvalidVectorError
from semantic.partitioned_index import PartitionedIndex
from tests.semantic.helpers import unit_vectors

DIM = 16


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    return unit_vectors(rng, n, DIM)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_partitions_are_hard_filters(rng: np.random.Generator) -> None:
    index = PartitionedIndex(DIM)
    v = unit(rng, 1)
    index.add("tenant-a", [1], v)
    assert index.search("tenant-a", v, k=5)[0][0] == 1
    assert index.search("tenant-b", v, k=5) == []  # the identical vector, other partition
    index.add("tenant-b", [2], v)
    assert [i for i, _ in index.search("tenant-b", v, k=5)] == [2]
    assert len(index) == 2 and sorted(index.partitions()) == ["tenant-a", "tenant-b"]
    assert index.remove("tenant-a", [1]) == 1
    assert "tenant-a" not in index  # empty partitions are dropped
    assert index.drop("tenant-b") == 1 and len(index) == 0
    with pytest.raises(InvalidVectorError):
        index.add("tenant-c", [3], np.full(DIM, np.nan))
    assert "tenant-c" not in index


def test_concurrent_adds_and_searches(rng: np.random.Generator) -> None:
    index = PartitionedIndex(DIM, approx_threshold=200)
    vecs = unit(rng, 400)
    errors: list[BaseException] = []

    def writer(offset: int) -> None:
        try:
            for i in range(offset, 400, 4):
                index.add("p", [i], vecs[i])
                if i % 3 == 0:
                    index.remove("p", [i])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for i in range(300):
                for entry_id, _ in index.search("p", vecs[i % 400], k=3):
                    assert 0 <= entry_id < 400
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(o,)) for o in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(index) == sum(1 for i in range(400) if i % 3)
