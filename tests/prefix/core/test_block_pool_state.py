"""BlockPool against a plain-Python model of it, driven by hypothesis (both policies).

The model keeps the same state in the simplest form (lists and dicts, linear
scans instead of an OrderedDict or a lazily-cleaned heap) and predicts the
exact block ids every operation returns, so any divergence in free-list order,
victim choice, dedupe or ref counting shows up as a failing step.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from prefix.core.block_pool import Allocation, BlockPool
from prefix.core.hashing import ModelFingerprint, block_keys, chain_root
from prefix.errors import NoFreeBlocksError

NUM_BLOCKS = 10
ROOT = chain_root(ModelFingerprint("m", "d", "float32", 1, "rope"), "ns", "salt")
# Paths of up to 4 one-token blocks over a 2-letter alphabet: prefixes are shared often.
PATHS = st.lists(st.integers(0, 1), max_size=4)


@functools.cache
def _keys(path: tuple[int, ...]) -> tuple[bytes, ...]:
    return tuple(block_keys(ROOT, path, 1))


def keys_of(path: list[int]) -> list[bytes]:
    return list(_keys(tuple(path)))


PROBE_KEYS = [keys_of(list(p)) for n in range(4) for p in itertools.product(range(3), repeat=n)]


@dataclass
class Model:
    """The pool's contract, written out naively."""

    policy: str
    n: int = NUM_BLOCKS
    ref: list[int] = field(default_factory=lambda: [0] * NUM_BLOCKS)
    key: list[bytes | None] = field(default_factory=lambda: [None] * NUM_BLOCKS)
    parent: list[tuple[int, bytes] | None] = field(default_factory=lambda: [None] * NUM_BLOCKS)
    has_child: list[bool] = field(default_factory=lambda: [False] * NUM_BLOCKS)
    chains: list[int] = field(default_factory=lambda: [0] * NUM_BLOCKS)
    unkeyed_free: list[int] = field(default_factory=lambda: list(range(NUM_BLOCKS)))
    evictable: dict[int, tuple[int, int]] = field(default_factory=dict)  # block -> (base, tick)
    clock: int = 0
    tick: int = 0
    queries: int = 0
    hits: int = 0
    evictions: int = 0

    def lookup(self, key: bytes) -> int | None:
        return next((b for b in range(self.n) if self.key[b] == key), None)

    def match(self, keys: list[bytes]) -> list[int]:
        hits: list[int] = []
        for key in keys:
            block_id = self.lookup(key)
            if block_id is None:
                break
            hits.append(block_id)
        return hits

    def num_free(self) -> int:
        return sum(1 for r in self.ref if r == 0)

    def allocate_for_prefix(self, keys: list[bytes], num_new: int) -> Allocation | None:
        hits = self.match(keys)
        revived = {b for b in hits if self.ref[b] == 0}
        if num_new > self.num_free() - len(revived):
            return None
        for b in hits:
            self.evictable.pop(b, None)
            self.ref[b] += 1
        new = self.take(num_new)
        self.queries += len(keys)
        self.hits += len(hits)
        return Allocation(tuple(hits), tuple(new))

    def take(self, num: int) -> list[int]:
        taken = []
        for _ in range(num):
            if self.unkeyed_free:
                b = self.unkeyed_free.pop(0)
            else:
                b = min(self.evictable, key=self.victim_order)
                if self.policy == "coverage":
                    self.clock = max(self.clock, self.victim_order(b)[0])
                del self.evictable[b]
                self.key[b] = None
                self.parent[b] = None
                self.has_child[b] = False
                self.chains[b] = 0
                self.evictions += 1
            self.ref[b] = 1
            taken.append(b)
        return taken

    def victim_order(self, b: int) -> tuple[int, int]:
        base, tick = self.evictable[b]
        if self.policy == "lru":
            return (0, tick)
        return (base + self.chains[b], tick)

    def release(self, table: list[int]) -> None:
        for b in reversed(table):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                if self.key[b] is None:
                    self.unkeyed_free.append(b)
                else:
                    self.tick += 1
                    self.evictable[b] = (self.clock, self.tick)

    def valid_parent(self, b: int) -> int | None:
        link = self.parent[b]
        if link is None or self.key[link[0]] != link[1]:
            return None
        return link[0]

    def commit(self, b: int, key: bytes, parent: int | None) -> int:
        existing = self.lookup(key)
        if existing is not None:
            return existing
        self.key[b] = key
        self.chains[b] = 1
        if parent is not None and self.key[parent] is not None:
            parent_key = self.key[parent]
            assert parent_key is not None
            self.parent[b] = (parent, parent_key)
            if self.has_child[parent]:
                node: int | None = parent
                while node is not None:
                    self.chains[node] += 1
                    node = self.valid_parent(node)
            else:
                self.has_child[parent] = True
        return b


@dataclass
class Request:
    block_table: list[int]
    keys: list[bytes]  # keys of the blocks the request fills; a prefix of block_table
    num_committed: int = 0
    num_released: int = 0  # head blocks already released (sliding window)

    @property
    def held(self) -> list[int]:
        return self.block_table[self.num_released :]


class PoolMachine(RuleBasedStateMachine):
    policy = "lru"

    def __init__(self) -> None:
        super().__init__()
        self.pool = BlockPool(NUM_BLOCKS, self.policy)
        self.model = Model(self.policy)
        self.requests: list[Request] = []

    @rule(
        path=PATHS,
        num_private=st.integers(0, 1),
        num_commit=st.integers(0, 4),
        physical_parent=st.booleans(),
    )
    def admit(
        self, path: list[int], num_private: int, num_commit: int, physical_parent: bool
    ) -> None:
        """Admit a request and commit the first ``num_commit`` blocks it computes."""
        self._admit(path, num_private, num_commit, physical_parent)

    @rule(path=PATHS, num_private=st.integers(0, 1))
    def run_request(self, path: list[int], num_private: int) -> None:
        """The common case in one step: admit, compute and commit everything, finish."""
        request = self._admit(path, num_private, len(path), physical_parent=True)
        if request is not None:
            self.requests.pop()  # the one _admit just appended
            self.pool.release(request.held)
            self.model.release(request.held)

    def _admit(
        self, path: list[int], num_private: int, num_commit: int, physical_parent: bool
    ) -> Request | None:
        keys = keys_of(path)
        num_new = len(keys) - len(self.model.match(keys)) + num_private
        got = self.pool.allocate_for_prefix(keys, num_new)
        assert got == self.model.allocate_for_prefix(keys, num_new)
        if got is None:
            return None
        request = Request(got.block_table, keys, len(got.hit_block_ids))
        self.requests.append(request)
        self._commit(request, min(num_commit, len(keys) - request.num_committed), physical_parent)
        return request

    @precondition(lambda self: any(r.num_committed < len(r.keys) for r in self.requests))
    @rule(data=st.data(), physical_parent=st.booleans())
    def commit(self, data: st.DataObject, physical_parent: bool) -> None:
        """More blocks of a running request finished prefill, long after admission.

        Committing late lets two requests compute the same block (dedupe) and
        lets a chain be committed under a parent that is reclaimable, or gets
        evicted later, leaving gaps.
        """
        pending = [r for r in self.requests if r.num_committed < len(r.keys)]
        request = data.draw(st.sampled_from(pending))
        count = data.draw(st.integers(1, len(request.keys) - request.num_committed))
        self._commit(request, count, physical_parent)

    def _commit(self, request: Request, count: int, physical_parent: bool) -> None:
        # The parent is the request's own previous block or, as a caller may also
        # do, the id the previous commit returned (the cached copy).
        for i in range(request.num_committed, request.num_committed + count):
            block_id, key = request.block_table[i], request.keys[i]
            if i == 0:
                parent = None
            elif physical_parent:
                parent = request.block_table[i - 1]
            else:
                parent = self.model.lookup(request.keys[i - 1])
            expected = self.model.commit(block_id, key, parent)
            assert self.pool.commit(block_id, key, parent) == expected
        request.num_committed += count

    @rule(num_blocks=st.integers(0, 2))
    def allocate_unkeyed(self, num_blocks: int) -> None:
        if num_blocks > self.model.num_free():
            with pytest.raises(NoFreeBlocksError):
                self.pool.allocate(num_blocks)
            return
        table = self.pool.allocate(num_blocks)
        assert table == self.model.take(num_blocks)
        self.requests.append(Request(table, []))

    @rule(data=st.data())
    def pressure(self, data: st.DataObject) -> None:
        """A short request takes every unkeyed free block and evicts a few cached
        ones, then finishes: the victims, in order, must be the model's."""
        num_evict = data.draw(st.integers(1, 3)) if self.model.evictable else 0
        num_blocks = len(self.model.unkeyed_free) + min(num_evict, len(self.model.evictable))
        table = self.pool.allocate(num_blocks)
        assert table == self.model.take(num_blocks)
        self.pool.release(table)
        self.model.release(table)

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        request = self.requests.pop(data.draw(st.integers(0, len(self.requests) - 1)))
        self.pool.release(request.held)
        self.model.release(request.held)

    @precondition(lambda self: any(r.num_committed > r.num_released for r in self.requests))
    @rule(data=st.data())
    def release_head(self, data: st.DataObject) -> None:
        """Drop a request's oldest committed blocks while it keeps the rest (a sliding
        window): the chain's head can then be evicted while its tail stays cached,
        the A→B→C case of seed 000."""
        request = data.draw(
            st.sampled_from([r for r in self.requests if r.num_committed > r.num_released])
        )
        count = data.draw(st.integers(1, request.num_committed - request.num_released))
        head = request.block_table[request.num_released : request.num_released + count]
        self.pool.release(head)
        self.model.release(head)
        request.num_released += count

    @precondition(lambda self: any(r == 0 for r in self.model.ref))
    @rule(data=st.data())
    def release_a_free_block_fails(self, data: st.DataObject) -> None:
        free = [b for b in range(NUM_BLOCKS) if self.model.ref[b] == 0]
        with pytest.raises(ValueError):
            self.pool.release([data.draw(st.sampled_from(free))])

    @precondition(lambda self: any(r == 0 for r in self.model.ref))
    @rule(data=st.data(), path=PATHS.filter(bool))
    def commit_an_unpinned_block_fails(self, data: st.DataObject, path: list[int]) -> None:
        free = [b for b in range(NUM_BLOCKS) if self.model.ref[b] == 0]
        with pytest.raises(ValueError):
            self.pool.commit(data.draw(st.sampled_from(free)), keys_of(path)[-1], None)

    @rule(path=PATHS)
    def match(self, path: list[int]) -> None:
        keys = keys_of(path)
        hits = self.model.match(keys)
        self.model.queries += len(keys)
        self.model.hits += len(hits)
        assert self.pool.match_prefix(keys) == hits

    @invariant()
    def integrity(self) -> None:
        self.pool.check_integrity()

    @invariant()
    def agrees_with_model(self) -> None:
        pool, model = self.pool, self.model
        assert [pool.ref_count(b) for b in range(NUM_BLOCKS)] == model.ref
        assert [pool.key_of(b) for b in range(NUM_BLOCKS)] == model.key
        assert [pool.num_chains(b) for b in range(NUM_BLOCKS)] == model.chains
        assert [pool.parent_of(b) for b in range(NUM_BLOCKS)] == [
            model.valid_parent(b) for b in range(NUM_BLOCKS)
        ]
        assert pool.num_free_blocks == model.num_free()
        assert pool.num_unkeyed_free_blocks == len(model.unkeyed_free)
        assert pool.num_evictable_blocks == len(model.evictable)
        assert pool.num_used_blocks == NUM_BLOCKS - model.num_free()
        assert pool.num_cached_blocks == sum(k is not None for k in model.key)
        assert (pool.num_queries, pool.num_hit_blocks, pool.num_evictions) == (
            model.queries,
            model.hits,
            model.evictions,
        )

    @invariant()
    def lookups_agree_with_model(self) -> None:
        for keys in PROBE_KEYS:
            assert self.pool.match_prefix(keys, record=False) == self.model.match(keys)


class CoveragePoolMachine(PoolMachine):
    policy = "coverage"


_SETTINGS = settings(max_examples=100, stateful_step_count=40, deadline=None)
TestLRUPool = PoolMachine.TestCase
TestLRUPool.settings = _SETTINGS
TestCoveragePool = CoveragePoolMachine.TestCase
TestCoveragePool.settings = _SETTINGS
