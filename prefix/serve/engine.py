"""The prefix engine: suffix-only prefill over shared paged KV blocks, continuous batching.

Per request (seed 000): tokenize → chained block keys → longest cached prefix →
check + pin + allocate as one step → prefill only the uncached positions (in
block-aligned chunks, committing each block's key as it becomes full) → decode
→ release tail-first. The blocks stay cached (ref_count 0, findable by key)
until the pool needs them for something else.

``step()`` runs one scheduler step for every active request: all decoding
sequences in one batched forward, prefill chunks in another. ``generate()``
drives steps until its own request finishes; ``AsyncEngine`` drives them from a
background thread for many concurrent requests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence as Seq
from contextlib import nullcontext

import torch

from prefix.config import EngineConfig
from prefix.core.block_manager import BlockManager
from prefix.core.block_pool import BlockPool
from prefix.core.hashing import Extra, ModelFingerprint, chain_root
from prefix.core.request import EngineRequest
from prefix.core.scheduler import Scheduler, SchedulerOutput
from prefix.core.sequence import Sequence
from prefix.errors import EngineConfigError, NoFreeBlocksError, StepFailedError
from prefix.kernels.flash_attention import install
from prefix.model.dtype import DTYPES, cpu_flags
from prefix.model.kv_cache import PagedKVCache
from prefix.model.loader import LoadedModel, default_model_path, load_model
from prefix.model.runner import ModelRunner
from prefix.model.sampling import Sampler
from prefix.model.tokenize import Prompt, PromptEncoder
from prefix.serve.active import ActiveRequest
from prefix.serve.outputs import GenerationResult, RequestOutput
from prefix.serve.recovery import StepFailures
from prefix.serve.validate import check_request
from prefix.tiers.host import HostTier
from prefix.tiers.setup import build_tier_chain
from protocol.headers import DEFAULT_NAMESPACE
from protocol.sampling import SamplingParams

log = logging.getLogger("cachegate.prefix")


class PrefixEngine:
    """Engine core. All public methods are thread-safe (one internal lock)."""

    def __init__(self, config: EngineConfig | None = None, loaded: LoadedModel | None = None):
        config = (config or EngineConfig()).with_concrete_dtype(loaded.dtype if loaded else None)
        self.config = config
        if loaded is None:
            device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
            path = config.model_path or default_model_path()
            loaded = load_model(path, device=device, dtype=DTYPES[config.dtype])
        elif loaded.dtype != DTYPES[config.dtype]:  # KV fingerprinted as config.dtype: refuse
            raise EngineConfigError(f"dtype {config.dtype!r}: the model computes in {loaded.dtype}")
        if config.pack_linears and loaded.model.pack():  # in place, a handed-in model too
            log.info("linear layers prepacked for oneDNN (q/k/v and gate/up fused)")
        self.loaded = loaded
        self.device = torch.device(loaded.device)
        # in place, as pack(): a model handed in by the caller gets the kernels too
        log.info("kernels: %s", install(loaded.model, config.kernels, self.device, cpu_flags()))
        mc, window = loaded.config, loaded.context_window
        self.block_size = config.block_size
        # The model's (or the operator's) window; max_model_len below may be smaller.
        self.context_len = min(config.max_model_len or window, window)
        self.max_model_len = self.context_len
        self.fingerprint = ModelFingerprint(
            model_id=loaded.model_id,
            weights_digest=loaded.weights_digest,
            dtype=config.dtype,
            block_size=config.block_size,
            position_config=mc.position_config(),
        )
        self.kv_cache = PagedKVCache.for_model(
            mc,
            config.block_size,
            num_blocks=config.num_blocks,
            memory_bytes=None if config.num_blocks is not None else config.kv_cache_bytes,
            dtype=DTYPES[config.dtype],
            device=self.device,
        )
        pool_tokens = self.kv_cache.num_blocks * config.block_size
        if pool_tokens < self.max_model_len:
            # As vLLM refuses to start when one max-length sequence cannot fit: here the
            # window shrinks to the pool instead, so defaults (max_tokens = what is left
            # of the window) and /v1/models describe requests that can finish.
            log.warning(
                "max_model_len %d capped at %d: the KV pool holds %d blocks of %d tokens",
                self.max_model_len,
                pool_tokens,
                self.kv_cache.num_blocks,
                config.block_size,
            )
            self.max_model_len = pool_tokens
        self.tiers = build_tier_chain(config, self.kv_cache, self.fingerprint)
        self.host_tier: HostTier | None = self.tiers.host if self.tiers else None
        self.pool = BlockPool(
            self.kv_cache.num_blocks,
            policy=config.eviction_policy,
            on_evict=None if self.tiers is None else self.tiers.on_evict,
        )
        if self.tiers is not None:
            self.tiers.pool = self.pool
        self.blocks = BlockManager(
            self.pool, config.block_size, config.enable_prefix_caching, lower_tier=self.tiers
        )
        self.scheduler = Scheduler(
            self.blocks,
            max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=config.max_num_batched_tokens,
            chunk_size=config.prefill_chunk_size,
            max_num_seqs_per_tenant=config.max_num_seqs_per_tenant,
        )
        self.runner = ModelRunner(loaded.model, self.kv_cache, self.device)
        self.encoder = PromptEncoder(loaded.tokenizer, loaded.config.vocab_size)
        self._requests: dict[str, ActiveRequest] = {}
        self._lock = threading.RLock()
        self.step_failures = StepFailures()

    # ---- identity -------------------------------------------------------------------
    def chain_root(self, namespace: str, cache_salt: str | None = None) -> bytes:
        return chain_root(self.fingerprint, namespace, self.config.server_salt, cache_salt)

    # ---- requests -------------------------------------------------------------------
    def request(
        self,
        prompt: Prompt,
        params: SamplingParams | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        cache_salt: str | None = None,
        extras: Seq[Extra] = (),
        request_id: str | None = None,
        kv_block_quota: int | None = None,
        quota_key: str | None = None,
    ) -> EngineRequest:
        """Tokenize ``prompt`` into an :class:`EngineRequest` (identity spelled out once)."""
        return EngineRequest(
            token_ids=tuple(self.encoder.encode(prompt)),
            params=params or SamplingParams(),
            namespace=namespace,
            cache_salt=cache_salt,
            extras=tuple(extras),
            request_id=request_id,
            kv_block_quota=kv_block_quota,
            quota_key=quota_key,
        )

    def new_sequence(self, req: EngineRequest) -> Sequence:
        """Validate against the model and the pool; raises a RequestError for requests
        that can never run. The chain root is derived here, once per request."""
        check_request(
            req,
            # the window /v1/models states (capped at the pool): the error quotes it
            max_model_len=self.max_model_len,
            block_size=self.block_size,
            pool_blocks=self.pool.num_blocks,
        )
        params, quota = req.params, req.kv_block_quota
        seq = Sequence(
            prompt_token_ids=list(req.token_ids),
            root=self.chain_root(req.namespace, req.cache_salt),
            block_size=self.block_size,
            max_tokens=params.max_tokens,
            extras=req.extras,
            arrival_time=time.perf_counter(),
            quota_key=(req.quota_key or req.namespace) if quota is not None else None,
            kv_block_quota=quota,
            tenant_key=req.tenant_key,
            cache_kv=req.cache_kv,
        )
        if req.request_id is not None:
            seq.request_id = req.request_id
        return seq

    def add_request(self, req: EngineRequest) -> str:
        seq = self.new_sequence(req)
        self.add_sequence(seq, req.params)
        return seq.request_id

    def add_sequence(self, seq: Sequence, params: SamplingParams) -> None:
        """Queue a sequence made by ``new_sequence`` (tokenizing needs no engine lock)."""
        with self._lock:
            if seq.request_id in self._requests:
                raise ValueError(f"duplicate request id {seq.request_id!r}")
            self._requests[seq.request_id] = ActiveRequest(
                seq,
                params,
                Sampler(params),
                self.encoder.detokenizer(params.stop),
                arrival=seq.arrival_time,
            )
            self.scheduler.add(seq)

    def abort(self, request_id: str) -> RequestOutput | None:
        """Cancel a request (client gone); its blocks are released at once."""
        return self.end_request(request_id, "abort")

    def has_unfinished(self) -> bool:
        with self._lock:
            return self.scheduler.has_unfinished()

    @property
    def num_running(self) -> int:
        return self.scheduler.num_running

    @property
    def num_waiting(self) -> int:
        return self.scheduler.num_waiting

    # ---- one engine step ------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """One scheduler step. When its model work raises, its unfinished requests end
        with finish reason "error" and the engine goes on (prefix/serve/recovery.py)."""
        with self._lock:
            # the admissions' L3 reads share one budget a step (prefix/tiers/chain.py)
            with self.tiers.one_step() if self.tiers is not None else nullcontext():
                plan = self.scheduler.schedule()
            outputs: list[RequestOutput] = []  # filled as it goes: a failure keeps them
            try:
                self._run(plan, outputs)
            except Exception as exc:
                return outputs + self.step_failures.fail_step(self, plan, exc)
            self.step_failures.succeeded(plan)
            return outputs

    def _run(self, plan: SchedulerOutput, outputs: list[RequestOutput]) -> None:
        now = time.perf_counter()
        # The end of each request's queue time. A prompt with one token left to compute
        # (all but its last cached, or one token long) is planned as a decode: it left
        # the queue too (its trace showed it queued until the end, with no prefill).
        for seq in [chunk.seq for chunk in plan.prefill] + list(plan.decode):
            req = self._requests[seq.request_id]
            req.scheduled_at = req.scheduled_at or now
        outputs += [self._finish(self._requests[s.request_id], "length") for s in plan.finished]
        # (sequence, its logits row, the row's argmax): greedy requests take the argmax,
        # computed for the whole batch in one op instead of one call per sequence
        sampled: list[tuple[Sequence, torch.Tensor, int]] = []
        if plan.decode:
            logits = self.runner.decode(plan.decode)
            best = logits.argmax(dim=-1).tolist()
            for i, seq in enumerate(plan.decode):
                seq.num_computed_tokens = seq.num_tokens
                sampled.append((seq, logits[i], best[i]))
        if plan.prefill:
            chunks = [(c.seq, c.start, c.end) for c in plan.prefill]
            logits = self.runner.prefill(chunks)
            best = logits.argmax(dim=-1).tolist()
            # Only now, the forward done, may its blocks be committed (given keys).
            for i, c in enumerate(plan.prefill):
                c.seq.num_computed_tokens = c.end
                if c.reaches_end:
                    sampled.append((c.seq, logits[i], best[i]))
                else:
                    self.blocks.commit_full_blocks(c.seq)
        for seq, row, argmax in sampled:
            self.blocks.commit_full_blocks(seq)
            outputs.append(self._next_token(self._requests[seq.request_id], row, argmax))

    def _next_token(self, req: ActiveRequest, row: torch.Tensor, argmax: int) -> RequestOutput:
        """Sample and append one request's token. What fails here (its sampler, its stop
        strings) is that request's own fault: it alone ends with "error", and the rest
        of the batch, whose forward succeeded, goes on; it is not a failed step."""
        try:
            token = argmax if req.params.is_greedy else req.sampler.sample(row)
            return self._append_token(req, token)
        except Exception:
            log.exception("sampling request %s failed; it ends alone", req.seq.request_id)
            ended = self.end_request(req.seq.request_id, "error")
            if ended is None:  # already finished by _append_token: nothing left to end
                raise
            return ended

    def end_request(self, request_id: str, reason: str) -> RequestOutput | None:
        """End a request wherever it is, releasing its blocks; None if it is not active."""
        with self._lock:
            req = self._requests.get(request_id)
            if req is None or self.scheduler.abort(request_id) is None:
                return None
            req.seq.finish_reason = reason  # scheduler.abort says "abort"
            return self._finish(req, reason)

    def _append_token(self, req: ActiveRequest, token: int) -> RequestOutput:
        seq, params = req.seq, req.params
        if req.first_token_at is None:
            req.first_token_at = time.perf_counter()
        seq.output_token_ids.append(token)
        reason: str | None = None
        # ignore_eos ignores the model's EOS only (as vLLM): stop ids the caller named
        # still stop.
        if (
            (not params.ignore_eos and token in self.loaded.eos_token_ids)
            or token in params.stop_token_ids
            or req.detok.push(token)
        ):
            reason = "stop"
        elif len(seq.output_token_ids) >= params.max_tokens or seq.num_tokens >= self.max_model_len:
            reason = "length"
        if reason is not None:
            self.scheduler.finish(seq, reason)
            return self._finish(req, reason, [token])
        return req.output([token], req.detok.delta(), finished=False)

    def _finish(
        self, req: ActiveRequest, reason: str, new_tokens: list[int] | None = None
    ) -> RequestOutput:
        self._requests.pop(req.seq.request_id, None)
        return req.final_output(reason, new_tokens or [], self.block_size)

    # ---- whole requests, synchronously ----------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        params: SamplingParams | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        cache_salt: str | None = None,
    ) -> GenerationResult:
        """Run one request to completion (other queued requests advance alongside it).

        A convenience for tests, the lab and benchmarks; servers use ``AsyncEngine``.
        """
        rid = self.add_request(
            self.request(prompt, params, namespace=namespace, cache_salt=cache_salt)
        )
        tokens: list[int] = []
        text: list[str] = []
        while True:
            for out in self.step():
                if out.request_id != rid:
                    continue
                tokens.extend(out.new_token_ids)
                text.append(out.delta)
                if out.finish_reason == "error":
                    raise StepFailedError("the engine step computing this request failed")
                if out.finished:
                    return GenerationResult(
                        text="".join(text),
                        token_ids=tokens,
                        finish_reason=out.finish_reason or "stop",
                        prompt_tokens=out.prompt_tokens,
                        cached_tokens=out.cached_tokens,
                        completion_tokens=out.completion_tokens,
                        ttft_s=out.ttft_s or 0.0,
                    )

    def prefill_logits(
        self, prompt: Prompt, namespace: str = DEFAULT_NAMESPACE, cache_salt: str | None = None
    ) -> tuple[torch.Tensor, int]:
        """Admit + suffix-only prefill + release; (last logits [vocab], cached tokens).

        For tests, the lab and benchmarks: the logits a request would sample from.
        """
        req = self.request(
            prompt, SamplingParams(max_tokens=1), namespace=namespace, cache_salt=cache_salt
        )
        seq = self.new_sequence(req)
        with self._lock:
            try:  # admit inside: whatever raises after it must not leave blocks pinned
                if not self.blocks.admit(seq):
                    raise NoFreeBlocksError("not enough reclaimable KV blocks for this prompt")
                chunk = self.config.prefill_chunk_size
                logits = None
                while seq.num_computed_tokens < seq.num_tokens:
                    start = seq.num_computed_tokens
                    end = min(seq.num_tokens, (start // chunk + 1) * chunk)
                    logits = self.runner.prefill([(seq, start, end)])[0]
                    seq.num_computed_tokens = end
                    self.blocks.commit_full_blocks(seq)
                assert logits is not None
                return logits.clone(), seq.num_cached_tokens
            finally:
                self.blocks.release(seq)

    # ---- lower tiers ----------------------------------------------------------------
    def flush_tiers(self, timeout: float = 30.0) -> bool:
        """Wait until every block queued for an L3 store is written; False on timeout."""
        return self.tiers.flush(timeout) if self.tiers is not None else True

    def close(self) -> None:
        """Write what is queued for the L3 stores and stop their writer threads."""
        if self.tiers is not None:
            self.tiers.close()
