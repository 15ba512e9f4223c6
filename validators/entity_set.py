"""The entity set: ``ENTITY_KINDS``, ``ENTITIES_VERSION`` and ``Entities``, the
immutable ``kind → values`` mapping that extraction (``validators.entities``) builds,
the semantic store keeps (``to_dict`` / ``from_dict``) and the comparison reads."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from validators.errors import InvalidEntitiesError, StaleEntitiesError, UnknownEntityKindError
from validators.polarity import known_polarity_value

ENTITY_KINDS: tuple[str, ...] = (
    "amount",
    "currency",
    "percentage",
    "date",
    "time",
    "year",
    "version",
    "identifier",
    "email",
    "url",
    "phone",
    "number",
    "unit",
    "language",
    "instruction",
    "name",
    "polarity",
)
#: Version of the extraction rules; stored in ``Entities.to_dict()`` so that
#: entities persisted by other rules are re-extracted rather than compared.
#: 17: inside / outside a building, a town or a network, peak / off-peak, 境内, 园区内
#: / 外, 本地学生, all of / some of a sum and 全部 / 一部分, 续保 / 到期前 / 后, 个人 /
#: 企业贷款, 首次 / 再次, Chinese swaps around 到 (session 52);
#: 16: a review's and a hiring's roles, shipper / consignee, generic / brand-name
#: drugs, degrees, hourly / salaried pay, how long cover lasts, severity, a product's
#: variant and an item's condition; members before a shared head unordered, "shut"
#: closed, 二手 / 第一次 read by the word rules, "more than one" no count (session 51);
#: 15: inside / outside a boundary, a group's roles, comparatives, the whole / a part,
#: 前 / 后 the events of a job, 到 completing a verb no destination (session 50);
#: 14: an address's kind and a product's edition (session 49);
#: 13: seven contrast sets and four antonyms, 第一次 no number (session 48);
#: 12: the asker acting or acted on, a decision done or to come, Chinese acts of one
#: person on another (session 47);
#: 11: an age limit a minimum unless it says maximum, "within 30 days" / 七天内 before,
#: "more than 30 days after" no comparison, six contrast sets, how often can / should,
#: routes to / from other countries and PO boxes (session 46); 10: duties and choices,
#: contrast sets (session 45);
#: 9: a month abbreviated after "in" (a date), Chinese durations (session 44); 8: "not
#: happy" read as "unhappy" (session 40); 7: places (session 39)
ENTITIES_VERSION = 17
_VERSION_KEY = "_v"
_MENTIONS_KEY = "_m"


class Entities(Mapping[str, frozenset[str]]):
    """An immutable mapping ``kind → frozenset of canonical values``.

    Only kinds with at least one value are present; iteration follows
    ``ENTITY_KINDS``. Hashable and comparable; ``to_dict``/``from_dict`` give
    a JSON-serialisable form for the semantic store.

    ``mentions``: the lower-cased words of the text the entities were read from
    (``names.mentions``), or None when unknown (built by hand, or a long text). Only
    the ``name`` comparison reads them; they take no part in equality or hashing."""

    __slots__ = ("_data", "_hash", "_mentions")
    _data: dict[str, frozenset[str]]
    _hash: int
    _mentions: frozenset[str] | None

    def __init__(
        self,
        data: Mapping[str, Iterable[str]] | None = None,
        *,
        mentions: Iterable[str] | None = None,
    ) -> None:
        data = data or {}
        for kind in data:
            if kind not in ENTITY_KINDS:
                raise UnknownEntityKindError(f"unknown entity kind {kind!r}")
        items: dict[str, frozenset[str]] = {}
        for kind in ENTITY_KINDS:
            values = data.get(kind)
            if values is None or isinstance(values, str):
                if isinstance(values, str):
                    raise InvalidEntitiesError(f"values of {kind!r} must be a collection of str")
                continue
            frozen = frozenset(values)
            if not all(isinstance(v, str) for v in frozen):
                raise InvalidEntitiesError(f"values of {kind!r} must be str")
            if frozen:
                items[kind] = frozen
        words = None if mentions is None or isinstance(mentions, str) else frozenset(mentions)
        if isinstance(mentions, str) or (
            words is not None and not all(isinstance(w, str) for w in words)
        ):
            raise InvalidEntitiesError("mentions must be a collection of str")
        object.__setattr__(self, "_data", items)
        object.__setattr__(self, "_hash", hash(frozenset(items.items())))
        object.__setattr__(self, "_mentions", words)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Entities is immutable")

    def __getitem__(self, kind: str) -> frozenset[str]:
        return self._data[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Entities):
            return self._data == other._data
        return NotImplemented

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={sorted(v)}" for k, v in self._data.items())
        return f"Entities({body})"

    @property
    def mentions(self) -> frozenset[str] | None:
        """The text's lower-cased words (None: unknown); see the class docstring."""
        return self._mentions

    def values_of(self, kind: str) -> frozenset[str]:
        """The values of ``kind`` (empty when absent); unknown kinds raise."""
        check_kind(kind)
        return self._data.get(kind, frozenset())

    def to_dict(self) -> dict[str, Any]:
        """``{"_v": ENTITIES_VERSION, kind: sorted list of values, ..., "_m": sorted
        mentions}`` (``"_m"`` only when the mentions are known)."""
        out: dict[str, Any] = {_VERSION_KEY: ENTITIES_VERSION}
        out.update({kind: sorted(values) for kind, values in self._data.items()})
        if self._mentions is not None:
            out[_MENTIONS_KEY] = sorted(self._mentions)
        return out

    @classmethod
    def from_dict(cls, data: object) -> Entities:
        """Inverse of ``to_dict``. Raises ``StaleEntitiesError`` when the dict
        was written by other extraction rules and ``InvalidEntitiesError`` when
        it is malformed; either way the caller should re-extract."""
        if not isinstance(data, Mapping):
            raise InvalidEntitiesError(f"entities must be a mapping, not {type(data).__name__}")
        version = data.get(_VERSION_KEY)
        if version != ENTITIES_VERSION:
            raise StaleEntitiesError(
                f"entities were extracted by rules version {version!r}, "
                f"current is {ENTITIES_VERSION}"
            )
        body = {k: v for k, v in data.items() if k not in (_VERSION_KEY, _MENTIONS_KEY)}
        for kind, values in body.items():
            if kind not in ENTITY_KINDS:
                raise InvalidEntitiesError(f"unknown entity kind {kind!r}")
            if not isinstance(values, list | tuple):
                raise InvalidEntitiesError(f"values of {kind!r} must be a list")
        words = data.get(_MENTIONS_KEY)
        if words is not None and not isinstance(words, list | tuple):
            raise InvalidEntitiesError("mentions must be a list")
        entities = cls(body, mentions=words)
        if "polarity" not in entities or not all(
            known_polarity_value(v) for v in entities["polarity"]
        ):
            raise InvalidEntitiesError("polarity values are missing or unknown")
        return entities


def check_kind(kind: str) -> None:
    if kind not in ENTITY_KINDS:
        raise UnknownEntityKindError(
            f"unknown entity kind {kind!r}; known kinds: {', '.join(ENTITY_KINDS)}"
        )
