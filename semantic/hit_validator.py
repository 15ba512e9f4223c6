"""The seam between the cache and the entity validators.

``semantic`` must not import ``validators``; the gateway passes an object that
satisfies :class:`HitValidator` (``validators.verify.Validator`` does) to
:class:`semantic.cache.SemanticCache`. Without one, the cache applies only the
threshold and the TTL.

The validator owns its refusal reasons and the cache reports them unchanged as
the miss reason (or store skip reason): ``entity_mismatch:<kind>`` when a kind
of entity (number, date, amount, negation…) differs between the two questions,
``guarded:<scenario>`` when a scenario guard (time_sensitive, personalized…)
forbids serving the question from the cache, and whatever an optional second
stage adds (for example ``judge_refused``). The cache's own reasons are
``below_threshold``, ``expired`` and ``empty``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class HitValidator(Protocol):
    """Decides whether a cached answer may be served for a new question."""

    def extract(self, text: str, *, scope: str = "") -> dict[str, Any]:
        """Entities of a question, stored with the entry. Must be JSON-serializable
        (it comes back from the database through JSON: tuples become lists).

        ``scope`` (here and below): the partition's namespace (``memo_scope``); what the
        validator caches for one scope it must not reuse for another, or its speed
        would tell one tenant what another asked."""
        ...

    def guard(self, question: str, guards: Collection[str], *, scope: str = "") -> str | None:
        """``guarded:<scenario>`` when one of the named guards forbids caching this
        question (checked before lookup and before store), else ``None``."""
        ...

    def check(
        self,
        question: str,
        cached_question: str,
        cached_entities: Mapping[str, Any] | None,
        score: float,
        kinds: Collection[str] | None,
        guards: Collection[str],
        *,
        scope: str = "",
    ) -> str | None:
        """``None`` to allow serving ``cached_question``'s answer for ``question``, or
        the refusal reason. ``kinds`` limits the entity kinds compared (``None``: all)."""
        ...
