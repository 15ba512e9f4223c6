"""Engine configuration: one frozen dataclass, validated on construction."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prefix.errors import EngineConfigError

if TYPE_CHECKING:
    import torch

# "auto" is resolved at engine start (prefix/model/dtype.py); the rest are torch dtypes
_DTYPES = ("auto", "float32", "float16", "bfloat16")
_POLICIES = ("lru", "coverage")
_KERNELS = ("auto", "native", "torch")
MiB = 1024 * 1024


@dataclass(frozen=True)
class EngineConfig:
    """How the prefix engine is built.

    ``num_blocks`` fixes the pool size directly; otherwise it is derived from
    ``kv_cache_bytes`` and the model's per-block KV size.
    """

    model_path: str | None = None  # None: the bundled SmolLM2-135M-Instruct GGUF
    device: str | None = None  # None: CUDA when present, else CPU
    # "auto": bfloat16 where the hardware computes it natively (CUDA with bf16, CPUs with
    # AVX512-BF16 or AMX), float32 elsewhere; resolved once by ``with_concrete_dtype``.
    dtype: str = "auto"
    block_size: int = 16
    kv_cache_bytes: int = 256 * MiB
    num_blocks: int | None = None
    eviction_policy: str = "lru"
    max_model_len: int | None = None  # None: the model's context window
    # Large chunks keep CPU matmuls efficient; long prompts are still split (on block
    # boundaries) so decodes of other requests are not starved behind them.
    prefill_chunk_size: int = 2048
    max_num_seqs: int = 32  # running sequences per step
    # Fair sharing: at most this many running sequences per tenant (None: no cap; admission
    # is round-robin across tenants either way), and at most this many requests waiting
    # for admission in all (a full queue answers 429 with Retry-After, never grows).
    max_num_seqs_per_tenant: int | None = None
    max_num_waiting: int = 256
    # At most this many of the waiting requests may be one tenant's (None: three
    # quarters of max_num_waiting), so one tenant's flood cannot answer every other
    # tenant 429 queue_full. Anonymous requests (the default namespace) share no cap.
    max_num_waiting_per_tenant: int | None = None
    max_num_batched_tokens: int = 2048  # tokens computed per step (decodes + prefill chunks)
    # torch intra-op threads of the engine's step thread; None: torch's default (all
    # cores). Fewer leaves cores to what shares the box (the HTTP front end's event loop,
    # tokenizer threads): an OpenMP thread that loses its core stalls every parallel op.
    num_threads: int | None = None
    # Prepack the linear weights for oneDNN with q/k/v and gate/up fused
    # (prefix/model/packed_linear.py); applied only where it is faster: bf16 on CPU.
    pack_linears: bool = True
    # Attention and the fused element-wise steps: "native" = our bf16 kernels
    # (prefix/kernels, compiled on first use; attention 3-4x torch's SDPA on AVX512-BF16
    # CPUs), "torch" = SDPA and torch ops; "auto" = native where they run (a bf16 model
    # on a CPU with AVX512-BF16 and a C compiler), else torch, logged.
    kernels: str = "auto"
    enable_prefix_caching: bool = True
    server_salt: str = ""
    # L2 host tier: bytes of host memory (pinned on CUDA) for blocks evicted from the
    # GPU pool; 0 turns it off. Must hold at least one block when on.
    host_tier_bytes: int = 0
    # L3 shared tier: every computed block is written through, asynchronously, to a local
    # directory (kept across restarts, bounded by kv_disk_bytes) and/or Redis (shared by
    # engines with the same model and server_salt). None turns a store off.
    kv_disk_path: str | None = None
    kv_disk_bytes: int = 4096 * MiB
    kv_redis_url: str | None = None
    kv_redis_ttl_seconds: int = 86_400
    kv_tier_timeout_s: float = 0.5  # bound on one L3 read; slower counts as a miss
    kv_tier_write_buffer_bytes: int = 256 * MiB  # host copies waiting to be written, per store

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise EngineConfigError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if self.kernels not in _KERNELS:
            raise EngineConfigError(f"kernels must be one of {_KERNELS}, got {self.kernels!r}")
        if not 1 <= self.block_size <= 1024:
            raise EngineConfigError(f"block_size must be in [1, 1024], got {self.block_size}")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise EngineConfigError(f"num_blocks must be >= 1, got {self.num_blocks}")
        if self.num_blocks is None and self.kv_cache_bytes < 1:
            raise EngineConfigError(f"kv_cache_bytes must be >= 1, got {self.kv_cache_bytes}")
        if self.eviction_policy not in _POLICIES:
            raise EngineConfigError(
                f"eviction_policy must be one of {_POLICIES}, got {self.eviction_policy!r}"
            )
        if self.max_model_len is not None and self.max_model_len < 2:
            raise EngineConfigError(f"max_model_len must be >= 2, got {self.max_model_len}")
        # Chunks end on block boundaries so each chunk can commit the blocks it filled.
        if self.prefill_chunk_size < self.block_size or self.prefill_chunk_size % self.block_size:
            raise EngineConfigError(
                f"prefill_chunk_size ({self.prefill_chunk_size}) must be a positive multiple "
                f"of block_size ({self.block_size})"
            )
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise EngineConfigError("max_num_seqs and max_num_batched_tokens must be >= 1")
        if self.max_num_batched_tokens < self.max_num_seqs:
            # As vLLM refuses it: with fewer tokens a step than running sequences, the
            # oldest decodes took every step and the newest waited for them to finish.
            raise EngineConfigError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"max_num_seqs ({self.max_num_seqs})"
            )
        if self.max_num_seqs_per_tenant is not None and self.max_num_seqs_per_tenant < 1:
            raise EngineConfigError("max_num_seqs_per_tenant must be >= 1 (or None: no cap)")
        if self.num_threads is not None and self.num_threads < 1:
            raise EngineConfigError(f"num_threads must be >= 1 (or None), got {self.num_threads}")
        if self.max_num_waiting < 1:
            raise EngineConfigError(f"max_num_waiting must be >= 1, got {self.max_num_waiting}")
        if self.max_num_waiting_per_tenant is not None and self.max_num_waiting_per_tenant < 1:
            raise EngineConfigError("max_num_waiting_per_tenant must be >= 1 (or None)")
        if (
            isinstance(self.host_tier_bytes, bool)
            or not isinstance(self.host_tier_bytes, int)
            or self.host_tier_bytes < 0
        ):
            raise EngineConfigError(
                f"host_tier_bytes must be an int >= 0, got {self.host_tier_bytes!r}"
            )
        if self.kv_disk_bytes < 1 or self.kv_redis_ttl_seconds < 1:
            raise EngineConfigError("kv_disk_bytes and kv_redis_ttl_seconds must be >= 1")
        if not self.kv_tier_timeout_s > 0 or self.kv_tier_write_buffer_bytes < 1:
            raise EngineConfigError(
                "kv_tier_timeout_s must be > 0 and kv_tier_write_buffer_bytes >= 1"
            )
        if (self.kv_disk_path or self.kv_redis_url) and not self.server_salt:
            # The salt keys every stored record's HMAC: without one, anyone who can write
            # to the store could plant KV that this engine would serve.
            raise EngineConfigError(
                "an L3 tier (kv_disk_path / kv_redis_url) needs a server_salt "
                "(CACHEGATE_SERVER_SALT), the same on every engine sharing the store"
            )
        if self.device is not None and not (self.device == "cpu" or self.device.startswith("cuda")):
            raise EngineConfigError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}")

    @property
    def waiting_per_tenant(self) -> int:
        """The per-tenant share of the waiting queue in force."""
        if self.max_num_waiting_per_tenant is not None:
            return self.max_num_waiting_per_tenant
        return max(1, self.max_num_waiting * 3 // 4)

    def with_concrete_dtype(self, loaded_dtype: torch.dtype | None = None) -> EngineConfig:
        """This config with ``dtype`` resolved to a concrete name, logged with the reason.

        With an already loaded model "auto" means the model's own dtype: the KV cache
        must hold what the model computes. Otherwise the hardware decides. The concrete
        name is what the prefix fingerprint hashes, so "auto" never reaches a block key
        (two machines that resolve differently must not share blocks).
        """
        from prefix.model.dtype import dtype_name, resolve_dtype

        if self.dtype != "auto":
            return self
        if loaded_dtype is not None:
            name, reason = dtype_name(loaded_dtype), "auto: the dtype of the given model"
        else:
            import torch

            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            resolved, reason = resolve_dtype("auto", device)
            name = dtype_name(resolved)
        logging.getLogger("cachegate.prefix").info("dtype %s (%s)", name, reason)
        return dataclasses.replace(self, dtype=name)
