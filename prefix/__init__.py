"""prefix: our paged-KV engine with exact prefix reuse (seed 000).

Prompts are cut into fixed-size token blocks with chained SHA-256 keys; the longest
run of cached blocks from the start is reused and only the uncached suffix is
prefilled. ``prefix`` imports nothing from ``gateway``, ``semantic`` or
``validators``; it uses the wire types of ``protocol``.

==========================  ==========================================================
concept                     where
==========================  ==========================================================
engine config / errors      ``config.py`` (frozen, validated) / ``errors.py``
**core/** (no torch)        bookkeeping tested in milliseconds
  block keys, chain roots   ``core/hashing.py``
  one request               ``core/request.py`` (``EngineRequest``)
  physical blocks           ``core/block_pool.py`` (+ ``pool_state.py``: counts, checks)
  eviction policies         ``core/eviction.py`` (LRU, coverage)
  admit / grow / release    ``core/block_manager.py``
  a sequence's state        ``core/sequence.py`` (``block_table``, keys, counts)
  continuous batching       ``core/scheduler.py``
**model/** (torch)          the forward pass over block tables
  shapes / dtype            ``model/config.py``
  loading GGUF / HF dirs    ``model/loader.py``
  the decoder               ``model/llama.py``
  the paged KV tensor       ``model/kv_cache.py``
  flat varlen batch         ``model/forward_batch.py``, ``model/runner.py``
  sampler / tokenizer       ``model/sampling.py`` / ``model/tokenize.py``
**tiers/**                  below the GPU pool: L2 host, L3 disk and Redis
  lookup chain              ``tiers/chain.py`` (built by ``tiers/setup.py``)
  L2 host memory            ``tiers/host.py``
  L3 record / stores        ``tiers/kv_record.py``, ``tiers/l3.py``,
                            ``tiers/disk_store.py``, ``tiers/redis_store.py``
**serve/**                  the engine and its OpenAI server
  the engine                ``serve/engine.py`` (``PrefixEngine``)
  async front (thread)      ``serve/async_engine.py``, ``serve/waiting_share.py``
  body → EngineRequest      ``serve/openai_adapter.py``
  HTTP server               ``serve/server.py`` (app, routes), ``serve/completions.py``,
                            ``serve/state.py``, ``serve/trusted_namespace.py``
  metrics / access log      ``serve/metrics.py`` / ``serve/access_log.py``
**lab/**                    ``cachegate lab``: the seed's experiment and numbers
==========================  ==========================================================
"""
