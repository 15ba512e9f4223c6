"""Partition key -> :class:`~semantic.index.VectorIndex`: the semantic cache's one index
per (tenant, model, embedder, ...) partition (semantic/cache.py builds the key).

A search only ever looks inside one partition, so the partition is a hard filter:
one tenant's vectors are never candidates for another's question, whatever their
similarity (tests/semantic/test_partitioned_index.py checks both ways).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from numpy.typing import ArrayLike

from semantic.index import IndexImage, VectorIndex
from semantic.vectors import check_vectors


class PartitionedIndex:
    """Partition key -> :class:`VectorIndex`, created on first add, dropped when empty.

    Mutations are serialized by one lock (so a partition cannot be dropped while
    another thread adds to it); searches only take the lock of their partition.
    """

    def __init__(self, dim: int, **index_options: Any) -> None:
        self.dim = dim
        self._options = index_options
        self._indexes: dict[str, VectorIndex] = {}
        self._lock = threading.RLock()

    def add(self, partition: str, ids: ArrayLike, vectors: ArrayLike) -> None:
        vecs = check_vectors(vectors, self.dim)  # validate before creating a partition
        with self._lock:
            index = self._indexes.get(partition)
            if index is None:
                index = VectorIndex(self.dim, **self._options)
            index.add(ids, vecs)
            self._indexes[partition] = index

    def search(
        self, partition: str, vector: ArrayLike, k: int, *, blocking: bool = True
    ) -> list[tuple[int, float]]:
        index = self._indexes.get(partition)
        return [] if index is None else index.search(vector, k, blocking=blocking)

    def remove(self, partition: str, ids: Iterable[int]) -> int:
        with self._lock:
            index = self._indexes.get(partition)
            if index is None:
                return 0
            removed = index.remove(ids)
            if len(index) == 0:
                del self._indexes[partition]
            return removed

    def drop(self, partition: str) -> int:
        with self._lock:
            index = self._indexes.pop(partition, None)
            return 0 if index is None else len(index)

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()

    def empty_like(self) -> PartitionedIndex:
        """A new, empty index with this one's dimension and options."""
        return PartitionedIndex(self.dim, **self._options)

    def take_from(self, other: PartitionedIndex) -> None:
        """Hold ``other``'s partitions in place of everything held now, in one step:
        searches running meanwhile see either the old partitions or the new ones."""
        with self._lock, other._lock:
            self._indexes = dict(other._indexes)

    def images(self) -> dict[str, IndexImage]:
        """Every partition's :meth:`VectorIndex.image`, taken under the mutation lock."""
        with self._lock:
            return {key: index.image() for key, index in self._indexes.items()}

    def replace_all(self, images: Mapping[str, IndexImage]) -> None:
        """Load a snapshot's partitions in place of everything held now."""
        built = {
            key: VectorIndex.from_image(self.dim, image, **self._options)
            for key, image in images.items()
        }
        with self._lock:
            self._indexes = {key: index for key, index in built.items() if len(index)}

    def size(self, partition: str, *, blocking: bool = True) -> int:
        index = self._indexes.get(partition)
        return 0 if index is None else index.live_count(blocking=blocking)

    def get(self, partition: str) -> VectorIndex | None:
        return self._indexes.get(partition)

    def partitions(self) -> list[str]:
        with self._lock:
            return list(self._indexes)

    def __contains__(self, partition: object) -> bool:
        return partition in self._indexes

    def __len__(self) -> int:
        with self._lock:
            return sum(len(index) for index in self._indexes.values())
