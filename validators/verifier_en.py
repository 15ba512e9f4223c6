"""The English half of the pair verifier: the MiniLM-L6 cross-encoder and its forward.

``EnglishModel`` loads the weights bench/train_verifier.py shipped (checked against
the SHA-256 in ``verifier.json``, from the package directory only), tokenizes pairs
as the model reads them, refuses the ones it cannot read (``unreadable``), and
scores rows (``forward_rows``: one logit each) in torch or, for float32 and int8,
through the checked ONNX Runtime graph (validators/onnx_forward.py). Routing, remembered
verdicts and calibration stay in validators/verifier.py.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from validators import onnx_forward, verifier_codec
from validators.verifier_dtype import Dtype, apply_dtype
from validators.verifier_errors import VerifierModelError
from validators.verify_batcher import Row

#: Rows per padded forward, after sorting by length (bench/verifier_latency.py).
FORWARD_CHUNK = 8
#: Rows per forward of the int8 graph: one. ONNX Runtime quantizes each product's
#: activations per tensor at run time, with one scale for the whole batch, so in a
#: shared forward a pair's int8 score moved with the other pairs beside it (by 0.02
#: on average, up to 0.10, over 150 BANKING77 pairs beside four others; float32: 0),
#: and the batcher puts concurrent lookups, other tenants' too, into one forward.
#: Alone, a pair's score is a function of the pair (and exact when remembered); the
#: padding a shared forward needed is saved, so a lookup cost x0.97-1.18 as much in three runs
#: (bench/verifier_int8_rows.py).
INT8_FORWARD_CHUNK = 1
#: Pairs of different lengths the ONNX graph must score as torch does (one padded batch
#: and alone) before it serves: validators/onnx_forward.py.
PROBE_PAIRS = (
    ("How do I reset my card PIN?", "how can I change my PIN"),
    ("hi", "My transfer has not arrived yet after three days, what should I do about it?"),
    ("what is the exchange rate for euros today", "euro exchange rate"),
)


class EnglishModel:
    def __init__(
        self,
        model_dir: Path,
        meta: dict[str, Any],
        *,
        dtype: Dtype,
        backend_setting: str,
        threads: int,
    ) -> None:
        try:
            weights = model_dir / "model.safetensors"
            if verifier_codec.sha256(weights) != meta["weights_sha256"]:
                raise VerifierModelError("verifier weights do not match their recorded checksum")
            config = BertConfig.from_json_file(str(model_dir / "config.json"))
            self.model = BertForSequenceClassification(config)
            self.model.load_state_dict(verifier_codec.load(weights), strict=True)
            self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
            self.max_tokens = int(meta["max_tokens"])
            self.max_unk_fraction = float(meta["max_unk_fraction"])
        except (OSError, KeyError, ValueError, RuntimeError) as exc:
            raise VerifierModelError(f"cannot load the verifier from {model_dir}: {exc}") from exc
        self.model.eval()
        self.dtype = dtype
        apply_dtype(self.model.bert.encoder, dtype)  # validators/verifier_dtype.py
        self.threads = threads
        self.backend_setting = backend_setting
        self._lock = threading.Lock()
        #: Rows per padded forward (:data:`INT8_FORWARD_CHUNK` in int8).
        self.forward_chunk = INT8_FORWARD_CHUNK if dtype == "int8" else FORWARD_CHUNK
        #: float32 products through ONNX Runtime (validators/onnx_forward.py); None: torch.
        self.graph: onnx_forward.OnnxForward | None = self._load_onnx()

    def _load_onnx(self) -> onnx_forward.OnnxForward | None:
        """The checked graph: float32 (``backend_setting`` decides), or int8 (always: its
        scores and calibration are the graph's own, so torch's float32 never stands in).
        The bfloat16 products are faster in torch, so ``auto`` keeps them there."""
        if self.dtype == "bfloat16":
            if self.backend_setting == "onnx":
                raise VerifierModelError("the onnx verifier backend does not compute bfloat16")
            return None
        int8 = self.dtype == "int8"
        if int8 and self.backend_setting == "torch":
            raise VerifierModelError("the int8 English verifier runs in ONNX Runtime only")
        model = self.model

        def logits(ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits[:, 0]

        def build() -> onnx_forward.OnnxForward:
            probes = [self.tensors(self.encode(p)) for p in onnx_forward.batches(PROBE_PAIRS)]
            return onnx_forward.build(
                onnx_forward.Bound(model, logits),
                ("input_ids", "token_type_ids", "attention_mask"),
                self.threads,
                probes,
                int8=int8,
            )

        backend = "onnx" if int8 else self.backend_setting
        return onnx_forward.load(backend, build, "the verifier", self.threads)

    @property
    def backend(self) -> str:
        """What runs the forward: ``onnx`` or ``torch``."""
        return "torch" if self.graph is None else "onnx"

    def encode(self, pairs: Sequence[tuple[str, str]]) -> list[Row]:
        """Each pair's (token ids, token types), unpadded and never truncated."""
        enc = self.tokenizer(
            [a for a, _ in pairs], [b for _, b in pairs], padding=False, truncation=False
        )
        return [
            (tuple(ids), tuple(types))
            for ids, types in zip(enc["input_ids"], enc["token_type_ids"], strict=True)
        ]

    def unreadable(self, ids: Sequence[int], types: Sequence[int]) -> str | None:
        """Why the model cannot read a pair (its refusal reason), else None."""
        if len(ids) > self.max_tokens:
            return "too_many_tokens"
        unk = self.tokenizer.unk_token_id
        # Per side, [UNK] among its tokens: token type 0 is the query, 1 the candidate.
        for side in (0, 1):
            n = sum(1 for t in types if t == side)
            bad = sum(1 for t, i in zip(types, ids, strict=True) if t == side and i == unk)
            if bad / max(n, 1) > self.max_unk_fraction:
                return "unknown_tokens"
        return None

    def forward_rows(self, rows: list[Row]) -> list[float]:
        """One logit per (input_ids, token_type_ids) row; the batcher's forward.

        Rows are sorted by length and run in chunks of ``forward_chunk`` (8; 1 in int8),
        each padded to its own longest row: one batch padded to the longest of 32 pairs
        took 1.7x as long (bench/results/verifier_latency_forward.json)."""
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
        logits = [0.0] * len(rows)
        with self._lock:
            previous = torch.get_num_threads()
            torch.set_num_threads(self.threads)
            try:
                for start in range(0, len(order), self.forward_chunk):
                    chunk = order[start : start + self.forward_chunk]
                    for i, z in zip(chunk, self.forward([rows[i] for i in chunk]), strict=True):
                        logits[i] = z
            finally:
                torch.set_num_threads(previous)
        return logits

    def tensors(self, rows: Sequence[Row]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rows padded to the longest: ids, token types and attention mask ``[B, T]``."""
        width = max(len(ids) for ids, _ in rows)
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
        types = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for r, (row_ids, row_types) in enumerate(rows):
            ids[r, : len(row_ids)] = torch.tensor(row_ids)
            types[r, : len(row_types)] = torch.tensor(row_types)
            mask[r, : len(row_ids)] = 1
        return ids, types, mask

    def forward(self, rows: Sequence[Row]) -> list[float]:
        """One padded batch: a logit per row."""
        ids, types, mask = self.tensors(rows)
        if self.graph is not None:
            return [float(z) for z in self.graph(ids.numpy(), types.numpy(), mask.numpy())]
        with torch.inference_mode():
            out = self.model(input_ids=ids, token_type_ids=types, attention_mask=mask)
        return [float(z) for z in out.logits[:, 0]]  # (n, 1) -> (n,)
