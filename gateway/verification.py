"""The pair verifier on the gateway's hit path (issue 12, parts 1 and 3).

``CACHEGATE_VERIFIER=on`` (the default) loads the shipped verifier
(``validators.verifier.PairVerifier``) in the app's lifespan, off the import
path: ``import gateway.app`` loads no torch. :class:`GatewayVerifier` is what
the semantic cache calls (it satisfies ``semantic.verification.HitVerifier``):
one batched call per lookup over the candidates that passed the retrieval
threshold and the entity validator; a pair the verifier cannot read scores 0,
and any failure is a miss (the cache fails closed).

:class:`Verification` turns a tenant's policy into the lookup's policy: the
retrieval threshold (the tenant's ``retrieval_threshold``, else the measured
default for the embedder in use, :data:`RETRIEVAL_THRESHOLDS`) and the verifier
cut for its ``target_misfire_rate`` (:mod:`gateway.calibration`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Engine

from gateway.calibration import CutInForce
from gateway.calibration_labels import Retrieval
from gateway.calibrator import Calibrator
from gateway.db_rest import DbDeadlineError, within
from gateway.policy import TenantPolicy
from gateway.settings import get_settings
from gateway.verifier_choice import int8_fallback, resolve_dtype, resolve_zh_precision
from semantic import SemanticPolicy
from semantic.embedder_base import TextEmbedder
from semantic.embedder_e5 import E5_MODEL_NAME
from semantic.embedder_routed import is_routed, knobs_on_e5_scale, on_routed_scale
from semantic.embedders import MIN_COVERAGE
from semantic.latin_language import bundled_english_words, foreign_languages

if TYPE_CHECKING:  # torch comes in only when the verifier is loaded
    from validators.verifier import PairVerifier
    from validators.verifier_dtype import Dtype

log = logging.getLogger("cachegate.gateway.verification")

#: Retrieval threshold with the verifier on, per embedder (the name before the first
#: ':' of the embedder id), measured by bench/semantic_eval_verifier.py on the
#: verifier's *calibration* split: the lowest cosine at which, with the shipped
#: verifier at the default 1% target, hard-negative, entity and context misfires are
#: <= 1% and PAWS-X non-paraphrases <= 5%, each by its 95% Wilson upper bound where
#: the sample can bound it (sessions 16-28, MiniLM: 0.84 with 3,000 pairs per kind,
#: 0.86 with 300; e5: 0.95 with 300. Session 29: MiniLM 0.83 with 3,000, 0.88 with
#: 400; e5 0.95 with 400). Until session 14 the point estimate chose (0.76 / 0.94), and
#: hard negatives served on the eval split came out 2.5 times the calibration split's.
#: MiniLM was 0.83 until session 16, when the ten-layer Chinese model moved the
#: shared 1% cut from 0.9797 to 0.9790 (the English negatives set it now). Session
#: 29's calibration (cut 0.9812) allows 0.83 again; MiniLM stays at 0.84, stricter
#: (tests/gateway/test_verification_thresholds.py allows only that): on the eval split
#: 0.83 serves 1.47% of hard negatives for 51.5% of paraphrases, 0.84 1.20% for 50.5%,
#: and moving it would move ``auto``'s scale (semantic/embedder_routed.py SQUEEZE),
#: which re-embeds every ``auto`` tenant.
#: Reported on the eval split in the README ("The pair verifier on the hit path").
RETRIEVAL_THRESHOLDS = {
    "all-MiniLM-L6-v2": 0.84,
    "multilingual-e5-small-q4": 0.95,
}
#: For an embedder not measured: the cosine-only default (no recall is recovered).
FALLBACK_RETRIEVAL_THRESHOLD = 0.89
#: How long a lookup waits for a tenant's labels when its cut is stale (a read of a few
#: thousand rows); past it the database counts as away (gateway/db_rest.py).
LABELS_DEADLINE = 5.0


def retrieval_threshold_for(embedder_id: str, e5_scale: bool = False) -> float:
    """The measured retrieval threshold of an embedder, on the scale of its scores;
    ``e5_scale``: an e5 model of another name (a ``CACHEGATE_EMBEDDER_PATH`` file),
    which gets e5's, not the cosine-only fallback."""
    if is_routed(embedder_id):
        # MiniLM's threshold on the routed scale, which is e5's there by construction
        # (semantic/embedder_routed.py): each route is searched as its embedder alone.
        return on_routed_scale(RETRIEVAL_THRESHOLDS["all-MiniLM-L6-v2"])
    name = embedder_id.split(":", 1)[0]
    if name not in RETRIEVAL_THRESHOLDS and e5_scale:
        name = E5_MODEL_NAME
    return RETRIEVAL_THRESHOLDS.get(name, FALLBACK_RETRIEVAL_THRESHOLD)


def _short_id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class GatewayVerifier:
    """The shipped model behind the semantic cache's ``HitVerifier`` protocol."""

    def __init__(self, model: PairVerifier) -> None:
        self.model = model
        zh_path = model.zh_path
        zh = zh_path.weights_sha256 if zh_path is not None else ""
        #: The identity of each score scale: a labelled sample's score says something
        #: about today's cut only under the id of the model that scored it, so the
        #: sampler stores that (``scale_id_of``) and calibration reads the samples of
        #: ``scale_ids`` (gateway/calibration.py). One id per language: retraining one
        #: language's model leaves the other's labels counting.
        # English int8 scores move by ~0.01 on average and up to 0.8 (bfloat16's by
        # ~1e-3): labels scored in one say little about a cut in the other, so the
        # English int8 graph is a scale of its own. The Chinese int8 graph's scores are
        # mapped onto the common scale by a map fitted to its own (verifier_zh_path.py),
        # and its labels have always shared the float32 id: changing that would drop
        # every label of the hosts where it was chosen. The int8 sessions' version
        # (validators/onnx_forward.py) is part of it: another graph, another scale.
        from validators.onnx_forward import INT8_SESSION_VERSION  # torch is loaded by now

        int8 = f":int8.{INT8_SESSION_VERSION}" if model.dtype == "int8" else ""
        en = model.meta["weights_sha256"] + int8
        self.en_scale_id = _short_id(f"en:{en}")
        #: None without a Chinese path. Chinese scores are the encoder's mapped onto the
        #: English scale by a map fitted at calibration: a refitted map (an English
        #: retrain) is another scale though the Chinese weights stayed.
        self.zh_scale_id: str | None = None
        if zh_path is not None:
            common = json.dumps(zh_path.float32_scale, sort_keys=True)
            self.zh_scale_id = _short_id(f"zh:{zh}:{common}")
        #: Before session 35 one id covered both languages' weights; a sample stored under
        #: it was scored by today's models when it equals today's, whichever language.
        self.legacy_scale_id = _short_id(f"{en}:{zh}")
        self.scale_ids: tuple[str, ...] = tuple(
            i for i in (self.en_scale_id, self.zh_scale_id, self.legacy_scale_id) if i
        )

    def scale_id_of(self, question: str, matched: str, scope: str = "") -> str | None:
        """The scale id of the model that reads this pair (None: neither does, and its
        score, 0, is no model's)."""
        path = self.model.path_of(question, matched, scope=scope)
        return self.en_scale_id if path == "en" else self.zh_scale_id if path == "zh" else None

    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        verdicts = self.model.verdicts(question, candidates, scope=scope)
        return [v.score if v.supported else 0.0 for v in verdicts]

    def remembered(
        self, question: str, candidates: Sequence[str], scope: str = ""
    ) -> list[float] | None:
        """``scores`` when every verdict is already known (no forward), else None."""
        verdicts = self.model.remembered(question, candidates, scope=scope)
        if verdicts is None:
            return None
        return [v.score if v.supported else 0.0 for v in verdicts]

    def shipped_cut(self, target: float) -> float:
        return self.model.cut_for(target)

    def unread_reason_known(self, question: str, candidate: str, scope: str = "") -> str | None:
        """``unread_reason`` from what the verifier already knows (no forward, no
        tokenizer call): the semantic cache asks it after a miss whose best candidate
        scored 0, to count such misses by why; None when it read the pair or cannot
        say without work."""
        verdicts = self.model.remembered(question, [candidate], scope=scope)
        if not verdicts or verdicts[0].supported:
            return None
        return verdicts[0].reason

    def unread_reason(self, question: str, candidate: str, scope: str = "") -> str | None:
        """Why the verifier refused this pair without reading it (``language_mismatch``,
        ``language_not_covered``, ``too_many_tokens`` …), None when it read it: for
        explain, where a score of 0 alone does not say which (may run a forward)."""
        (verdict,) = self.model.verdicts(question, [candidate], scope=scope)
        return None if verdict.supported else verdict.reason


def load_verifier(
    threads: int = 1,
    cache_size: int | None = None,
    dtype: Literal["auto"] | Dtype | None = None,
) -> GatewayVerifier:
    """Load the shipped verifier (seconds; call it off the event loop).

    ``cache_size``: verdicts remembered (None: ``CACHEGATE_VERIFIER_CACHE_SIZE``);
    ``dtype``: of its English matrix products (None: ``CACHEGATE_VERIFIER_DTYPE``);
    "auto" is resolved by gateway/verifier_choice.py (bfloat16 where the CPU has AMX,
    else int8 where ONNX Runtime's int8 kernels run, else bfloat16 where native, else
    float32) and the choice is logged with its reason; the verifier reads the
    calibration of the dtype it runs in.
    The verdict cache holds scores only, never an answer, and keeps them per
    partition (the cache passes its partition key as the scope), so a tenant
    cannot learn from a fast answer that another tenant scored the same pair."""
    # torch, only when the verifier is on (import gateway.app stays torch-free)
    from validators.verifier import PairVerifier
    from validators.verifier_errors import VerifierModelError

    settings = get_settings()
    name = settings.verifier_dtype if dtype is None else dtype
    chosen, reason = resolve_dtype(name, settings.verifier_backend)
    zh_precision, zh_reason = resolve_zh_precision(
        settings.verifier_zh_precision, settings.verifier_backend
    )

    # A pair in a Latin-script language other than English goes to the multilingual
    # cross-encoder, as auto sends such a question to e5 (semantic/latin_language.py);
    # the verifier remembers each question's languages per tenant, as its verdicts.
    words = bundled_english_words()

    def languages(text: str) -> frozenset[str] | None:
        return foreign_languages(text, words)

    def load(english: Dtype) -> PairVerifier:
        return PairVerifier(
            threads=threads,
            cache_size=settings.verifier_cache_size if cache_size is None else cache_size,
            dtype=english,
            backend=settings.verifier_backend,
            zh_precision=zh_precision,
            foreign_languages=languages,
        )

    try:
        model = load(chosen)
    except VerifierModelError as exc:
        if name != "auto" or chosen != "int8":
            raise  # an explicit choice that cannot run refuses to start
        # auto's int8 graph failed (export, quantizer, its probe check): auto chose it
        # for speed only, so the next choice serves, with its own calibration.
        fallback = int8_fallback(settings.verifier_backend)
        log.warning("%s; the verifier computes in %s instead", exc, fallback)
        chosen, reason = fallback, f"the int8 graph failed ({reason})"
        model = load(chosen)
    gateway_verifier = GatewayVerifier(model)
    log.info(
        "pair verifier computes in %s through %s (verifier dtype %s: %s); cuts from its %s"
        " calibration; Chinese pairs in %s (%s); tenant labels on score scales en=%s zh=%s"
        " (and legacy=%s, from before session 35)",
        chosen,
        model.backend,
        name,
        reason,
        model.calibration_dtype,
        zh_precision,
        zh_reason,
        gateway_verifier.en_scale_id,
        gateway_verifier.zh_scale_id or "none",
        gateway_verifier.legacy_scale_id,
    )
    return gateway_verifier


@dataclass
class Verification:
    """What the pipeline needs to put the verifier on a tenant's lookups."""

    verifier: GatewayVerifier
    calibrator: Calibrator
    embedder_id: str
    #: the knobs are MiniLM cosines put on e5's scale (``knobs_on_e5_scale``)
    e5_scale: bool = False

    @classmethod
    def build(
        cls, verifier: GatewayVerifier, db: Engine | None, embedder: TextEmbedder, ttl: float = 60.0
    ) -> Verification:
        calibrator = Calibrator(db, verifier.shipped_cut, ttl, verifier_models=verifier.scale_ids)
        return cls(verifier, calibrator, embedder.embedder_id, knobs_on_e5_scale(embedder))

    def retrieval_threshold(self, policy: TenantPolicy) -> float:
        if policy.retrieval_threshold is not None:
            given = policy.retrieval_threshold  # a MiniLM cosine, on e5's scale there
            mapped = self.e5_scale or is_routed(self.embedder_id)
            return on_routed_scale(given) if mapped else given
        return retrieval_threshold_for(self.embedder_id, self.e5_scale)

    def retrieval(self, policy: TenantPolicy) -> Retrieval:
        """The embedder and threshold the tenant's lookups use: its labels of hits below
        it no longer count toward its cut (gateway/calibration_labels.py)."""
        return Retrieval(self.embedder_id, self.retrieval_threshold(policy))

    async def cut(self, tenant_id: str, policy: TenantPolicy) -> CutInForce:
        """The tenant's cut in force (from memory; the database when it is stale)."""
        target = policy.target_misfire_rate
        kept = self.calibrator.current(tenant_id, target)
        if kept is not None:
            return kept
        try:
            retrieval = self.retrieval(policy)
            return await within(
                LABELS_DEADLINE, self.calibrator.refresh, tenant_id, target, retrieval
            )
        except DbDeadlineError as exc:  # a database that hangs: as one that is down
            return self.calibrator.hung(tenant_id, target, exc)

    async def apply(
        self, tenant_id: str, policy: TenantPolicy, sem: SemanticPolicy
    ) -> tuple[SemanticPolicy, CutInForce]:
        """``sem`` with the retrieval threshold and the verifier cut of this tenant."""
        cut = await self.cut(tenant_id, policy)
        verified = replace(sem, threshold=self.retrieval_threshold(policy), verifier_cut=cut.cut)
        return verified, cut


#: A question any embedder that reads Chinese covers whole.
CHINESE_PROBE = "如何修改登录密码"


def warm_chinese(verifier: GatewayVerifier, embedder: object) -> threading.Thread | None:
    """Load the Chinese cross-encoder in the background when ``embedder`` reads Chinese
    (``auto``, the default, or ``e5``), so the first Chinese lookup does not wait
    seconds for it; None when it does not (MiniLM serves no Chinese question, and its
    deployments never pay the ~100 MB) or there is no Chinese path. A load that fails
    is logged: the Chinese lookups then fail closed, as they would have on first use."""
    coverage = getattr(embedder, "coverage", None)
    if verifier.model.zh_path is None or coverage is None:
        return None
    if coverage(CHINESE_PROBE) < MIN_COVERAGE:
        return None

    def load() -> None:
        started = time.perf_counter()
        try:
            _ = verifier.model.zh_encoder
        except Exception:
            log.exception(
                "the Chinese pair verifier did not load at start; each Chinese lookup "
                "tries again and fails closed (a miss) while it cannot"
            )
            return
        log.info("Chinese pair verifier loaded in %.1f s", time.perf_counter() - started)

    thread = threading.Thread(target=load, name="cachegate-zh-verifier", daemon=True)
    thread.start()
    return thread
