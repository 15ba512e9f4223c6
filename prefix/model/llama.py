"""A Llama-family decoder whose attention reads and writes K/V through block tables.

One forward takes a flat, variable-length batch (`ForwardBatch`): the new
tokens of every sequence concatenated, with their ABSOLUTE positions. For each
layer the new tokens' K/V are written into the paged cache first, then every
sequence attends over its whole context ``[0, seq_len)`` gathered through its
own block table. A suffix prefilled after a cached prefix therefore sees the
prefix K/V exactly as the earlier request wrote them, at the positions they had.

Attention and its paths (decode, batched short chunks, long chunks; torch's SDPA or
the native kernels of prefix/kernels) are in prefix/model/attention.py. On a bf16 CPU
model with the native kernels the layer loop is ``_fused_layers``: each residual add
fused into the next RMSNorm, RoPE and SiLU * up in one pass each (prefix/kernels).

Numerics follow transformers' Llama/Qwen2/Mistral (RMSNorm in float32, RoPE
angles in float32, rotate-half layout), so logits match theirs to ~1e-5 in fp32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from prefix.kernels.flash_attention import FlashAttention
from prefix.kernels.fused_ops import FusedOps
from prefix.model.attention import Attention, AttentionMetadata
from prefix.model.config import ModelConfig
from prefix.model.decode_attention import DECODE_BACKENDS
from prefix.model.forward_batch import ForwardBatch, SeqChunk
from prefix.model.kv_cache import PagedKVCache
from prefix.model.packed_linear import PackedLinear, can_pack
from prefix.model.rope import RotaryEmbedding

__all__ = ["AttentionMetadata", "ForwardBatch", "LlamaModel", "SeqChunk"]

# ------------------------------------------------------------------------ layers


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # normalize in float32 and scale in the input dtype, as transformers does,
        # so bf16 runs round at the same place; the fused kernel computes the same
        # x * rsqrt(mean(x^2) + eps) in one pass instead of pow + mean + mul
        xf = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return self.weight * xf.to(x.dtype)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        hidden, inter, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj: nn.Linear | None = nn.Linear(hidden, inter, bias=bias)
        self.up_proj: nn.Linear | None = nn.Linear(hidden, inter, bias=bias)
        # nn.Linear, or a PackedLinear once the model is packed (same call)
        self.down_proj: nn.Module = nn.Linear(inter, hidden, bias=bias)
        # set by pack(): gate and up as one packed product; the two layers are then dropped
        self.gate_up_proj: PackedLinear | None = None

    def pack(self) -> None:
        if self.gate_up_proj is not None:
            return
        assert self.gate_proj is not None and self.up_proj is not None
        assert isinstance(self.down_proj, nn.Linear)
        self.gate_up_proj = PackedLinear([self.gate_proj, self.up_proj])
        self.down_proj = PackedLinear([self.down_proj])
        self.gate_proj = self.up_proj = None

    def forward(self, x: torch.Tensor, fused: FusedOps | None = None) -> torch.Tensor:
        if self.gate_up_proj is not None:
            if fused is not None:
                # [T, 2I] -> SiLU(gate) * up [T, I] in one pass
                return self.down_proj(fused.silu_mul(self.gate_up_proj(x)))
            gate, up = self.gate_up_proj(x).split(self.gate_up_proj.split_sizes, dim=-1)
        else:
            assert self.gate_proj is not None and self.up_proj is not None
            gate, up = self.gate_proj(x), self.up_proj(x)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.self_attn = Attention(config, layer)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        meta: AttentionMetadata,
        kv_cache: PagedKVCache,
    ) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, meta, kv_cache)
        return x + self.mlp(self.post_attention_layernorm(x))


# ------------------------------------------------------------------------- model


class LlamaModel(nn.Module):
    """Llama / Mistral / Qwen2 decoder over a paged KV cache.

    Parameter names mirror transformers' (minus the ``model.`` prefix), so a
    Hugging Face state dict loads after one rename.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        # one of DECODE_BACKENDS: "paged", or "sdpa" / "gather" (earlier paths, kept for
        # the before/after bench and as references the tests compare against)
        self.decode_backend = "paged"
        # short prefill chunks attended in one call per layer; False: one call per
        # sequence (the reference the tests compare against)
        self.batch_prefill = True
        # the native bf16 attention kernels, set by the engine where they run
        # (prefix/kernels); None: SDPA
        self.flash_attention: FlashAttention | None = None
        # the fused element-wise kernels (add + RMSNorm, RoPE, SiLU * up), set with them
        self.fused_ops: FusedOps | None = None
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.rotary = RotaryEmbedding(config)
        # set by pack(): lm_head as a packed product (lm_head itself stays: it may be
        # tied to embed_tokens, which the embedding lookup reads)
        self.lm_head_packed: PackedLinear | None = None
        self.tie_weights()

    def tie_weights(self) -> None:
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    @property
    def device(self) -> torch.device:
        return self.embed_tokens.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed_tokens.weight.dtype

    def num_parameters(self) -> int:
        # parameters() yields a tied weight once
        return sum(p.numel() for p in self.parameters())

    def _fused_layers(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        meta: AttentionMetadata,
        kv_cache: PagedKVCache,
        fused: FusedOps,
    ) -> torch.Tensor:
        """The decoder layers with each residual add fused into the next RMSNorm: the
        residual stream ``x`` is updated in place; returns the final norm of every row."""
        layers = [layer for layer in self.layers if isinstance(layer, DecoderLayer)]
        norms = [layer.input_layernorm for layer in layers[1:]] + [self.norm]
        first = layers[0].input_layernorm
        h = fused.add_rms_norm(x, None, first.weight, first.eps)
        for layer, next_norm in zip(layers, norms, strict=True):
            post = layer.post_attention_layernorm
            h = fused.add_rms_norm(
                x, layer.self_attn(h, cos, sin, meta, kv_cache), post.weight, post.eps
            )
            h = fused.add_rms_norm(x, layer.mlp(h, fused), next_norm.weight, next_norm.eps)
        return h

    @property
    def is_windowed(self) -> bool:
        """Whether any layer attends through a sliding window."""
        return any(self.config.sliding_window(i) is not None for i in range(len(self.layers)))

    @property
    def is_packed(self) -> bool:
        return self.lm_head_packed is not None

    def pack(self) -> bool:
        """Prepack the linear layers for oneDNN, fusing q/k/v and gate/up, in place.

        Only where it pays (``packed_linear.can_pack``: bf16 on CPU); returns whether
        the model is packed. One-way and idempotent: the separate q/k/v/gate/up
        weights are freed, so a packed model holds its linear weights once.
        """
        if self.is_packed:
            return True
        if not can_pack(self.dtype, self.device):
            return False
        for layer in self.layers:
            assert isinstance(layer, DecoderLayer)
            layer.self_attn.pack()
            layer.mlp.pack()
        self.lm_head_packed = PackedLinear([self.lm_head])
        return True

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, kv_cache: PagedKVCache) -> torch.Tensor:
        """Write the batch's K/V into ``kv_cache``; return [S', vocab] float32 logits."""
        if sum(batch.query_lens) != batch.input_ids.numel():
            raise ValueError(
                f"query_lens sum to {sum(batch.query_lens)} but batch has "
                f"{batch.input_ids.numel()} tokens"
            )
        if self.decode_backend not in DECODE_BACKENDS:
            raise ValueError(
                f"decode_backend must be one of {DECODE_BACKENDS}, got {self.decode_backend!r}"
            )
        meta = AttentionMetadata.build(
            batch,
            kv_cache,
            self.decode_backend,
            self.batch_prefill,
            self.flash_attention,
            windowed=self.is_windowed,
        )
        # [T] -> [T, hidden]
        x = self.embed_tokens(batch.input_ids)
        cos, sin = self.rotary(batch.positions, x.dtype)  # each [T, D], shared by all layers
        fused = self.fused_ops
        if fused is not None and fused.supports(x) and self.is_packed:
            meta.fused = fused
            x = self._fused_layers(x, cos, sin, meta, kv_cache, fused)[batch.logits_indices]
        else:
            for layer in self.layers:
                x = layer(x, cos, sin, meta, kv_cache)
            # normalize only the rows that become logits: RMSNorm is per row
            x = self.norm(x[batch.logits_indices])  # [S', hidden]
        head = self.lm_head_packed if self.lm_head_packed is not None else self.lm_head
        return head(x).float()  # [S', vocab]
