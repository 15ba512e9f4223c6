"""Eviction policies: which cached, unpinned block to overwrite next.

A policy only ever sees *reclaimable* blocks: cached (keyed) blocks whose ref
count is 0. Pinned blocks are never in it, so no policy can hand out a block an
active request is reading (seed 000). Free blocks without a key are not in it
either: the pool hands those out first, because reusing them loses nothing.

Two policies:

* ``LRUPolicy`` ("lru"): least recently released first. Because the pool
  releases a request's blocks tail-first and a request always holds its whole
  chain, an ancestor is always released after its descendants, so plain LRU
  already evicts a chain from its tail.
* ``CoverageLRUPolicy`` ("coverage"): values a block by the chains that pass
  through it, so a short prefix shared by many prompts outlives a long cold
  tail that one prompt used, even when that tail is more recent (seed 000:
  "大量只命中冷门长后缀的块，可能不如一个大家都使用的短公共前缀有用").
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import ClassVar

__all__ = ["POLICIES", "CoverageLRUPolicy", "EvictionPolicy", "LRUPolicy", "make_policy"]


class EvictionPolicy(ABC):
    """The set of reclaimable blocks, and the order in which they are evicted."""

    name: ClassVar[str]

    @abstractmethod
    def add(self, block_id: int) -> None:
        """``block_id`` became reclaimable; it is now the most recently used."""

    @abstractmethod
    def remove(self, block_id: int) -> None:
        """``block_id`` leaves the reclaimable set (pinned again); KeyError if absent."""

    @abstractmethod
    def pop_victim(self) -> int:
        """Remove and return the block to evict; IndexError if there is none."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __contains__(self, block_id: object) -> bool: ...

    @abstractmethod
    def __iter__(self) -> Iterator[int]:
        """The reclaimable blocks (in eviction order where the policy keeps one)."""

    def on_chain_change(self, block_id: int, num_chains: int) -> None:  # noqa: B027
        """The pool's count of cached chains through ``block_id`` is now ``num_chains``.

        Called for every block whose count changes, reclaimable or not (0 once
        its key is evicted). Policies that ignore structure need not override.
        """

    def check_integrity(self, num_chains: Mapping[int, int]) -> None:  # noqa: B027
        """Raise AssertionError if internal state disagrees with itself or with the
        pool's ``num_chains`` (block id -> count, for every block with a count)."""


class LRUPolicy(EvictionPolicy):
    """Least recently used first; every operation O(1)."""

    name: ClassVar[str] = "lru"

    def __init__(self) -> None:
        self._order: OrderedDict[int, None] = OrderedDict()  # oldest first

    def add(self, block_id: int) -> None:
        if block_id in self._order:
            raise ValueError(f"block {block_id} is already reclaimable")
        self._order[block_id] = None

    def remove(self, block_id: int) -> None:
        try:
            del self._order[block_id]
        except KeyError:
            raise KeyError(f"block {block_id} is not reclaimable") from None

    def pop_victim(self) -> int:
        if not self._order:
            raise IndexError("no reclaimable block to evict")
        block_id, _ = self._order.popitem(last=False)
        return block_id

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, block_id: object) -> bool:
        return block_id in self._order

    def __iter__(self) -> Iterator[int]:
        return iter(self._order)


class CoverageLRUPolicy(EvictionPolicy):
    """Fewest chains first, with ageing; LRU among equals. O(log n) per operation.

    Value. ``num_chains`` (kept by the pool) is 1 for a cached block plus 1 for
    every further child committed under it or under any descendant while it
    stays cached: the number of prompt chains that have branched through it.
    It does not drop when a branch is evicted. A count of the *currently*
    cached descendants would be pointless here: with tail-first release the
    oldest reclaimable block is always a leaf, every leaf has the same minimal
    count, so the policy would make exactly LRU's choices. Remembering the
    branches is what lets a shared prefix outlive its (older) private
    suffixes and a more recent cold tail.

    A parent's count is never below a child's and a parent is released after
    its children, so leaves still go before their parents.

    Ageing. Priority = clock + num_chains, where clock is the priority of the
    last victim at the moment the block became reclaimable (GreedyDual /
    LFU with dynamic ageing). Without it a prefix that was popular once would
    outlive every newer single chain forever; with it, a block of value v
    survives about v "generations" of evictions after its last use.

    Heap with lazy deletion: ``_entries`` holds each member's live
    ``(priority, tick)``; heap items that do not match it are stale and are
    skipped on pop, and the heap is rebuilt when stale items dominate.
    """

    name: ClassVar[str] = "coverage"

    def __init__(self) -> None:
        self._num_chains: dict[int, int] = {}  # every block the pool reported, member or not
        self._entries: dict[int, tuple[int, int, int]] = {}  # member -> (priority, tick, base)
        self._heap: list[tuple[int, int, int]] = []  # (priority, tick, block_id)
        self._tick = 0  # increases on every add: LRU order among equal priorities
        self._clock = 0

    def add(self, block_id: int) -> None:
        if block_id in self._entries:
            raise ValueError(f"block {block_id} is already reclaimable")
        base = self._clock
        self._tick += 1
        self._push(block_id, base + self._num_chains.get(block_id, 0), self._tick, base)

    def remove(self, block_id: int) -> None:
        try:
            del self._entries[block_id]
        except KeyError:
            raise KeyError(f"block {block_id} is not reclaimable") from None
        self._maybe_compact()

    def pop_victim(self) -> int:
        while self._heap:
            priority, tick, block_id = heapq.heappop(self._heap)
            entry = self._entries.get(block_id)
            if entry is not None and entry[:2] == (priority, tick):
                del self._entries[block_id]
                self._clock = max(self._clock, priority)
                return block_id
        raise IndexError("no reclaimable block to evict")

    def on_chain_change(self, block_id: int, num_chains: int) -> None:
        if num_chains:
            self._num_chains[block_id] = num_chains
        else:
            self._num_chains.pop(block_id, None)
        entry = self._entries.get(block_id)
        if entry is not None:
            _, tick, base = entry
            # Keep the tick and base: a value change is not a use.
            self._push(block_id, base + num_chains, tick, base)
            self._maybe_compact()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, block_id: object) -> bool:
        return block_id in self._entries

    def __iter__(self) -> Iterator[int]:
        return iter(self._entries)

    def check_integrity(self, num_chains: Mapping[int, int]) -> None:
        assert self._num_chains == dict(num_chains), (
            f"coverage: recorded chain counts {self._num_chains} != pool's {dict(num_chains)}"
        )
        live = set(self._heap)
        for block_id, (priority, tick, base) in self._entries.items():
            value = self._num_chains.get(block_id, 0)
            assert priority == base + value, (
                f"coverage: block {block_id} has priority {priority}, expected {base} + {value}"
            )
            assert base <= self._clock, f"coverage: block {block_id} has base {base} > clock"
            assert (priority, tick, block_id) in live, f"coverage: block {block_id} not in heap"

    def _push(self, block_id: int, priority: int, tick: int, base: int) -> None:
        self._entries[block_id] = (priority, tick, base)
        heapq.heappush(self._heap, (priority, tick, block_id))

    def _maybe_compact(self) -> None:
        if len(self._heap) > 2 * len(self._entries) + 64:
            self._heap = [(p, t, b) for b, (p, t, _) in self._entries.items()]
            heapq.heapify(self._heap)


POLICIES: dict[str, type[EvictionPolicy]] = {
    LRUPolicy.name: LRUPolicy,
    CoverageLRUPolicy.name: CoverageLRUPolicy,
}


def make_policy(name: str) -> EvictionPolicy:
    """A fresh, empty policy by name: "lru" or "coverage"."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown eviction policy {name!r}; known: {sorted(POLICIES)}") from None
