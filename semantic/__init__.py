"""Semantic cache: answer a repeated question with no inference.

A question is embedded (:mod:`semantic.embedder`) and compared, by cosine
similarity in a FAISS index (:mod:`semantic.index`), only with earlier
questions of the same *partition* (:mod:`semantic.partition`): same tenant
namespace, model, embedder, answer-changing parameters and conversation
context. The best candidate at or above the threshold that is fresh (TTL) and
accepted by the entity validator (:mod:`semantic.hit_validator`) is served.
Entries live in SQLite or PostgreSQL (:mod:`semantic.store`, the records it takes
and returns in :mod:`semantic.entries`; the application
creates the schema with its migrations); indexes are rebuilt from the database
at start-up. A repeated question is decided from memory alone when its vector
(:mod:`semantic.question_vectors`), its candidates' rows (:mod:`semantic.entry_memo`)
and the verifier's verdicts are kept: ``lookup(..., local_only=True)`` raises
:class:`~semantic.errors.WouldBlockError` instead of waiting, so the gateway can
answer such a lookup on its event loop. A question the embedder does not represent
(mostly ``[UNK]``, or for MiniLM a Latin-script language other than English:
:mod:`semantic.latin_language`) is neither served nor stored. Searches share each
index's lock, changes take it alone (:mod:`semantic.rwlock`). Whether an answer will be stored
(:mod:`semantic.storable`) is one function that ``store`` and the gateway's backfill
both ask, so the backfill makes room under a tenant's bounds only for answers kept.
An invalidation fences its tenant first (:mod:`semantic.fences`): a store of a
question asked before the fence (``store(..., asked_at=...)``) keeps nothing.

Typical wiring (the gateway does this)::

    store = EntryStore(url)  # a database the application has migrated
    cache = SemanticCache(Embedder(), store, validator=validators_adapter)
    cache.rebuild()
    query = SemanticQuery.from_chat(tenant="acme", body=request_body)
    result = cache.lookup(query, policy)
    if not result.hit:
        response = upstream(request_body)
        cache.store(query, response, policy, embedding=result.embedding)

``semantic`` imports nothing from ``gateway``, ``prefix`` or ``validators``.
"""

from semantic.cache import SemanticCache
from semantic.cacheability import uncacheable_reason
from semantic.embedder import Embedder
from semantic.embedder_base import TextEmbedder
from semantic.errors import (
    EmbedderError,
    EntryNotFoundError,
    InvalidQuestionError,
    InvalidRequestError,
    InvalidVectorError,
    SemanticError,
    StoreUnavailableError,
    WouldBlockError,
)
from semantic.hit_validator import HitValidator
from semantic.index import VectorIndex
from semantic.model_files import bundled_model_path
from semantic.partition import (
    ANSWER_PARAMS,
    IGNORED_PARAMS,
    SemanticQuery,
    partition_key,
    split_question,
)
from semantic.partitioned_index import PartitionedIndex
from semantic.policy import DEFAULT_POLICY, DEFAULT_THRESHOLD, SemanticPolicy
from semantic.question import MAX_QUESTION_CHARS, normalize_question
from semantic.results import LookupResult, StoreResult
from semantic.store import DEFAULT_URL, EntryStore, NewEntry, StoredEntry
from semantic.verification import VERIFIER_ERROR, VERIFIER_REFUSED, HitVerifier

__all__ = [
    "ANSWER_PARAMS",
    "DEFAULT_POLICY",
    "DEFAULT_THRESHOLD",
    "DEFAULT_URL",
    "IGNORED_PARAMS",
    "MAX_QUESTION_CHARS",
    "VERIFIER_ERROR",
    "VERIFIER_REFUSED",
    "Embedder",
    "EmbedderError",
    "EntryNotFoundError",
    "EntryStore",
    "HitValidator",
    "HitVerifier",
    "InvalidQuestionError",
    "InvalidRequestError",
    "InvalidVectorError",
    "LookupResult",
    "NewEntry",
    "PartitionedIndex",
    "SemanticCache",
    "SemanticError",
    "SemanticPolicy",
    "SemanticQuery",
    "StoreResult",
    "StoreUnavailableError",
    "StoredEntry",
    "TextEmbedder",
    "VectorIndex",
    "WouldBlockError",
    "bundled_model_path",
    "normalize_question",
    "partition_key",
    "split_question",
    "uncacheable_reason",
]
