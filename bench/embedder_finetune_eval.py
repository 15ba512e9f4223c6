"""The gateway's decision with a fine-tuned retrieval embedder against the shipped one
(bench/embedder_finetune.py ``eval``): same pairs, same rules, same verifier."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from bench import semantic_eval_verifier as sev
from bench.embedder_finetune import HARD_LIMITS, PAIRS, _e5, _e5_vectors
from bench.semantic_eval_verifier_report import GOALS
from bench.verifier_pairs import VPair

#: Pairs a kind: the eval split as the pipeline eval reads it, a larger calibration draw.
EVAL_PER_KIND, CAL_PER_KIND = 400, 1500


def evaluate(lang: str, model: Path) -> dict[str, Any]:
    from bench.train_verifier import load_or_build_pairs
    from bench.verifier_eval import sample_eval
    from validators.verifier import DEFAULT_TARGET_MISFIRE, MODEL_DIR, PairVerifier

    every = load_or_build_pairs(PAIRS, rebuild=False)
    ev_pairs = [p for p in sample_eval(every, EVAL_PER_KIND) if p.lang == lang]
    cal_pairs = [p for p in sample_eval(every, CAL_PER_KIND, split="cal") if p.lang == lang]
    verifier = PairVerifier(MODEL_DIR, threads=2, dtype="float32")
    cut = verifier.cut_for(DEFAULT_TARGET_MISFIRE)
    cal, ev = sev.Scored(cal_pairs, verifier, cut), sev.Scored(ev_pairs, verifier, cut)
    goals = GOALS if lang == "en" else sev.ZH_GOALS
    positive = _positives(ev.kinds, lang)
    hard = np.isin(ev.kinds, [f"{lang}/hard", "zhw/hard"])
    result: dict[str, Any] = {
        "lang": lang,
        "eval_pairs": len(ev_pairs),
        "cal_pairs": len(cal_pairs),
        "verifier_alone": {
            "positives_kept": _share(ev.verified, positive),
            "hard_served": _share(ev.verified, hard),
        },
        "embedders": {},
    }
    for name, cosine in _cosine_fns(lang, model).items():
        cal_cos, ev_cos = cosine(cal_pairs), cosine(ev_pairs)
        t = sev.choose_threshold(cal.kinds, cal.verified, cal_cos, goals)
        served = ev.verified & (ev_cos >= t)
        result["embedders"][name] = {
            "T_chosen_on_cal": t,
            "goals_met_on_cal": sev.goals_met(cal.kinds, cal.verified & (cal_cos >= t), goals),
            "served_at_T": {
                k: v for k, v in sev.served_rates(ev.kinds, served).items() if k[:2] in ("en", "zh")
            },
            "cosine_auc_positive_vs_hard": _auc(ev_cos[positive | hard], positive[positive | hard]),
            "best_read_off_eval": _best(ev, ev_cos, positive, hard),
        }
        print(name, result["embedders"][name]["served_at_T"], flush=True)
    return result


def _positives(kinds: np.ndarray, lang: str) -> np.ndarray:
    """English: the nearest same-intent paraphrases (the goal's kind); Chinese: every
    positive, translated and written (the goal's)."""
    if lang == "en":
        return np.asarray(kinds == "en/paraphrase+")
    return np.asarray([k.startswith(("zh/", "zhw/")) and k.endswith("+") for k in kinds])


def _share(served: np.ndarray, mask: np.ndarray) -> float:
    return round(float(served[mask].mean()), 4)


def _best(
    ev: sev.Scored, cos: np.ndarray, positive: np.ndarray, hard: np.ndarray
) -> dict[str, dict[str, float]]:
    """The most positives served at each share of hard negatives, over T: the trade
    the embedder allows, read off the eval split (an upper bound, not a setting)."""
    out: dict[str, dict[str, float]] = {}
    for limit in HARD_LIMITS:
        best: dict[str, float] = {}
        for t in np.arange(0.50, 0.99, 0.005):
            served = ev.verified & (cos >= t)
            if served[hard].mean() <= limit and _share(served, positive) > best.get("kept", -1):
                best = {
                    "T": round(float(t), 3),
                    "kept": _share(served, positive),
                    "hard": _share(served, hard),
                    "retrieved": _share(cos >= t, positive),
                }
        out[f"hard<={limit}"] = best
    return out


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """How often a positive outranks a hard negative (ties half)."""
    return round(float(roc_auc_score(labels, scores)), 4)


def _cosine_fns(lang: str, model: Path) -> dict[str, Any]:
    """The shipped embedder of ``lang`` (as ``auto`` routes it) and the fine-tuned one."""
    from semantic import Embedder
    from semantic.embedders import build_embedder

    def by_embedder(embedder: Any) -> Any:
        return lambda pairs: sev.cosines(embedder, pairs)[0]

    if lang == "en":
        return {
            "minilm": by_embedder(build_embedder("minilm", progress=False)),
            "minilm_finetuned": by_embedder(Embedder(model_path=model, progress=False)),
        }
    return {
        "e5": by_embedder(build_embedder("e5", progress=False)),
        "e5_finetuned": lambda pairs: _torch_cosines(_e5(model), pairs),
    }


def _torch_cosines(enc: Any, pairs: Sequence[VPair]) -> np.ndarray:
    import torch

    texts = sorted({t for p in pairs for t in (p.a, p.b)})
    vectors: dict[str, np.ndarray] = {}
    with torch.no_grad():
        for i in range(0, len(texts), 128):
            chunk = texts[i : i + 128]
            vectors.update(zip(chunk, _e5_vectors(enc, chunk).numpy(), strict=True))
    return np.asarray([float(vectors[p.a] @ vectors[p.b]) for p in pairs])
