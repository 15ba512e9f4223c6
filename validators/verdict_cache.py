"""A bounded LRU of pair-verifier verdicts (issue 12's 5 ms goal, issue 15's hit path).

The verifier's verdict on a pair is a pure function of the model and the two
texts the model reads, so a remembered verdict is exact: FAQ traffic asks the
same questions against the same cached ones over and over, and a repeated pair
costs a dictionary lookup instead of a forward (~12 ms per candidate on one
thread).

What the key holds is up to :class:`validators.verifier.PairVerifier`: the
weights' SHA-256 (a retrained model never sees an old verdict), the path, and
what that path actually reads (the English path: the token ids of the pair, the
tokenizer's own normalization, so keys never collide for inputs the model would
tell apart; the Chinese path: the exact texts). Only scores are stored, never an
answer: an entry is reached only by a caller holding both texts already.

``max_entries=0`` turns it off (every ``get`` misses, ``put`` keeps nothing).
Thread-safe: lookups run in the gateway's worker threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

#: Entries kept by default (``CACHEGATE_VERIFIER_CACHE_SIZE``): a verdict with its
#: key is a few hundred bytes, so 10,000 is a few MB.
DEFAULT_MAX_ENTRIES = 10_000


class VerdictCache(Generic[V]):
    """``get(key)`` / ``put(key, value)``, least recently used evicted past ``max_entries``."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, *, count_miss: bool = True) -> V | None:
        """The value, or None. ``count_miss=False``: a probe that, on a miss, is asked
        again by the path that computes the value, so the miss is counted there."""
        if not self.enabled:
            return None
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += count_miss
                return None
            self._entries.move_to_end(key)  # recently used: evicted last
            self.hits += 1
            return value

    def put(self, key: Hashable, value: V) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
