"""The consistent-hash ring that picks an engine replica (gateway/proxy/hash_ring.py):
deterministic, roughly even, and stable when a node leaves or joins (only about
1/N of the keys move, never between two nodes that both stayed).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.proxy.hash_ring import HashRing

NODES = ["http://10.0.0.1:8001", "http://10.0.0.2:8001", "http://10.0.0.3:8001"]
KEYS = [f"tenant-{i % 7}|model|system prompt number {i}".encode() for i in range(10_000)]


def owners(ring: HashRing) -> list[str]:
    return [ring.owner(k) for k in KEYS]


def test_deterministic_and_independent_of_node_order() -> None:
    a = HashRing(NODES)
    b = HashRing(list(reversed(NODES)))
    assert owners(a) == owners(HashRing(NODES))
    # Gateways configured with the same URLs in another order agree on every key.
    assert owners(a) == owners(b)
    assert [a.preference(k) for k in KEYS[:500]] == [b.preference(k) for k in KEYS[:500]]


def test_distribution_is_roughly_even_with_64_vnodes() -> None:
    counts = Counter(owners(HashRing(NODES, vnodes=64)))
    assert set(counts) == set(NODES)
    for node in NODES:
        assert 0.15 * len(KEYS) <= counts[node] <= 0.55 * len(KEYS), counts


def test_removing_a_node_moves_only_its_keys() -> None:
    before = owners(HashRing(NODES))
    after = owners(HashRing(NODES[:2]))  # the third replica is gone
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert moved, "the removed node owned no keys"
    assert all(b == NODES[2] for b, _ in moved)  # nobody else's keys moved
    assert len(moved) == before.count(NODES[2])  # and every one of its keys did
    assert len(moved) < 0.55 * len(KEYS)


def test_adding_a_node_takes_about_a_quarter() -> None:
    four = [*NODES, "http://10.0.0.4:8001"]
    before = owners(HashRing(NODES))
    after = owners(HashRing(four))
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert all(a == four[3] for _, a in moved)  # keys only move to the newcomer
    assert 0.10 * len(KEYS) <= len(moved) <= 0.40 * len(KEYS)


def test_preference_is_distinct_complete_and_follows_the_ring() -> None:
    ring = HashRing(NODES)
    without = {gone: HashRing([n for n in NODES if n != gone]) for gone in NODES}
    for key in KEYS[:2000]:
        order = ring.preference(key)
        assert sorted(order) == sorted(NODES)
        assert order[0] == ring.owner(key)
        # The fallback is the node that owns the key once the first choice is gone.
        assert without[order[0]].owner(key) == order[1]


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.lists(st.text(min_size=1, max_size=12), min_size=2, max_size=6, unique=True),
    keys=st.lists(st.binary(max_size=40), min_size=1, max_size=50),
    data=st.data(),
)
def test_any_removal_only_remaps_the_removed_nodes_keys(
    nodes: list[str], keys: list[bytes], data: st.DataObject
) -> None:
    gone = data.draw(st.sampled_from(nodes))
    full = HashRing(nodes, vnodes=16)
    less = HashRing([n for n in nodes if n != gone], vnodes=16)
    for key in keys:
        before = full.preference(key)
        assert len(before) == len(set(before)) == len(nodes)
        # Removing a node is the same as skipping it in every preference list.
        assert less.preference(key) == [n for n in before if n != gone]


def test_bad_rings_are_refused() -> None:
    with pytest.raises(ValueError):
        HashRing([])
    with pytest.raises(ValueError):
        HashRing(["a", "a"])
    with pytest.raises(ValueError):
        HashRing(["a"], vnodes=0)
    assert HashRing(["only"]).preference(b"anything") == ["only"]
