"""The L3 record format: a round trip gives the payload back; any other bytes are a miss.

A record fed to the model must be exactly the block that was asked for, so every
corruption (random bytes, every truncation, every single-byte flip) and every
mismatch (key, model fingerprint, layout, integrity key) must raise
``CorruptBlockError``, and never anything else.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefix.errors import CorruptBlockError
from prefix.tiers.kv_record import BlockLayout, decode_block, encode_block

KEY = hashlib.sha256(b"block-0").digest()
FP = hashlib.sha256(b"model-fingerprint").digest()
SECRET = b"server-salt"
LAYOUT = BlockLayout("float16", (2, 2, 4, 1, 3))  # 96 bytes
PAYLOAD = bytes(range(LAYOUT.nbytes))
RECORD = encode_block(KEY, FP, LAYOUT, PAYLOAD, integrity_key=SECRET)


def decode(record: bytes, **overrides: object) -> memoryview:
    args: dict[str, object] = {
        "key": KEY,
        "fingerprint": FP,
        "layout": LAYOUT,
        "integrity_key": SECRET,
    }
    args |= overrides
    return decode_block(record, **args)  # type: ignore[arg-type]


def test_round_trip_is_a_zero_copy_view() -> None:
    view = decode(RECORD)
    assert bytes(view) == PAYLOAD
    assert view.obj is RECORD  # a slice of the record, not a copy
    assert RECORD[:4] == b"CGKV"


def test_round_trip_from_memoryview_and_empty_integrity_key() -> None:
    record = encode_block(KEY, FP, LAYOUT, memoryview(PAYLOAD))
    assert bytes(decode_block(memoryview(record), key=KEY, fingerprint=FP, layout=LAYOUT)) == (
        PAYLOAD
    )


def test_layout_sizes_and_validation() -> None:
    assert BlockLayout("float32", (2, 3)).nbytes == 24
    assert BlockLayout("bfloat16", [2, 3]).shape == (2, 3)  # type: ignore[arg-type]
    assert BlockLayout("bfloat16", (2, 3)).nbytes == 12
    for dtype, shape in [
        ("int8", (1,)),
        ("float32", (0, 2)),
        ("float32", ()),
        ("float16", (True,)),
    ]:
        with pytest.raises(ValueError):
            BlockLayout(dtype, shape)


def test_encode_rejects_a_payload_of_the_wrong_size() -> None:
    with pytest.raises(ValueError, match="payload"):
        encode_block(KEY, FP, LAYOUT, PAYLOAD[:-1])
    with pytest.raises(ValueError, match="payload"):
        encode_block(KEY, FP, LAYOUT, PAYLOAD + b"x")


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"key": hashlib.sha256(b"block-1").digest()}, "another block key"),
        ({"fingerprint": hashlib.sha256(b"other-model").digest()}, "another model"),
        ({"layout": BlockLayout("float16", (2, 2, 4, 3, 1))}, "layout"),
        ({"layout": BlockLayout("bfloat16", (2, 2, 4, 1, 3))}, "layout"),
        ({"integrity_key": b"not-the-secret"}, "checksum"),
        ({"integrity_key": b""}, "checksum"),
    ],
)
def test_a_mismatch_is_corrupt(overrides: dict[str, object], reason: str) -> None:
    with pytest.raises(CorruptBlockError, match=reason):
        decode(RECORD, **overrides)


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (b"", "truncated"),
        (RECORD[:10], "truncated"),
        (b"XXXX" + RECORD[4:], "magic"),
        (RECORD[:4] + b"\x02\x00" + RECORD[6:], "version"),
        (RECORD[:-1], "lengths"),
        (RECORD + b"\x00", "lengths"),
        (RECORD[:-1] + bytes([RECORD[-1] ^ 1]), "checksum"),
        (RECORD[:40] + bytes([RECORD[40] ^ 0x80]) + RECORD[41:], "checksum"),
    ],
)
def test_each_corruption_kind_is_named(record: bytes, reason: str) -> None:
    with pytest.raises(CorruptBlockError, match=reason):
        decode(record)


def test_a_forged_record_needs_the_secret() -> None:
    """Re-signing a tampered record works only with the integrity key."""
    tampered = bytearray(PAYLOAD)
    tampered[0] ^= 1
    forged = encode_block(KEY, FP, LAYOUT, bytes(tampered), integrity_key=b"guess")
    with pytest.raises(CorruptBlockError, match="checksum"):
        decode(forged)


def test_every_truncation_is_corrupt() -> None:
    for n in range(len(RECORD)):
        with pytest.raises(CorruptBlockError):
            decode(RECORD[:n])


def test_every_single_byte_flip_is_corrupt() -> None:
    for i in range(len(RECORD)):
        for delta in (0x01, 0x80, 0xFF):
            flipped = bytearray(RECORD)
            flipped[i] ^= delta
            with pytest.raises(CorruptBlockError):
                decode(bytes(flipped))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptBlockError):
        decode(data)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(RECORD) - 1), st.binary(min_size=1, max_size=8))
def test_random_splices_are_corrupt(at: int, junk: bytes) -> None:
    """Overwriting, inserting or keeping a valid header over junk never decodes."""
    overwritten = RECORD[:at] + junk + RECORD[at + len(junk) :]
    inserted = RECORD[:at] + junk + RECORD[at:]
    for record in (inserted, RECORD[: _header_end()] + junk):
        with pytest.raises(CorruptBlockError):
            decode(record)
    if overwritten != RECORD:
        with pytest.raises(CorruptBlockError):
            decode(overwritten)


def _header_end() -> int:
    return 20 + len(KEY) + len(FP)
