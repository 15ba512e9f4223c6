"""Chained block keys: what makes two KV blocks the same computation state.

A block's key is SHA-256 over a canonical serialization of (parent key, token
ids, typed extras), and the first parent is a root that binds the model
fingerprint, the tenant's namespace and a server-side salt (seed 000)::

    root = sha256(serialize((FORMAT_TAG, fingerprint, namespace, salt, cache_salt)))
    key_0 = sha256(serialize((root, tokens[0:B], extras_0)))
    key_i = sha256(serialize((key_{i-1}, tokens[i*B:(i+1)*B], extras_i)))

Because every key contains its parent, one changed token changes the key of its
block and of every block after it; lookups walk from the start and stop at the
first miss.

Everything here is deterministic across processes and machines (no ``hash()``,
no per-process randomness) so keys can be shared by replicas and tiers (host
memory, Redis, disk). Changing the serialization must change ``FORMAT_TAG``.
"""

from __future__ import annotations

import hashlib
import json
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = [
    "FORMAT_TAG",
    "KEY_SIZE",
    "Extra",
    "LoraExtra",
    "MMExtra",
    "ModelFingerprint",
    "block_key",
    "block_keys",
    "canonical_config",
    "chain_root",
    "lora_extra",
    "mm_extra",
    "serialize",
    "short",
    "validate_extras",
]

FORMAT_TAG = "cachegate-prefix-v1"
KEY_SIZE = 32  # bytes of a SHA-256 digest

# One tag byte per type, so values of different types never share an encoding
# (0 vs False, b"x" vs "x", None vs ""). tuple and list share _TAG_SEQ on
# purpose: callers pass token ids as either, and both mean "this ordered
# sequence"; they must hash the same.
_TAG_NONE = b"N"
_TAG_BOOL = b"B"
_TAG_INT = b"I"
_TAG_STR = b"S"
_TAG_BYTES = b"Y"
_TAG_SEQ = b"T"
_LENGTH = struct.Struct(">Q")  # payload length in bytes, fixed width


def serialize(value: object) -> bytes:
    """Encode ``value`` canonically as ``tag byte + 8-byte length + payload``.

    Supported: None, bool, int (any size, signed), str (UTF-8), bytes, and
    tuple/list of those (recursively; tuple and list encode identically). The
    length prefix makes concatenation unambiguous: ``("ab", "c")`` and
    ``("a", "bc")`` differ. Any other type raises TypeError rather than being
    guessed at (floats, for example, have more than one reasonable encoding).
    """
    out = bytearray()
    _write(out, value)
    return bytes(out)


def _write(out: bytearray, value: object) -> None:
    if value is None:
        out += _TAG_NONE + _LENGTH.pack(0)
    elif isinstance(value, bool):  # before int: bool is an int subclass
        out += _TAG_BOOL + _LENGTH.pack(1) + (b"\x01" if value else b"\x00")
    elif isinstance(value, int):
        # Minimal two's complement; the length prefix makes it decodable.
        payload = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
        out += _TAG_INT + _LENGTH.pack(len(payload)) + payload
    elif isinstance(value, str):
        payload = value.encode("utf-8")
        out += _TAG_STR + _LENGTH.pack(len(payload)) + payload
    elif isinstance(value, bytes):
        out += _TAG_BYTES + _LENGTH.pack(len(value)) + value
    elif isinstance(value, (tuple, list)):
        start = len(out)
        out += _TAG_SEQ + _LENGTH.pack(0)
        for item in value:
            _write(out, item)
        # Patch the length in place rather than building each level twice.
        payload_start = start + 1 + _LENGTH.size
        out[start + 1 : payload_start] = _LENGTH.pack(len(out) - payload_start)
    else:
        raise TypeError(f"cannot serialize {type(value).__name__!s} value {value!r}")


def canonical_config(config: Mapping[str, Any]) -> str:
    """A stable string for ``ModelFingerprint.position_config``.

    Sorted keys and fixed separators, so the same rope/attention settings give
    the same string whatever order the model config lists them in.
    """
    return json.dumps(
        dict(config), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


@dataclass(frozen=True)
class ModelFingerprint:
    """Everything about the model that changes the KV a token produces.

    ``position_config`` is a canonical string (see ``canonical_config``) of the
    rope settings, max positions and attention configuration. ``block_size`` is
    here because a key covers exactly one block of tokens.
    """

    model_id: str
    weights_digest: str
    dtype: str
    block_size: int
    position_config: str

    def __post_init__(self) -> None:
        for name in ("model_id", "weights_digest", "dtype", "position_config"):
            value = getattr(self, name)
            # An empty field would silently merge different models into one pool.
            if not isinstance(value, str) or not value:
                raise ValueError(f"ModelFingerprint.{name} must be a non-empty str, got {value!r}")
        if not _is_int(self.block_size) or self.block_size <= 0:
            raise ValueError(
                f"ModelFingerprint.block_size must be a positive int, got {self.block_size!r}"
            )

    def to_tuple(self) -> tuple[tuple[str, str | int], ...]:
        """Named fields, so adding one later cannot shift the meaning of another."""
        return (
            ("model_id", self.model_id),
            ("weights_digest", self.weights_digest),
            ("dtype", self.dtype),
            ("block_size", self.block_size),
            ("position_config", self.position_config),
        )


def chain_root(
    fingerprint: ModelFingerprint,
    namespace: str,
    server_salt: bytes | str,
    cache_salt: str | None = None,
) -> bytes:
    """The parent of a prompt's first block (32 bytes).

    ``namespace`` and ``server_salt`` come from the server (the tenant's prefix
    namespace and a secret), never from the client. A client ``cache_salt`` is
    mixed in next to them, so it can only split a namespace further, never
    reach into another one. A str ``server_salt`` is taken as its UTF-8 bytes,
    so the same secret read from a config file or an env var gives the same
    root. Every field is named and typed, so a namespace "X", a salt "X" and a
    cache_salt "X" are three different roots.
    """
    if not isinstance(fingerprint, ModelFingerprint):
        raise TypeError(f"fingerprint must be a ModelFingerprint, got {type(fingerprint).__name__}")
    if not isinstance(namespace, str):
        raise TypeError(f"namespace must be a str, got {type(namespace).__name__}")
    if isinstance(server_salt, str):
        salt = server_salt.encode("utf-8")
    elif isinstance(server_salt, bytes):
        salt = server_salt
    else:
        raise TypeError(f"server_salt must be bytes or str, got {type(server_salt).__name__}")
    if cache_salt is not None and not isinstance(cache_salt, str):
        raise TypeError(f"cache_salt must be a str or None, got {type(cache_salt).__name__}")
    payload = (
        FORMAT_TAG,
        ("fingerprint", fingerprint.to_tuple()),
        ("namespace", namespace),
        ("salt", salt),
        ("cache_salt", cache_salt),
    )
    return hashlib.sha256(serialize(payload)).digest()


# Extras are typed tuples, never bare strings: the kind is part of the value,
# so a LoRA named "X" cannot collide with an image digest "X".
LoraExtra: TypeAlias = tuple[Literal["lora"], str]
# ("mm", digest of the real input content, offset): the offset is the index,
# inside the item's placeholder tokens, where this block's overlap with the
# item starts; identical placeholders with different images then differ.
MMExtra: TypeAlias = tuple[Literal["mm"], str, int]
Extra: TypeAlias = LoraExtra | MMExtra


def lora_extra(name: str) -> LoraExtra:
    """``("lora", name)``, validated."""
    extra: LoraExtra = ("lora", name)
    validate_extras((extra,))
    return extra


def mm_extra(digest: str, offset: int) -> MMExtra:
    """``("mm", digest, offset)``, validated."""
    extra: MMExtra = ("mm", digest, offset)
    validate_extras((extra,))
    return extra


def validate_extras(extras: Sequence[Extra]) -> tuple[Extra, ...]:
    """Return ``extras`` as a tuple, or raise ValueError if any is malformed.

    Order is kept (not sorted): two images in one block in a different order
    are a different computation.
    """
    if isinstance(extras, (str, bytes)):
        raise ValueError(f"extras must be a sequence of typed tuples, not the bare {extras!r}")
    checked: list[Extra] = []
    for extra in extras:
        if not isinstance(extra, tuple) or not extra:
            raise ValueError(f"an extra is a typed tuple such as ('lora', name), got {extra!r}")
        kind = extra[0]
        if kind == "lora":
            if len(extra) != 2 or not isinstance(extra[1], str) or not extra[1]:
                raise ValueError(f"a LoRA extra is ('lora', name: non-empty str), got {extra!r}")
        elif kind == "mm":
            if (
                len(extra) != 3
                or not isinstance(extra[1], str)
                or not extra[1]
                or not _is_int(extra[2])
                or extra[2] < 0
            ):
                raise ValueError(
                    f"a multimodal extra is ('mm', digest: non-empty str, offset: int >= 0), "
                    f"got {extra!r}"
                )
        else:
            raise ValueError(f"unknown extra kind {kind!r} in {extra!r}; known: 'lora', 'mm'")
        checked.append(extra)
    return tuple(checked)


def block_key(parent: bytes, token_ids: Sequence[int], extras: Sequence[Extra] = ()) -> bytes:
    """Key (32 bytes) of one full block whose predecessor has key ``parent``."""
    _check_parent(parent)
    return _block_key(parent, _token_tuple(token_ids), validate_extras(extras))


def block_keys(
    root: bytes,
    token_ids: Sequence[int],
    block_size: int,
    extras: Sequence[Extra] = (),
    mm_extras_for_block: Callable[[int], Sequence[Extra]] | None = None,
) -> list[bytes]:
    """Chained keys of the FULL blocks of ``token_ids`` (``len // block_size`` keys).

    A trailing partial block gets no key: its KV is still being written, and a
    key must describe exactly ``block_size`` tokens. ``extras`` apply to every
    block (e.g. the LoRA); ``mm_extras_for_block(i)`` adds the extras of block
    ``i`` only (the images its tokens overlap). ``block_size`` must be the one
    in the fingerprint that made ``root``.
    """
    _check_parent(root)
    if not _is_int(block_size) or block_size <= 0:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    common = validate_extras(extras)
    tokens = _token_tuple(token_ids)
    keys: list[bytes] = []
    parent = root
    for i in range(len(tokens) // block_size):
        block_extras = common
        if mm_extras_for_block is not None:
            block_extras = common + validate_extras(mm_extras_for_block(i))
        parent = _block_key(parent, tokens[i * block_size : (i + 1) * block_size], block_extras)
        keys.append(parent)
    return keys


def short(key: bytes) -> str:
    """First 12 hex characters of a key, for logs."""
    return key.hex()[:12]


def _block_key(parent: bytes, tokens: tuple[int, ...], extras: tuple[Extra, ...]) -> bytes:
    return hashlib.sha256(serialize((parent, tokens, extras))).digest()


def _token_tuple(token_ids: Sequence[int]) -> tuple[int, ...]:
    # operator.index accepts numpy/torch integer scalars and refuses floats,
    # so the same ids hash the same whatever container they arrive in.
    try:
        return tuple(operator.index(t) for t in token_ids)
    except TypeError as exc:
        raise TypeError(f"token ids must be integers: {exc}") from None


def _check_parent(parent: bytes) -> None:
    if not isinstance(parent, bytes) or len(parent) != KEY_SIZE:
        raise ValueError(f"a parent key is {KEY_SIZE} bytes (root or block key), got {parent!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
