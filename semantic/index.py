"""FAISS inner-product indexes with int64 ids, one per partition.

A :class:`VectorIndex` holds the unit vectors of one partition; the inner
product of unit vectors is the cosine similarity. It starts as an exact flat
index and switches to an approximate one once it holds more than
``approx_threshold`` vectors, because exact search grows linearly (about 10 ms per
query at 100k x 384 on one core, 100+ ms at 1M). The approximate index is IVF-Flat
by default (``IndexIVFFlat``, ``METRIC_INNER_PRODUCT``, up to 1,024 lists trained
on the partition's own vectors, ``nprobe`` lists searched), retrained when the
partition has grown ``IVF_GROWTH`` times since; HNSW (``IndexHNSWFlat``) remains
available (``approx="hnsw"``). Measured at 1M entries (``bench/semantic_index_sweep.py``
and issue 15): IVF with 1,024 lists reaches recall@1 1.000 at p50 0.95-1.8 ms and
trains in ~30 s; HNSW (M 32, efConstruction 40) had recall@1 0.52-0.61 at efSearch
128-256 and took minutes to build, and at 100k an HNSW build with efConstruction 80
did not finish within 4 minutes on two busy cores. On a machine with faiss-gpu and a CUDA device the
index is a GPU flat index at every size (exact search on a GPU is fast).

Removal works the same way for every kind of index: HNSW and GPU indexes cannot
remove vectors, so the faiss index is addressed by position, this class maps
positions to entry ids, and a removed (or replaced) vector becomes a tombstone:
its bit is cleared in a bitmap that the search passes to faiss as an
``IDSelectorBitmap`` (or, on a GPU, that filters an over-fetched result). When
tombstones exceed ``compact_fraction`` of the index it is rebuilt from the live
vectors. :class:`~semantic.partitioned_index.PartitionedIndex` maps partition keys to these
indexes; a search only ever looks inside one partition (the partition is a hard filter).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np
from numpy.typing import ArrayLike, NDArray

from semantic.errors import InvalidVectorError, WouldBlockError
from semantic.faiss_kinds import (
    APPROX_KINDS,
    DEFAULT_NPROBE,
    IVF_GROWTH,
    gpu_available,
    new_faiss_index,
)
from semantic.rwlock import ReadWriteLock
from semantic.vectors import check_ids, check_vectors

__all__ = ["IndexImage", "VectorIndex", "check_vectors", "gpu_available"]

DEFAULT_APPROX_THRESHOLD = 20_000
# faiss's bundled type stubs lag its SWIG API (search parameters, selectors).
_faiss: Any = faiss

# OpenMP threads: a single-query search runs on one thread (the gateway's
# parallelism is across requests; with the cores busy, a 2-thread search of 20k
# vectors took 9 ms instead of 1 ms here); adds and rebuilds use all of them.
# The setting is per calling thread in libgomp, so each call sets what it needs.
_BUILD_THREADS = max(1, faiss.omp_get_max_threads())


@dataclass(frozen=True)
class IndexImage:
    """One partition index as bytes and arrays (:mod:`semantic.snapshot` writes it)."""

    kind: str
    faiss_bytes: NDArray[np.uint8]
    pos_ids: NDArray[np.int64]  # faiss position -> entry id, dead positions included
    live: NDArray[np.uint8]  # the live bitmap over positions (little-endian bits)
    trained_on: int


class VectorIndex:
    """One partition's vectors: exact while small, HNSW above ``approx_threshold``.

    Thread-safe: searches share the index's lock, changes take it alone (``semantic.rwlock``).
    """

    def __init__(
        self,
        dim: int,
        *,
        approx_threshold: int = DEFAULT_APPROX_THRESHOLD,
        approx: str = "ivf",
        nprobe: int = DEFAULT_NPROBE,
        hnsw_m: int = 32,
        ef_construction: int = 40,
        ef_search: int = 128,
        compact_fraction: float = 0.25,
        use_gpu: bool | None = None,
    ) -> None:
        if dim < 1 or approx_threshold < 1 or not 0 < compact_fraction <= 1:
            raise ValueError("dim and approx_threshold must be >= 1, compact_fraction in (0, 1]")
        if approx not in APPROX_KINDS or nprobe < 1:
            raise ValueError(f"approx must be one of {APPROX_KINDS}, nprobe >= 1")
        self.dim = dim
        self.approx_threshold = approx_threshold
        self.approx = approx
        self.nprobe = nprobe
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.compact_fraction = compact_fraction
        self.use_gpu = gpu_available() if use_gpu is None else use_gpu
        # Searches share it, changes take it alone (semantic/rwlock.py).
        self._lock = ReadWriteLock()
        self._reset("flat")

    # -- state -------------------------------------------------------------------
    def _reset(self, kind: str, train: NDArray[np.float32] | None = None) -> None:
        self._index = self._new_index(kind, train)
        self.trained_on = 0 if train is None else train.shape[0]
        self._pos_ids: list[int] = []  # faiss position -> entry id (also dead positions)
        self._where: dict[int, int] = {}  # live entry id -> faiss position
        self._bits = np.zeros(64, dtype=np.uint8)  # live bitmap over positions, little-endian
        self._dead = 0

    def _new_index(self, kind: str, train: NDArray[np.float32] | None) -> Any:
        self.kind, index = new_faiss_index(
            kind,
            self.dim,
            train,
            use_gpu=self.use_gpu,
            nprobe=self.nprobe,
            hnsw_m=self.hnsw_m,
            ef_construction=self.ef_construction,
            ef_search=self.ef_search,
        )
        return index

    def _set_bits(self, start: int, count: int) -> None:
        end = start + count
        if (end + 7) // 8 > self._bits.shape[0]:
            grown = np.zeros(max((end + 7) // 8, 2 * self._bits.shape[0]), dtype=np.uint8)
            grown[: self._bits.shape[0]] = self._bits
            self._bits = grown
        if count <= 64:
            for pos in range(start, end):
                self._bits[pos >> 3] |= np.uint8(1 << (pos & 7))
            return
        flags = np.unpackbits(self._bits, bitorder="little")  # bulk adds: vectorized
        flags[start:end] = 1
        self._bits = np.packbits(flags, bitorder="little")

    def _kill(self, pos: int) -> None:
        self._bits[pos >> 3] &= np.uint8(~(1 << (pos & 7)) & 0xFF)
        self._dead += 1

    def _is_live(self, pos: int) -> bool:
        return bool(self._bits[pos >> 3] & (1 << (pos & 7)))

    # -- public API --------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock.reading():
            return len(self._where)

    def __contains__(self, entry_id: object) -> bool:
        with self._lock.reading():
            return entry_id in self._where

    @property
    def tombstones(self) -> int:
        with self._lock.reading():
            return self._dead

    def ids(self) -> list[int]:
        with self._lock.reading():
            return sorted(self._where)

    def add(self, ids: ArrayLike, vectors: ArrayLike) -> None:
        """Add (or replace: upsert by id) vectors. Validates everything before mutating."""
        vecs = check_vectors(vectors, self.dim)
        id_list = check_ids(ids, vecs.shape[0])
        if not id_list:
            return
        with self._lock.writing():
            faiss.omp_set_num_threads(_BUILD_THREADS)
            for entry_id in id_list:
                old = self._where.get(entry_id)
                if old is not None:
                    self._kill(old)
            start = len(self._pos_ids)
            self._index.add(vecs)
            self._pos_ids.extend(id_list)
            self._set_bits(start, len(id_list))
            for offset, entry_id in enumerate(id_list):
                self._where[entry_id] = start + offset
            self._maybe_rebuild()

    def remove(self, ids: Iterable[int]) -> int:
        """Remove ids (unknown ids are ignored); returns how many were present."""
        with self._lock.writing():
            removed = 0
            for entry_id in ids:
                pos = self._where.pop(int(entry_id), None)
                if pos is not None:
                    self._kill(pos)
                    removed += 1
            if removed:
                self._maybe_rebuild()
            return removed

    def live_count(self, *, blocking: bool = True) -> int:
        """``len(self)``; ``blocking=False`` raises ``WouldBlockError`` rather than wait
        for a change in progress (an add or a rebuild may hold the lock for long)."""
        with self._locked(blocking):
            return len(self._where)

    @contextmanager
    def _locked(self, blocking: bool) -> Iterator[None]:
        """Shared with other searches; ``blocking=False``: never wait for a change."""
        with self._lock.reading(blocking) as taken:
            if not taken:
                raise WouldBlockError("the partition's index is being changed", reason="index_busy")
            yield

    def search(
        self, vector: ArrayLike, k: int, *, blocking: bool = True
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest live entries as ``(entry_id, cosine)``, best first
        (``blocking``: as for :meth:`live_count`)."""
        if k < 1:
            raise ValueError("k must be >= 1")
        query = check_vectors(vector, self.dim)
        if query.shape[0] != 1:
            raise InvalidVectorError("search takes one query vector")
        with self._locked(blocking):
            live = len(self._where)
            if live == 0:
                return []
            faiss.omp_set_num_threads(1)
            want = min(k, live)
            if self._dead and self.kind == "gpu-flat":
                # GPU indexes take no selector: over-fetch by the tombstone count.
                fetch = min(len(self._pos_ids), want + self._dead)
                scores, positions = self._index.search(query, fetch)
            else:
                scores, positions = self._index.search(query, want, params=self._params(want))
            out: list[tuple[int, float]] = []
            for score, pos in zip(scores[0], positions[0], strict=True):
                if pos < 0 or not self._is_live(int(pos)):
                    continue
                out.append((self._pos_ids[int(pos)], min(1.0, float(score))))
                if len(out) == want:
                    break
            return out

    def _params(self, k: int) -> Any:
        selector = (
            faiss.IDSelectorBitmap(len(self._pos_ids), faiss.swig_ptr(self._bits))
            if self._dead
            else None
        )
        if self.kind == "hnsw":
            return _faiss.SearchParametersHNSW(sel=selector, efSearch=max(self.ef_search, k))
        if self.kind == "ivf":
            return _faiss.SearchParametersIVF(sel=selector, nprobe=self.nprobe)
        return _faiss.SearchParameters(sel=selector) if selector is not None else None

    # -- snapshots ---------------------------------------------------------------
    def image(self) -> IndexImage:
        """A consistent copy of this index for a snapshot file."""
        with self._lock.reading():
            index = faiss.index_gpu_to_cpu(self._index) if self.kind == "gpu-flat" else self._index
            n = len(self._pos_ids)
            return IndexImage(
                "flat" if self.kind == "gpu-flat" else self.kind,
                faiss.serialize_index(index),
                np.asarray(self._pos_ids, dtype=np.int64),
                self._bits[: (n + 7) // 8].copy(),
                self.trained_on,
            )

    @classmethod
    def from_image(cls, dim: int, image: IndexImage, **options: Any) -> VectorIndex:
        """The index an :meth:`image` was taken of (raises ``ValueError`` if it does not fit)."""
        index = cls(dim, **options)
        loaded: Any = faiss.deserialize_index(np.ascontiguousarray(image.faiss_bytes))
        n = image.pos_ids.shape[0]
        if loaded.d != dim or loaded.ntotal != n or image.live.shape[0] != (n + 7) // 8:
            raise ValueError(f"index image does not fit: d={loaded.d} ntotal={loaded.ntotal} n={n}")
        live = np.unpackbits(image.live, bitorder="little")[:n].astype(bool)
        with index._lock.writing():
            index.kind, index._index, index.trained_on = image.kind, loaded, image.trained_on
            index._pos_ids = image.pos_ids.tolist()
            positions = np.flatnonzero(live)
            index._where = dict(
                zip(image.pos_ids[positions].tolist(), positions.tolist(), strict=True)
            )
            if len(index._where) != positions.shape[0]:
                raise ValueError("index image has an entry id live at two positions")
            index._bits = np.zeros(max(64, image.live.shape[0]), dtype=np.uint8)
            index._bits[: image.live.shape[0]] = image.live
            index._dead = n - positions.shape[0]
            if image.kind == "ivf":
                loaded.nprobe = index.nprobe
            elif image.kind == "hnsw":
                loaded.hnsw.efSearch = index.ef_search
            if index.use_gpu:  # a CPU image on a GPU machine: rebuilt as a GPU index
                index._rebuild("flat")
            else:
                index._maybe_rebuild()
        return index

    # -- rebuilds ----------------------------------------------------------------
    def _maybe_rebuild(self) -> None:
        live = len(self._where)
        if self.kind == "flat" and live > self.approx_threshold:
            self._rebuild(self.approx)
        elif self.kind == "ivf" and live > IVF_GROWTH * self.trained_on:
            self._rebuild("ivf")  # more lists for the bigger partition
        elif self._dead > self._max_tombstones():
            # Hysteresis: fall back to flat only well below the switch point.
            back_to_flat = self.kind in APPROX_KINDS and live < self.approx_threshold // 2
            self._rebuild("flat" if back_to_flat else self.kind)

    def _max_tombstones(self) -> float:
        allowed = self.compact_fraction * len(self._pos_ids)
        # A GPU search over-fetches by the tombstone count, and GPU k is capped at 2048.
        return min(allowed, 1024) if self.kind == "gpu-flat" else allowed

    def _rebuild(self, kind: str) -> None:
        faiss.omp_set_num_threads(_BUILD_THREADS)
        items = sorted(self._where.items(), key=lambda item: item[1])
        vecs = np.empty((0, self.dim), dtype=np.float32)
        if items:
            everything = self._index.reconstruct_n(0, len(self._pos_ids))
            vecs = np.ascontiguousarray(everything[[pos for _, pos in items]])
        if kind == "ivf" and not items:
            kind = "flat"  # nothing to train on; the next growth switches again
        self._reset(kind, vecs if kind == "ivf" else None)
        if items:
            self._index.add(vecs)
            self._pos_ids = [entry_id for entry_id, _ in items]
            self._where = {entry_id: pos for pos, entry_id in enumerate(self._pos_ids)}
            self._set_bits(0, len(items))
