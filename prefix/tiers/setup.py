"""Build the levels below the GPU pool from an :class:`EngineConfig`.

Everything that must agree between engines sharing an L3 store is derived
here, from the model fingerprint and the server salt:

* the store namespace (a digest of the fingerprint, and of the record format from
  version 2 on): engines with a different model, dtype, block size or record format
  use different directories / Redis key prefixes;
* the record fingerprint checked on every read (the full digest);
* the HMAC key of every record (the server salt): a block written by an engine
  with another secret fails its check instead of being used.

Engines that should share blocks through Redis therefore need the same model
file, dtype, block size and ``server_salt``; the chained keys need the same
anyway (see :func:`prefix.core.hashing.chain_root`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

from prefix.config import EngineConfig
from prefix.core.hashing import ModelFingerprint
from prefix.errors import EngineConfigError
from prefix.model.kv_cache import PagedKVCache
from prefix.tiers.chain import TierChain
from prefix.tiers.disk_store import DiskBlockStore
from prefix.tiers.host import HostTier
from prefix.tiers.kv_record import FORMAT_VERSION, BlockLayout, BlockStore
from prefix.tiers.l3 import L3Tier

log = logging.getLogger("cachegate.prefix")

__all__ = ["build_tier_chain", "fingerprint_digest"]


def fingerprint_digest(fingerprint: ModelFingerprint) -> bytes:
    """32 bytes naming everything that changes a block's KV (see ``ModelFingerprint``)."""
    canonical = json.dumps(fingerprint.to_tuple(), separators=(",", ":"))
    return hashlib.sha256(b"cachegate-kv-fingerprint\0" + canonical.encode()).digest()


def record_key(server_salt: str) -> bytes:
    """The HMAC key of stored records: derived from the salt under its own label, so
    the raw salt (also a chain-root input) is never used as a key by itself."""
    return hmac.new(server_salt.encode(), b"cachegate-kv-record-v1", hashlib.sha256).digest()


def build_tier_chain(
    config: EngineConfig, kv_cache: PagedKVCache, fingerprint: ModelFingerprint
) -> TierChain | None:
    """The configured L2 and L3 levels, or None when none is on (or caching is off)."""
    if not config.enable_prefix_caching:
        return None
    kv = kv_cache
    shape = (kv.num_layers, 2, kv.block_size, kv.num_kv_heads, kv.head_dim)
    host: HostTier | None = None
    if config.host_tier_bytes > 0:
        try:
            host = HostTier(config.host_tier_bytes, shape, kv.dtype)
        except ValueError as exc:
            raise EngineConfigError(str(exc)) from exc
    digest = fingerprint_digest(fingerprint)
    namespace = store_namespace(digest)
    layout = BlockLayout(dtype=config.dtype, shape=shape)
    stores: list[BlockStore] = []
    if config.kv_disk_path and config.kv_disk_bytes < 2 * layout.nbytes:
        # a store that cannot hold a block would accept every write and keep none
        raise EngineConfigError(
            f"kv_disk_bytes ({config.kv_disk_bytes}) must hold at least two blocks "
            f"({layout.nbytes} bytes each)"
        )
    if config.kv_disk_path:
        try:
            stores.append(
                DiskBlockStore(config.kv_disk_path, config.kv_disk_bytes, namespace=namespace)
            )
        except (OSError, ValueError) as exc:
            raise EngineConfigError(f"kv_disk_path {config.kv_disk_path!r}: {exc}") from exc
    if config.kv_redis_url:
        # Imported here: redis is an optional extra (``cachegate[redis]``).
        from prefix.tiers.redis_store import RedisBlockStore

        stores.append(
            RedisBlockStore(
                config.kv_redis_url,
                namespace=namespace,
                ttl_seconds=config.kv_redis_ttl_seconds,
                timeout_s=config.kv_tier_timeout_s,
            )
        )
    l3 = [
        L3Tier(
            store,
            fingerprint=digest,
            layout=layout,
            dtype=kv.dtype,
            integrity_key=record_key(config.server_salt),
            write_queue=max(1, config.kv_tier_write_buffer_bytes // layout.nbytes),
        )
        for store in stores
    ]
    # Per call the stores time out after kv_tier_timeout_s; one admission reads for at
    # most four of those in all before recomputing the rest.
    chain = TierChain(kv_cache, host, l3, read_budget_s=4 * config.kv_tier_timeout_s)
    if chain.is_empty:
        return None
    log.info(
        "kv tiers: %s",
        ", ".join(["l1_pool", *(["l2_host"] if host is not None else []), *(t.name for t in l3)]),
    )
    return chain


def store_namespace(digest: bytes, version: int = FORMAT_VERSION) -> str:
    """The directory / key prefix of an L3 store: from record format 2 on the version
    is part of it, so engines of two releases sharing a store never read, count as
    foreign or overwrite each other's records (a review, session 41); version 1's name
    is the digest alone, as before, so the blocks stored so far stay readable."""
    if version == 1:
        return digest.hex()[:16]
    return hashlib.sha256(digest + b"record-format:%d" % version).hexdigest()[:16]
