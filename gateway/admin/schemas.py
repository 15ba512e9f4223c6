"""Request and response bodies of the admin API (they document it in the OpenAPI schema)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.policy import TenantPolicy

TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#: Free text bound for the database: PostgreSQL text cannot hold NUL (a 400 here, not a
#: database error).
NO_NUL = r"^[^\x00]*$"


def named(tenant_id: str) -> str:
    """How an error message names a tenant from a path: by its id when that is a valid
    slug (letters, digits, ``_.-``, at most 64), else generically, so that a message
    never echoes arbitrary input (markup, control characters) back."""
    return f"tenant {tenant_id!r}" if re.fullmatch(TENANT_ID_PATTERN, tenant_id) else "the tenant"


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- tenants ---------------------------------------------------------------------------
class TenantCreate(_In):
    id: str = Field(pattern=TENANT_ID_PATTERN, description="A slug: letters, digits, _.-")
    name: str | None = Field(None, min_length=1, max_length=255, pattern=NO_NUL)
    policy: TenantPolicy | None = Field(None, description="Initial policy (version 1)")


class TenantUpdate(_In):
    name: str = Field(min_length=1, max_length=255, pattern=NO_NUL)


class TenantOut(BaseModel):
    id: str
    name: str
    disabled: bool
    created_at: datetime
    updated_at: datetime
    policy_version: int = Field(description="0: no policy stored yet (the defaults apply)")
    active_keys: int


class TenantList(BaseModel):
    object: Literal["list"] = "list"
    data: list[TenantOut]


class TenantDeleted(BaseModel):
    id: str
    deleted: Literal[True] = True
    semantic_entries_removed: int
    keys_removed: int
    policy_versions_removed: int


# ---- API keys --------------------------------------------------------------------------
class KeyCreate(_In):
    name: str = Field("", max_length=255, pattern=NO_NUL)


class KeyOut(BaseModel):
    id: int
    tenant_id: str
    name: str
    prefix: str = Field(description="The first characters of the key; the key itself is never kept")
    created_at: datetime
    revoked_at: datetime | None


class KeyIssued(KeyOut):
    key: str = Field(description="The raw API key: shown this once, store it now")


class KeyList(BaseModel):
    object: Literal["list"] = "list"
    data: list[KeyOut]


# ---- policies --------------------------------------------------------------------------
class PolicyOut(BaseModel):
    tenant_id: str
    version: int = Field(description="0: no policy stored yet (the defaults apply)")
    policy: TenantPolicy
    created_at: datetime | None
    created_by: str | None


class PolicyHistory(BaseModel):
    object: Literal["list"] = "list"
    data: list[PolicyOut] = Field(description="Newest first")


# ---- cache operations ------------------------------------------------------------------
class InvalidateResult(BaseModel):
    tenant_id: str
    scope: Literal["all", "partition", "entry"]
    target: str | None
    removed: int


class CacheEntryOut(BaseModel):
    id: int
    partition_key: str
    question: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    hit_count: int
    last_hit_at: datetime | None


class CacheEntryList(BaseModel):
    object: Literal["list"] = "list"
    data: list[CacheEntryOut]


class SemanticStats(BaseModel):
    enabled: bool
    entries: int
    partitions: int
    hits: float
    misses_by_reason: dict[str, float]
    backfills_by_result: dict[str, float]


class PrefixStats(BaseModel):
    query_tokens: float = Field(description="Prompt tokens sent to the prefix engine")
    hit_tokens: float = Field(description="Prompt tokens reused from the prefix cache")
    token_hit_rate: float | None = Field(description="hit_tokens / query_tokens")


class CacheStats(BaseModel):
    tenant_id: str
    scope: str = Field(description="Counters count since this replica started")
    prefix_namespace: str
    metrics_label: str = Field(description="The tenant's `tenant` label on /metrics")
    requests_by_cache: dict[str, float]
    rate_limited: int
    semantic: SemanticStats
    prefix: PrefixStats


class ExplainRequest(_In):
    """Give the request body exactly as the client sends it (the partition depends on
    its parameters), or just a question (a chat body with the first served model)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {"required": ["body"], "not": {"required": ["question"]}},
                {"required": ["question"], "not": {"required": ["body"]}},
            ]
        },
    )

    endpoint: Literal["chat", "completion"] = "chat"
    body: dict[str, Any] | None = None
    question: str | None = Field(None, min_length=1, max_length=20_000)
    model: str | None = Field(None, min_length=1, max_length=255)
    top_k: int = Field(5, ge=1, le=50, description="Nearest entries to show")
    user: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="The end user the lookup is for (a tenant whose semantic_scope is "
        "user); default: the body's `user`",
    )

    @model_validator(mode="after")
    def _one_source(self) -> ExplainRequest:
        if (self.body is None) == (self.question is None):
            raise ValueError("give exactly one of 'body' or 'question'")
        return self


class ExplainStep(BaseModel):
    check: str
    passed: bool
    detail: str | None = None


class ExplainCandidate(BaseModel):
    entry_id: int
    question: str
    score: float
    above_threshold: bool
    expired: bool
    refusal: str | None = Field(description="Why this entry could not be served (None: it could)")
    verifier_score: float | None = Field(
        None, description="The pair verifier's score of this pair (None: it did not judge it)"
    )
    verifier_unread: str | None = Field(
        None,
        description="Why the verifier refused this pair unread, at score 0 (language_mismatch:"
        " two languages; language_not_covered; too_many_tokens); None: it read it",
    )
    hit_count: int
    expires_at: datetime | None


class ExplainResponse(BaseModel):
    tenant_id: str
    policy_version: int
    decision: Literal["hit", "miss", "skipped"]
    reason: str | None = Field(description="As in x-cachegate-semantic after the colon")
    would_hit: bool
    served_entry_id: int | None
    question: str | None
    partition_key: str | None
    partition_size: int
    threshold: float = Field(
        description="The similarity threshold the lookup applies, on the scale of `score` "
        "(the retrieval threshold when the verifier is on; under CACHEGATE_EMBEDDER=auto "
        "the routed scale, under e5 e5's)"
    )
    threshold_setting: float | None = Field(
        None,
        description="The policy knob that sets it (`retrieval_threshold` with the verifier "
        "on, else `threshold`; a MiniLM cosine, mapped onto the score's scale under auto and "
        "e5); None: the embedder's default",
    )
    best_score: float | None
    verifier_cut: float | None = Field(
        None, description="A candidate is served only above this verifier score (None: off)"
    )
    candidates: list[ExplainCandidate]
    entity_comparison: dict[str, Any] | None = Field(
        description="The question's entities against the best candidate's, kind by kind; "
        "`pair_check` names the check of the two texts together that refused them "
        "(swapped_roles, asks_for_other, narrows_choice, swapped_counts), null when none "
        "did; those run only when every kind's values match"
    )
    steps: list[ExplainStep]


# ---- audit -----------------------------------------------------------------------------
class AuditOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    tenant_id: str | None
    target: str | None
    details: dict[str, Any] | None


class AuditList(BaseModel):
    object: Literal["list"] = "list"
    data: list[AuditOut] = Field(description="Newest first")


# ---- validation errors -----------------------------------------------------------------
_SOURCES = {"body", "query", "path", "header", "cookie"}
_SAFE_PART = re.compile(r"[A-Za-z0-9_-]{1,64}")


def validation_message(errors: Sequence[Any]) -> tuple[str, str | None]:
    """A one-line message and the parameter of FastAPI's request validation errors
    (``RequestValidationError.errors()``), without echoing the input back."""
    if not errors:
        return "invalid request", None
    err = errors[0]
    loc = [str(p) for p in err.get("loc", ())]
    if err.get("type") == "json_invalid":
        return f"the body is not valid JSON: {err.get('ctx', {}).get('error', '')}".strip(), None
    if loc and loc[0] in _SOURCES:
        loc = loc[1:]
    # A location part may be the client's own key (an unknown field, a dict key): named
    # only when it looks like a field name, so that the message never echoes markup.
    path = ".".join(p if _SAFE_PART.fullmatch(p) else "?" for p in loc)
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if err.get("type") == "missing":
        return (f"'{path}' is a required property{more}" if path else f"{msg}{more}"), path or None
    return (f"invalid value for '{path}': {msg}{more}" if path else f"{msg}{more}"), path or None
