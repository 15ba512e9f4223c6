"""The prefix engine: suffix-only prefill over shared paged KV blocks, then decode.

Per request (seed 000): tokenize → chained block keys → longest cached prefix →
check + pin + allocate as one step → prefill only the uncached positions (in
block-aligned chunks, committing each block's key as it becomes full) → decode
→ release tail-first. The blocks stay cached (ref_count 0, findable by key)
until the pool needs them for something else.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import torch

from prefix.block_manager import BlockManager
from prefix.block_pool import BlockPool
from prefix.config import EngineConfig
from prefix.errors import (
    EmptyPromptError,
    KVBudgetExceededError,
    NoFreeBlocksError,
    PromptTooLongError,
)
from prefix.hashing import Extra, ModelFingerprint, chain_root, short
from prefix.kv_cache import PagedKVCache
from prefix.loader import LoadedModel, default_model_path, load_model
from prefix.runner import ModelRunner
from prefix.sampling import Sampler, SamplingParams
from prefix.sequence import Sequence
from prefix.tokenize import Detokenizer, Prompt, PromptEncoder

log = logging.getLogger("cachegate.prefix")

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class GenerationResult:
    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" (EOS or stop string) or "length"
    prompt_tokens: int
    cached_tokens: int  # prompt tokens whose K/V was reused, not computed
    completion_tokens: int
    ttft_s: float


class PrefixEngine:
    """Single-request engine core. ``generate`` is thread-safe (one request at a time)."""

    def __init__(self, config: EngineConfig | None = None, loaded: LoadedModel | None = None):
        self.config = config = config or EngineConfig()
        if loaded is None:
            device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
            path = config.model_path or default_model_path()
            loaded = load_model(path, device=device, dtype=_DTYPES[config.dtype])
        self.loaded = loaded
        self.device = torch.device(loaded.device)
        mc = loaded.config
        self.block_size = config.block_size
        window = loaded.context_window
        self.max_model_len = min(config.max_model_len or window, window)
        self.fingerprint = ModelFingerprint(
            model_id=loaded.model_id,
            weights_digest=loaded.weights_digest,
            dtype=config.dtype,
            block_size=config.block_size,
            position_config=mc.position_config(),
        )
        kv_kwargs = dict(
            num_layers=mc.num_layers,
            block_size=config.block_size,
            num_kv_heads=mc.num_kv_heads,
            head_dim=mc.head_dim,
            dtype=_DTYPES[config.dtype],
            device=self.device,
        )
        if config.num_blocks is not None:
            self.kv_cache = PagedKVCache(num_blocks=config.num_blocks, **kv_kwargs)
        else:
            self.kv_cache = PagedKVCache.from_budget(config.kv_cache_bytes, **kv_kwargs)
        self.pool = BlockPool(self.kv_cache.num_blocks, policy=config.eviction_policy)
        self.blocks = BlockManager(self.pool, config.block_size, config.enable_prefix_caching)
        self.runner = ModelRunner(loaded.model, self.kv_cache, self.device)
        self.encoder = PromptEncoder(loaded.tokenizer)
        self._lock = threading.Lock()

    # ---- identity -------------------------------------------------------------------
    def chain_root(self, namespace: str, cache_salt: str | None = None) -> bytes:
        return chain_root(self.fingerprint, namespace, self.config.server_salt, cache_salt)

    # ---- request lifecycle ----------------------------------------------------------
    def new_sequence(
        self,
        prompt: Prompt,
        params: SamplingParams,
        namespace: str = "default",
        cache_salt: str | None = None,
        extras: Seq[Extra] = (),
    ) -> Sequence:
        """Tokenize and validate; raises a RequestError for prompts that can never run."""
        token_ids = self.encoder.encode(prompt)
        n = len(token_ids)
        if n == 0:
            raise EmptyPromptError("the prompt is empty (0 tokens after tokenization)")
        if n + params.max_tokens > self.max_model_len:
            raise PromptTooLongError(
                f"this model's maximum context length is {self.max_model_len} tokens; the "
                f"request asks for {n + params.max_tokens} ({n} in the prompt, "
                f"{params.max_tokens} to generate)"
            )
        needed = -(-(n + 1) // self.block_size)
        if needed > self.pool.num_blocks:
            raise KVBudgetExceededError(
                f"the prompt needs {needed} KV blocks of {self.block_size} tokens but the pool "
                f"has only {self.pool.num_blocks} ({self.pool.num_blocks * self.block_size} tokens)"
            )
        return Sequence(
            prompt_token_ids=token_ids,
            root=self.chain_root(namespace, cache_salt),
            block_size=self.block_size,
            max_tokens=params.max_tokens,
            extras=tuple(extras),
        )

    def prefill(self, seq: Sequence) -> torch.Tensor:
        """Compute the uncached prompt positions in block-aligned chunks; last logits [vocab]."""
        chunk = self.config.prefill_chunk_size
        logits = None
        while seq.num_computed_tokens < seq.num_prompt_tokens:
            start = seq.num_computed_tokens
            end = min(seq.num_prompt_tokens, (start // chunk + 1) * chunk)
            logits = self.runner.prefill([(seq, start, end)])[0]
            seq.num_computed_tokens = end
            self.blocks.commit_full_blocks(seq)
        assert logits is not None  # admit() leaves at least the last prompt token to compute
        return logits

    # ---- whole requests -------------------------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        params: SamplingParams | None = None,
        namespace: str = "default",
        cache_salt: str | None = None,
    ) -> GenerationResult:
        params = params or SamplingParams()
        seq = self.new_sequence(prompt, params, namespace, cache_salt)
        with self._lock:
            return self._generate_locked(seq, params, namespace)

    def _generate_locked(
        self, seq: Sequence, params: SamplingParams, namespace: str
    ) -> GenerationResult:
        t0 = time.perf_counter()
        if not self.blocks.admit(seq):
            raise NoFreeBlocksError("not enough reclaimable KV blocks for this prompt")
        sampler = Sampler(params)
        detok = self.encoder.detokenizer(params.stop)
        ttft = 0.0
        try:
            logits = self.prefill(seq)
            while True:
                token = sampler.sample(logits)
                if not seq.output_token_ids:
                    ttft = time.perf_counter() - t0
                seq.output_token_ids.append(token)
                reason = self._finish_reason(seq, token, params, detok)
                if reason is not None:
                    seq.finish_reason = reason
                    break
                try:
                    self.blocks.ensure_decode_block(seq)
                except NoFreeBlocksError:
                    seq.finish_reason = "length"
                    break
                logits = self.runner.decode([seq])[0]
                seq.num_computed_tokens = seq.num_tokens
                self.blocks.commit_full_blocks(seq)
        finally:
            self.blocks.release(seq)
        log.info(
            "request done",
            extra={
                "prompt_tokens": seq.num_prompt_tokens,
                "reused_tokens": seq.num_cached_tokens,
                "first_miss_block": seq.num_cached_tokens // self.block_size,
                "namespace_id": short(seq.root),
                "ttft_ms": round(ttft * 1000, 2),
            },
        )
        return GenerationResult(
            text=detok.text,
            token_ids=list(seq.output_token_ids),
            finish_reason=seq.finish_reason or "stop",
            prompt_tokens=seq.num_prompt_tokens,
            cached_tokens=seq.num_cached_tokens,
            completion_tokens=len(seq.output_token_ids),
            ttft_s=ttft,
        )

    def _finish_reason(
        self, seq: Sequence, token: int, params: SamplingParams, detok: Detokenizer
    ) -> str | None:
        if not params.ignore_eos and (
            token in self.loaded.eos_token_ids or token in params.stop_token_ids
        ):
            return "stop"
        if detok.push(token):  # a stop string appeared; text is cut before it
            return "stop"
        if len(seq.output_token_ids) >= params.max_tokens or seq.num_tokens >= self.max_model_len:
            return "length"
        return None

    # ---- introspection for tests, the lab and benchmarks ----------------------------
    def prefill_logits(
        self, prompt: Prompt, namespace: str = "default", cache_salt: str | None = None
    ) -> tuple[torch.Tensor, int]:
        """Admit + suffix-only prefill + release; returns (last logits [vocab], cached tokens)."""
        seq = self.new_sequence(prompt, SamplingParams(max_tokens=1), namespace, cache_salt)
        with self._lock:
            if not self.blocks.admit(seq):
                raise NoFreeBlocksError("not enough reclaimable KV blocks for this prompt")
            try:
                logits = self.prefill(seq).clone()
            finally:
                self.blocks.release(seq)
        return logits, seq.num_cached_tokens
