"""A consistent-hash ring: which engine replica a routing key belongs to.

Why a ring and not ``hash(key) % n``: with modulo, adding or removing one
replica moves almost every key, so almost every cached prefix suddenly lives on
the wrong engine and must be prefilled again. On a ring each node owns the arcs
in front of its points; removing a node hands only *its* arcs to the next nodes
(about 1/N of the keys), and adding one takes only about 1/N.

Each node gets ``vnodes`` points (virtual nodes) so the arcs even out: with one
point per node the shares are lopsided; 64 points keep each of 3 nodes within a
few percent of a third.

Points come from SHA-256 of the node's *label* (not its position in a list), so
every gateway replica computes the same ring from the same URLs in any order.
Pure Python, no torch: it is tested in milliseconds.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence


def _point(data: bytes) -> int:
    """A 64-bit position on the ring."""
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


class HashRing:
    """``preference(key)``: every node, in the order a request for ``key`` should try them."""

    def __init__(self, nodes: Sequence[str], vnodes: int = 64) -> None:
        if not nodes:
            raise ValueError("a hash ring needs at least one node")
        if len(set(nodes)) != len(nodes):
            raise ValueError(f"duplicate ring nodes: {list(nodes)}")
        if vnodes < 1:
            raise ValueError("vnodes must be at least 1")
        self.nodes: tuple[str, ...] = tuple(nodes)
        self.vnodes = vnodes
        points = sorted(
            (_point(f"{node}#{i}".encode()), node) for node in self.nodes for i in range(vnodes)
        )
        self._positions = [p for p, _ in points]
        self._owners = [node for _, node in points]

    def owner(self, key: bytes) -> str:
        """The node whose arc holds ``key``: the first point at or after the key's."""
        i = bisect.bisect_left(self._positions, _point(key))
        return self._owners[i % len(self._owners)]

    def preference(self, key: bytes) -> list[str]:
        """Distinct nodes in ring order from the key's position: the owner first, then
        the nodes that would own the key if the ones before them were gone. Failing
        over along this list keeps a dead node's keys spread over the rest, and puts
        each key on the same fallback from every gateway."""
        start = bisect.bisect_left(self._positions, _point(key))
        order: list[str] = []
        seen: set[str] = set()
        total = len(self._owners)
        for step in range(total):
            node = self._owners[(start + step) % total]
            if node not in seen:
                seen.add(node)
                order.append(node)
                if len(order) == len(self.nodes):
                    break
        return order
