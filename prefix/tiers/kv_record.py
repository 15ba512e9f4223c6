"""The L3 record: one KV block as self-checking bytes, and the protocol of the stores holding it.

A record is what the disk and Redis stores keep under a block key. Stores never
look inside; the tier chain encodes on the way out of host memory and decodes
on the way back. All integers are little-endian::

    offset      size        field
    0           4           magic b"CGKV"
    4           2           format version (u16, = 1)
    6           2           key length K (u16)
    8           2           fingerprint length F (u16)
    10          1           dtype name length T (u8)
    11          1           number of dims N (u8)
    12          8           payload length P (u64)
    20          K           the chained block key
    20+K        F           the model fingerprint
    20+K+F      T           dtype name, ASCII ("float32" | "float16" | "bfloat16")
    20+K+F+T    8*N         shape, one u64 per dim
    ...         P           payload: the block's KV bytes, C order
    end-16      16          first 16 bytes of HMAC-SHA256(integrity_key, all bytes above)

Why the key and the fingerprint travel inside the record: a store is just a
name → bytes map, and names can lie (a file renamed or copied, a Redis key
written by a buggy or older replica, a directory reused by another model).
``decode_block`` compares what the record says it is with what the caller asked
for, so such a record is a miss (``CorruptBlockError``), never wrong KV fed to
the model. The HMAC is keyed with the engine's server salt: whoever can write to
Redis but lacks the secret cannot forge a block that passes; with an empty key
it is still a strong checksum that catches torn or truncated writes.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from prefix.errors import CorruptBlockError, ForeignRecordError

__all__ = [
    "DTYPE_SIZES",
    "FORMAT_VERSION",
    "MAGIC",
    "BlockLayout",
    "BlockStore",
    "check_namespace",
    "decode_block",
    "encode_block",
]

MAGIC = b"CGKV"
FORMAT_VERSION = 1
DTYPE_SIZES: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2}
CHECKSUM_SIZE = 16
_HEADER = struct.Struct("<4sHHHBBQ")  # magic, version, K, F, T, N, P
_DIM = struct.Struct("<Q")
_NAMESPACE_RE = re.compile(r"[0-9a-f]{8,64}")


@dataclass(frozen=True)
class BlockLayout:
    """What a block's payload is: element type and shape, e.g. ``[L, 2, B, Hkv, D]``."""

    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_SIZES:
            raise ValueError(f"dtype must be one of {sorted(DTYPE_SIZES)}, got {self.dtype!r}")
        shape = tuple(self.shape)
        if not 1 <= len(shape) <= 255:
            raise ValueError(f"shape must have 1..255 dims, got {shape!r}")
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim < 2**63:
                raise ValueError(f"every dim must be an int >= 1, got {shape!r}")
        object.__setattr__(self, "shape", shape)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_SIZES[self.dtype]


def check_namespace(namespace: str) -> str:
    """A store namespace is 8..64 lowercase hex chars (a digest of the model fingerprint)."""
    if not isinstance(namespace, str) or _NAMESPACE_RE.fullmatch(namespace) is None:
        raise ValueError(f"namespace must match [0-9a-f]{{8,64}}, got {namespace!r}")
    return namespace


def encode_block(
    key: bytes,
    fingerprint: bytes,
    layout: BlockLayout,
    payload: bytes | memoryview,
    *,
    integrity_key: bytes = b"",
) -> bytes:
    """The record for ``payload`` (exactly ``layout.nbytes`` bytes) stored under ``key``."""
    data = memoryview(payload).cast("B")
    if data.nbytes != layout.nbytes:
        raise ValueError(f"payload is {data.nbytes} bytes, layout {layout} needs {layout.nbytes}")
    if not 1 <= len(key) <= 0xFFFF or len(fingerprint) > 0xFFFF:
        raise ValueError("key must be 1..65535 bytes and fingerprint at most 65535 bytes")
    dtype = layout.dtype.encode("ascii")
    head = b"".join(
        [
            _HEADER.pack(
                MAGIC,
                FORMAT_VERSION,
                len(key),
                len(fingerprint),
                len(dtype),
                len(layout.shape),
                data.nbytes,
            ),
            bytes(key),
            bytes(fingerprint),
            dtype,
            *(_DIM.pack(dim) for dim in layout.shape),
        ]
    )
    mac = hmac.new(integrity_key, head, hashlib.sha256)
    mac.update(data)
    return b"".join([head, data, mac.digest()[:CHECKSUM_SIZE]])


def decode_block(
    record: bytes | memoryview,
    *,
    key: bytes,
    fingerprint: bytes,
    layout: BlockLayout,
    integrity_key: bytes = b"",
) -> memoryview:
    """The payload of ``record`` (a zero-copy view) once every check passes.

    Raises ``CorruptBlockError`` (and nothing else) for any bytes that are not a
    valid record of exactly this key, fingerprint and layout.
    """
    try:
        view = memoryview(record).cast("B")
    except TypeError as exc:  # a non-contiguous or non-byte buffer
        raise CorruptBlockError(f"record is not a contiguous byte buffer: {exc}") from exc
    size = view.nbytes
    if size < _HEADER.size + CHECKSUM_SIZE:
        raise CorruptBlockError(f"record truncated: {size} bytes, shorter than any record")
    magic, version, k_len, f_len, t_len, ndim, p_len = _HEADER.unpack_from(view)
    if magic != MAGIC:
        raise CorruptBlockError(f"bad magic {magic!r}, expected {MAGIC!r}")
    if version != FORMAT_VERSION:  # another release's engine shares the store: not damage
        raise ForeignRecordError(f"record version {version} (this engine reads {FORMAT_VERSION})")
    body_end = _HEADER.size + k_len + f_len + t_len + _DIM.size * ndim + p_len
    if body_end + CHECKSUM_SIZE != size:
        raise CorruptBlockError(
            f"declared lengths add up to {body_end + CHECKSUM_SIZE} bytes, record has {size}"
        )
    expected = hmac.new(integrity_key, view[:body_end], hashlib.sha256).digest()[:CHECKSUM_SIZE]
    if not hmac.compare_digest(expected, view[body_end:]):
        raise CorruptBlockError(
            "checksum mismatch: record altered, torn, or signed with another key"
        )
    pos = _HEADER.size
    if view[pos : pos + k_len] != key:
        raise CorruptBlockError("record holds another block key (renamed or copied file?)")
    pos += k_len
    if view[pos : pos + f_len] != fingerprint:
        raise CorruptBlockError("record was written by another model (fingerprint differs)")
    pos += f_len
    dtype = bytes(view[pos : pos + t_len]).decode("ascii", errors="replace")
    pos += t_len
    shape = tuple(_DIM.unpack_from(view, pos + i * _DIM.size)[0] for i in range(ndim))
    pos += _DIM.size * ndim
    if dtype != layout.dtype or shape != layout.shape:
        raise CorruptBlockError(f"record layout {dtype}{list(shape)} != expected {layout}")
    if p_len != layout.nbytes:
        raise CorruptBlockError(f"payload is {p_len} bytes, layout needs {layout.nbytes}")
    return view[pos:body_end]


@runtime_checkable
class BlockStore(Protocol):
    """A bytes-level L3 store: block key → record. Thread-safe; never judges records.

    ``get``/``get_many``/``put``/``contains``/``discard`` raise
    ``TierUnavailableError`` when the store fails or times out; the caller treats
    that as a miss (or a dropped write), never as a request error.
    """

    name: str

    def get(self, key: bytes) -> bytes | None: ...

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]: ...

    def put(self, key: bytes, record: bytes) -> None: ...

    def contains(self, key: bytes) -> bool: ...

    def discard(self, key: bytes) -> bool: ...

    def stats(self) -> dict[str, int | float]: ...

    def close(self) -> None: ...
