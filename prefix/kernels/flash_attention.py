"""Causal bf16 flash attention on AVX512-BF16 CPUs: long prefill chunks
(``flash_attention.c``) and batches of short chunks over paged contexts, decode steps
included (``paged_attention.c``), compiled together into one library.

Torch's CPU flash kernel (SDPA) computes one query row's scores at a time and on a
Zen 4 core reaches about a quarter of its bf16 peak; this kernel scores a block of 32
keys against 8 query rows per step with ``vdpbf16ps``. Measured in isolation on a
2-core Zen 4 VM (9 query / 3 KV heads, head dim 64): a 2,200-token causal layer 14.5 ms
against SDPA's 52 ms, 200 new tokens over 2,200 cached 2.6 ms against 10.0 ms (see
bench/prefill_attention.py for the run in the repo). Outputs agree with a float32
reference as closely as SDPA's bf16 path does (tests/prefix/kernels).

It reads a cached context straight from the paged cache through the block table, so a
prefix hit attends its suffix without gathering the prefix first. The paged kernel
does the same for a whole batch of short chunks (decode's one token per sequence, or
questions arriving together after one cached prompt): the prefix the sequences share is
packed once and scored against every sequence's queries, then each sequence's own keys;
one online softmax per row across both (no gather, no padding, no log-sum-exp merge).
"""

from __future__ import annotations

import ctypes
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from prefix.errors import EngineConfigError, KernelUnavailableError
from prefix.kernels.build import AVX512_BF16_FLAGS, build

log = logging.getLogger("cachegate.prefix")

SOURCES = [
    Path(__file__).with_name(n) for n in ("flash_attention.c", "paged_attention.c", "elementwise.c")
]
MAX_GROUP = 16  # query heads per KV head the paged kernel takes
HEAD_DIMS = (64, 128)  # the head dims the kernel is instantiated for

_ARGTYPES: list[Any] = [
    ctypes.c_void_p,  # q
    ctypes.c_int64,  # q row stride
    ctypes.c_void_p,  # k
    ctypes.c_int64,
    ctypes.c_void_p,  # v
    ctypes.c_int64,
    ctypes.c_void_p,  # block table (NULL: contiguous k/v rows)
    ctypes.c_int64,  # block size
    ctypes.c_void_p,  # out
    ctypes.c_int64,
    ctypes.c_int64,  # num_q
    ctypes.c_int64,  # num_k
    ctypes.c_int,  # num_heads
    ctypes.c_int,  # num_kv_heads
    ctypes.c_int,  # head dim
    ctypes.c_int64,  # offset: absolute position of the first query
    ctypes.c_int64,  # window (0: none)
    ctypes.c_float,  # softmax scale
    ctypes.c_int,  # threads
]


_PAGED_ARGTYPES: list[Any] = [
    ctypes.c_void_p,  # q
    ctypes.c_int64,
    ctypes.c_void_p,  # q_starts [S]
    ctypes.c_void_p,  # q_lens [S]
    ctypes.c_void_p,  # seq_lens [S]
    ctypes.c_int64,  # num seqs
    ctypes.c_int64,  # shared len
    ctypes.c_void_p,  # k slots
    ctypes.c_void_p,  # v slots
    ctypes.c_int64,  # slot stride
    ctypes.c_void_p,  # block tables [S, table_stride]
    ctypes.c_int64,  # table stride
    ctypes.c_int64,  # block size
    ctypes.c_void_p,  # out
    ctypes.c_int64,
    ctypes.c_int,  # num_heads
    ctypes.c_int,  # num_kv_heads
    ctypes.c_int,  # head dim
    ctypes.c_float,  # scale
    ctypes.c_int,  # threads
]


@dataclass(frozen=True)
class PagedPlan:
    """A batch's tables, checked once and used by every layer's call."""

    query_starts: torch.Tensor  # [S] int64: row of each sequence's first query
    query_lens: torch.Tensor  # [S] int64
    seq_lens: torch.Tensor  # [S] int64: keys of each sequence, its new tokens included
    block_tables: torch.Tensor  # [S, max_blocks] int64, contiguous
    shared_len: int  # leading keys every sequence holds in the same physical blocks
    block_size: int
    num_rows: int  # rows q and out must have
    num_blocks: int  # blocks the cache must have (every table entry is below it)


def cpu_supports(flags: frozenset[str]) -> bool:
    return all(flag in flags for flag in AVX512_BF16_FLAGS)


class FlashAttention:
    """The compiled kernel, bound through ctypes; ``load`` builds it on first use."""

    def __init__(self, library: Path) -> None:
        self.library = library
        lib = ctypes.CDLL(str(library))
        self._fn = lib.cachegate_flash_attention
        self._fn.restype = ctypes.c_int
        self._fn.argtypes = _ARGTYPES
        self._paged = lib.cachegate_paged_attention
        self._paged.restype = ctypes.c_int
        self._paged.argtypes = _PAGED_ARGTYPES

    @classmethod
    def load(cls, flags: frozenset[str], cache_dir: Path | None = None) -> FlashAttention:
        """Build (or reuse) and load the kernel; raises KernelUnavailableError."""
        if not cpu_supports(flags):
            missing = [f for f in AVX512_BF16_FLAGS if f not in flags]
            raise KernelUnavailableError(f"the CPU lacks {', '.join(missing)}")
        try:
            return cls(build(SOURCES, cache_dir, name="kernels"))
        except OSError as exc:
            raise KernelUnavailableError(f"loading the compiled kernel failed: {exc}") from exc

    @staticmethod
    def supports(q: torch.Tensor, num_kv_heads: int) -> bool:
        """Whether this call shape runs here (bf16 on CPU, a built head dim, GQA groups)."""
        return (
            q.device.type == "cpu"
            and q.dtype == torch.bfloat16
            and q.shape[-1] in HEAD_DIMS
            and q.shape[1] % num_kv_heads == 0
        )

    @staticmethod
    def supports_paged(
        dtype: torch.dtype, num_heads: int, num_kv_heads: int, head_dim: int
    ) -> bool:
        return (
            dtype == torch.bfloat16
            and head_dim in HEAD_DIMS
            and num_heads % num_kv_heads == 0
            and num_heads // num_kv_heads <= MAX_GROUP
        )

    @staticmethod
    def plan_paged(
        query_starts: list[int],
        query_lens: list[int],
        seq_lens: list[int],
        padded_tables: torch.Tensor,
        shared_len: int,
        block_size: int,
        num_blocks: int,
        num_rows: int,
    ) -> PagedPlan:
        """Check a batch's tables once: the kernel dereferences every entry it reads."""
        tables = padded_tables.to(torch.int64).contiguous()
        num_seqs = len(seq_lens)
        if tables.dim() != 2 or tables.shape[0] != num_seqs:
            raise KernelUnavailableError("block tables and seq_lens disagree in shape")
        if not len(query_starts) == len(query_lens) == num_seqs:
            raise KernelUnavailableError("query starts and lengths disagree in shape")
        for start, q_len, seq_len in zip(query_starts, query_lens, seq_lens, strict=True):
            if not 1 <= q_len <= seq_len <= tables.shape[1] * block_size:
                raise KernelUnavailableError("a sequence is longer than its block table")
            if start < 0 or start + q_len > num_rows:
                raise KernelUnavailableError("a sequence's queries lie outside q")
            if not 0 <= shared_len <= seq_len - q_len:
                raise KernelUnavailableError("a query sits inside the shared prefix")
        if tables.numel() and not 0 <= int(tables.min()) <= int(tables.max()) < num_blocks:
            raise KernelUnavailableError("block_table names a block outside the cache")

        def as_long(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.int64)

        return PagedPlan(
            as_long(query_starts),
            as_long(query_lens),
            as_long(seq_lens),
            tables,
            shared_len,
            block_size,
            num_rows,
            num_blocks,
        )

    def attend_paged(
        self,
        q: torch.Tensor,
        k_slots: torch.Tensor,
        v_slots: torch.Tensor,
        plan: PagedPlan,
        out: torch.Tensor,
    ) -> None:
        """Causal attention of each planned sequence's queries (rows of ``q`` [T, H, D])
        over its whole context in the paged cache's slots [num_slots, Hkv, D]; writes
        those rows of ``out`` [T, H, D] (other rows are left alone)."""
        num_heads, head_dim = q.shape[1], q.shape[2]
        for name, t in (("q", q), ("k", k_slots), ("v", v_slots), ("out", out)):
            if t.dtype != torch.bfloat16 or t.stride(2) != 1 or t.stride(1) != head_dim:
                raise KernelUnavailableError(f"{name} must be bf16 with packed [heads, D] rows")
        if k_slots.stride(0) != v_slots.stride(0):
            raise KernelUnavailableError("k and v slots must share one layout")
        if q.shape[0] < plan.num_rows or out.shape[0] < plan.num_rows:
            raise KernelUnavailableError("q or out has fewer rows than planned")
        if min(k_slots.shape[0], v_slots.shape[0]) < plan.num_blocks * plan.block_size:
            raise KernelUnavailableError("the cache is smaller than the plan's")
        rc = self._paged(
            q.data_ptr(),
            q.stride(0),
            plan.query_starts.data_ptr(),
            plan.query_lens.data_ptr(),
            plan.seq_lens.data_ptr(),
            plan.seq_lens.numel(),
            plan.shared_len,
            k_slots.data_ptr(),
            v_slots.data_ptr(),
            k_slots.stride(0),
            plan.block_tables.data_ptr(),
            plan.block_tables.stride(0),
            plan.block_size,
            out.data_ptr(),
            out.stride(0),
            num_heads,
            k_slots.shape[1],
            head_dim,
            1.0 / math.sqrt(head_dim),
            torch.get_num_threads(),
        )
        if rc != 0:
            raise KernelUnavailableError(f"the paged kernel refused the call (code {rc})")

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        out: torch.Tensor,
        num_k: int,
        window: int | None,
        block_table: torch.Tensor | None = None,
        block_size: int = 0,
    ) -> None:
        """Write causal attention of ``q`` [num_q, H, D] over ``num_k`` keys into ``out``.

        ``k``/``v`` are [num_k, Hkv, D] rows, or with ``block_table`` (int64, one entry
        per block) a paged cache's slots [num_slots, Hkv, D]. The queries are the last
        ``num_q`` of the ``num_k`` positions. Every tensor is bf16 with a contiguous
        last two dims' row ([H, D] packed) and any row stride; nothing is copied.
        """
        num_q, num_heads, head_dim = q.shape
        num_kv_heads = k.shape[1]
        for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):
            if t.dtype != torch.bfloat16 or t.stride(2) != 1 or t.stride(1) != head_dim:
                raise KernelUnavailableError(f"{name} must be bf16 with packed [heads, D] rows")
        if block_table is not None:
            if block_table.dtype != torch.int64 or not block_table.is_contiguous():
                raise KernelUnavailableError("block_table must be a contiguous int64 tensor")
            if block_table.numel() * block_size < num_k:
                raise KernelUnavailableError("block_table is shorter than the context")
            # the kernel dereferences every entry: never let a bad id read out of bounds
            num_blocks = min(k.shape[0], v.shape[0]) // block_size
            used = block_table[: -(-num_k // block_size)]
            if used.numel() and not 0 <= int(used.min()) <= int(used.max()) < num_blocks:
                raise KernelUnavailableError("block_table names a block outside the cache")
        elif k.shape[0] < num_k or v.shape[0] < num_k:
            raise KernelUnavailableError("k/v hold fewer rows than the context")
        rc = self._fn(
            q.data_ptr(),
            q.stride(0),
            k.data_ptr(),
            k.stride(0),
            v.data_ptr(),
            v.stride(0),
            block_table.data_ptr() if block_table is not None else None,
            block_size,
            out.data_ptr(),
            out.stride(0),
            num_q,
            num_k,
            num_heads,
            num_kv_heads,
            head_dim,
            num_k - num_q,
            window or 0,
            1.0 / math.sqrt(head_dim),
            torch.get_num_threads(),
        )
        if rc != 0:
            raise KernelUnavailableError(f"the kernel refused the call (code {rc})")


def select(
    choice: str, dtype: torch.dtype, device: torch.device, flags: frozenset[str]
) -> tuple[FlashAttention | None, str]:
    """The kernels an engine should use for ``choice`` ("auto", "native" or "torch").

    Returns the kernel (None: SDPA) and the reason, which the engine logs. "native"
    where the kernel cannot run raises EngineConfigError; "auto" falls back.
    """
    if choice == "torch":
        return None, "torch (SDPA, torch element-wise ops): chosen"
    try:
        if device.type != "cpu" or dtype != torch.bfloat16:
            raise KernelUnavailableError(f"it runs bf16 on CPU, the model is {dtype} on {device}")
        kernel = FlashAttention.load(flags)
    except KernelUnavailableError as exc:
        if choice == "native":
            raise EngineConfigError(f"kernels 'native' cannot run here: {exc}") from exc
        return None, f"torch (SDPA): the native kernels are unavailable ({exc})"
    return kernel, f"native kernels ({kernel.library.name})"


def model_shape_problem(config: Any) -> str | None:
    """Why the kernels cannot run this model's shapes (None: they can). ``config`` is a
    ModelConfig: head dims the kernels are built for, whole GQA groups, and widths the
    element-wise kernels step through 16 (32 for RoPE's halves) at a time."""
    if config.head_dim not in HEAD_DIMS:
        return f"head dim {config.head_dim} (built for {HEAD_DIMS})"
    if (
        config.num_heads % config.num_kv_heads
        or config.num_heads // config.num_kv_heads > MAX_GROUP
    ):
        return f"{config.num_heads} query heads on {config.num_kv_heads} KV heads"
    if config.hidden_size % 16 or config.intermediate_size % 16:
        sizes = f"{config.hidden_size} / {config.intermediate_size}"
        return f"hidden / intermediate sizes {sizes} (not multiples of 16)"
    return None


def install(model: Any, choice: str, device: torch.device, flags: frozenset[str]) -> str:
    """Give ``model`` (a LlamaModel) the kernels ``choice`` selects, in place; the reason,
    for the engine's log. "native" where they cannot run raises EngineConfigError."""
    from prefix.kernels.fused_ops import FusedOps

    kernel, reason = select(choice, model.dtype, device, flags)
    problem = model_shape_problem(model.config) if kernel is not None else None
    if problem is not None:
        if choice == "native":
            raise EngineConfigError(f"kernels 'native' cannot run this model: {problem}")
        kernel, reason = None, f"torch (SDPA): the native kernels do not take {problem}"
    model.flash_attention = kernel
    model.fused_ops = FusedOps(kernel.library) if kernel is not None else None
    return reason
