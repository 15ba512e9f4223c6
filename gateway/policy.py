"""A tenant's cache policy: validated, versioned in the DB, effective on the next request."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from semantic import SemanticPolicy
from validators import ENTITY_KINDS, GUARDS

log = logging.getLogger("cachegate.gateway")

DEFAULT_THRESHOLD = 0.89
DEFAULT_GUARDS = (
    "time_sensitive",
    "personalized",
    "numeric_computation",
    "high_risk",
    "code_generation",
)

# Upper bounds of the integer knobs. Each value ends up in a float (the rate limiter's
# bucket), a timedelta (a TTL added to a datetime), or an INTEGER column (the stored
# entry's ttl_seconds is 32-bit on PostgreSQL); an unbounded value was accepted by the
# admin API and then failed every request or every backfill of the tenant.
MAX_INT32 = 2**31 - 1
MAX_TTL_SECONDS = MAX_INT32  # about 68 years; None means no expiry
MAX_RATE_LIMIT_RPM = 10**9
MAX_RATE_LIMIT_TPM = 10**12
MAX_COUNT = MAX_INT32  # kv_block_quota, max_semantic_*, max_concurrent_requests


class JudgeBand(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    low: float = Field(ge=0.0, le=1.0)
    high: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> JudgeBand:
        if self.low > self.high:
            raise ValueError("judge_band.low must be <= judge_band.high")
        return self


class TenantPolicy(BaseModel):
    """Every knob an operator sets per tenant (see the admin API).

    Strict, as the ``/v1`` request models: ``true`` for a count was read as 1 (a rate
    limit of one request a minute, a KV quota of one block), ``"yes"`` as a flag, a
    string as a number. A number for a float field is still a number (1 is 1.0)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    semantic_enabled: bool = True
    # "guarded": every question except the guarded scenarios; "allowlist": only
    # questions about one of `allowlist_topics` (answers known to be stable).
    mode: Literal["guarded", "allowlist"] = "guarded"
    # Who shares answers (seed 003, 安全考量: the cache key includes the user):
    # "tenant", an FAQ shared by all of the tenant's end users; "user", every end user
    # (the request's `user` field or the configured user header) has an own partition,
    # and a request without a user identity is neither looked up nor stored.
    semantic_scope: Literal["tenant", "user"] = "tenant"
    # Who shares prefix KV blocks: "tenant" (a system prompt is not a user's answer, and
    # sharing it is the point), or "user", where no end user's `cached_tokens` or time
    # to first token can reveal what another of the tenant's users sent, at the price of
    # every user prefilling the shared system prompt once (TenantContext.for_user).
    prefix_scope: Literal["tenant", "user"] = "tenant"
    allowlist_topics: list[str] = Field(default_factory=list, max_length=200)
    threshold: float = Field(DEFAULT_THRESHOLD, gt=0.0, le=1.0)
    # With the pair verifier on (CACHEGATE_VERIFIER, gateway/verification.py): the error
    # bound the tenant sets, which gateway/calibration.py turns into the verifier's cut,
    # and the cosine a candidate needs before the verifier sees it (None: the measured
    # default for the embedder in use). `threshold` applies while the verifier is off.
    # Both, and the judge band, are MiniLM cosines, put on e5's scale under `auto` and
    # `e5` (semantic/embedder_routed.py knobs_on_e5_scale).
    target_misfire_rate: float = Field(0.01, gt=0.0, lt=1.0)
    retrieval_threshold: float | None = Field(None, gt=0.0, le=1.0)
    ttl_seconds: int | None = Field(86_400, gt=0, le=MAX_TTL_SECONDS)
    sliding_ttl: bool = False
    entity_kinds: list[str] | None = None  # None: every kind the validators know
    guards: list[str] = Field(default_factory=lambda: list(DEFAULT_GUARDS))
    judge_band: JudgeBand | None = None
    max_temperature: float = Field(1.0, ge=0.0, le=2.0)
    store_enabled: bool = True
    sample_rate: float = Field(0.05, ge=0.0, le=1.0)
    # NUL: PostgreSQL text cannot hold it, and a sharing group's name travels in a header.
    prefix_namespace: str | None = Field(
        None, min_length=1, max_length=128, pattern=r"^[^\x00]*$"
    )  # sharing group
    kv_block_quota: int | None = Field(None, gt=0, le=MAX_COUNT)
    rate_limit_rpm: int | None = Field(None, gt=0, le=MAX_RATE_LIMIT_RPM)
    # Model tokens (prompt + completion of answers a model produced) a minute, per tenant
    # across replicas; semantic hits cost none (gateway/proxy/token_limit.py).
    rate_limit_tpm: int | None = Field(None, gt=0, le=MAX_RATE_LIMIT_TPM)
    # Requests the tenant may have in flight at once on each gateway replica, streams
    # until their last event (gateway/proxy/concurrency.py); None: no cap.
    max_concurrent_requests: int | None = Field(None, gt=0, le=MAX_COUNT)
    # Bounds on the tenant's semantic cache (gateway/proxy/semantic_limits.py).
    max_semantic_entries: int = Field(100_000, gt=0, le=MAX_COUNT)
    max_semantic_partitions: int = Field(10_000, gt=0, le=MAX_COUNT)
    semantic_limit_action: Literal["evict_oldest", "skip"] = "evict_oldest"
    # Read from a stored version with fields left out or defaulted (``from_stored``): a
    # PATCH must not build on it (it would store the defaults as the operator's choice).
    _read_degraded: bool = PrivateAttr(default=False)

    @property
    def is_read_degraded(self) -> bool:
        return self._read_degraded

    @classmethod
    def from_stored(cls, stored: object) -> TenantPolicy:
        """A stored policy version, read so that it never fails the tenant's requests.

        One written before the upper bounds above existed may hold a larger value: it is
        read as the bound, which means the same in practice. A field this build does not
        know (written by a newer replica during a rolling upgrade, or before a rollback)
        is left out; a known field whose value this build cannot read takes its default,
        and then the semantic layer is off for the tenant, since a default could share
        more than the operator chose; an unknown field does the same, since it may be one
        that narrows sharing. Both are logged by field name, and the policy read so is
        marked (``is_read_degraded``): a PATCH refuses to build on it, a PUT replaces it.
        Before session 46 either was a 500 on every request of the tenant and on the
        admin writes that would have replaced it (a review)."""
        if not isinstance(stored, dict):
            log.warning("a stored policy is not a JSON object; read as defaults, semantic off")
            return cls._degraded({})
        unknown = sorted(str(k) for k in stored if k not in cls.model_fields)
        data = {k: v for k, v in stored.items() if k in cls.model_fields}
        if unknown:
            log.warning("a stored policy has fields this build does not know: %s", unknown[:20])
        # Likewise NUL, refused in these fields since: read without it, not as an error.
        if isinstance(data.get("prefix_namespace"), str):
            data["prefix_namespace"] = data["prefix_namespace"].replace("\x00", "") or None
        if isinstance(data.get("allowlist_topics"), list):
            data["allowlist_topics"] = [
                t.replace("\x00", "") if isinstance(t, str) else t for t in data["allowlist_topics"]
            ]
        for name in _BOUNDED:
            value = data.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                data[name] = min(value, _BOUNDED[name])
        # Lax: a version stored before the model was strict was coerced when written,
        # but is read as tolerantly as it was then.
        try:
            policy = cls.model_validate(data, strict=False)
        except ValidationError as exc:
            bad = sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]} & set(data))
            log.warning("a stored policy's fields are unreadable: %s; semantic off", bad)
            return cls._degraded({k: v for k, v in data.items() if k not in bad})
        return cls._degraded(data) if unknown else policy

    @classmethod
    def _degraded(cls, data: dict[str, Any]) -> TenantPolicy:
        """``data`` with the semantic layer off, marked as read degraded."""
        try:
            policy = cls.model_validate(data | {"semantic_enabled": False}, strict=False)
        except ValidationError:  # fields that fail only together (judge_band's order)
            policy = cls(semantic_enabled=False)
        policy._read_degraded = True
        return policy

    @field_validator("entity_kinds")
    @classmethod
    def _known_kinds(cls, v: list[str] | None) -> list[str] | None:
        # The known names, never the unknown ones: an error message does not echo input.
        if v is not None and set(v) - set(ENTITY_KINDS):
            raise ValueError(f"unknown entity kind; known: {list(ENTITY_KINDS)}")
        # each once, in the order given: 200,000 repeats were stored in every later
        # policy version and audit event, and slowed the tenant's requests (a review)
        return None if v is None else list(dict.fromkeys(v))

    @field_validator("guards")
    @classmethod
    def _known_guards(cls, v: list[str]) -> list[str]:
        if set(v) - set(GUARDS):
            raise ValueError(f"unknown guard; known: {list(GUARDS)}")
        return list(dict.fromkeys(v))  # each once, as entity_kinds

    @field_validator("allowlist_topics")
    @classmethod
    def _clean_topics(cls, v: list[str]) -> list[str]:
        topics = [t.strip().lower() for t in v if t.strip()]
        if any(len(t) > 200 for t in topics):
            raise ValueError("allowlist topics are at most 200 characters")
        if any("\x00" in t for t in topics):
            raise ValueError("allowlist topics cannot hold a NUL character")
        return topics

    def semantic_policy(self) -> SemanticPolicy:
        return SemanticPolicy(
            threshold=self.threshold,
            ttl_seconds=self.ttl_seconds,
            sliding_ttl=self.sliding_ttl,
            entity_kinds=self.entity_kinds,
            guards=tuple(self.guards),
        )

    def is_allowlisted(self, question: str) -> bool:
        q = question.lower()
        return any(topic in q for topic in self.allowlist_topics)


_BOUNDED: dict[str, int] = {
    "ttl_seconds": MAX_TTL_SECONDS,
    "kv_block_quota": MAX_COUNT,
    "rate_limit_rpm": MAX_RATE_LIMIT_RPM,
    "rate_limit_tpm": MAX_RATE_LIMIT_TPM,
    "max_concurrent_requests": MAX_COUNT,
    "max_semantic_entries": MAX_COUNT,
    "max_semantic_partitions": MAX_COUNT,
}
