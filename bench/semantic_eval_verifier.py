"""The semantic cache's decision with the pair verifier, on pairs it never trained on
(issue 12, part 5): English and Chinese, per pair kind, per embedder.

Pairs: the verifier's *eval* split (bench/verifier_pairs.py: split by intent,
by MeanCache main question and by PAWS-X component, so no eval question was
seen in training or calibration), at most ``--per-kind`` per (language, kind).
A pair (new question ``a``, cached question ``b``) is *served* when

  old default   cosine >= 0.89 and the entity validator accepts (today's path)
  retrieval     cosine >= the retrieval threshold T and the validator accepts
  verifier      as ``retrieval`` and the verifier scores it above the cut of the
                default target misfire rate (0.01): the new default path

and, where the embedder reports coverage (semantic/embedders.py), both
questions are fully covered (the cache refuses the rest). For negatives the
served share is the misfire rate, for positives the recall.

T per embedder is chosen here, on the *calibration* split (never on the eval
split it is reported on): the lowest T of the sweep at which every misfire
goal below holds for the verifier path on the calibration pairs, by the 95%
Wilson upper bound of each kind's misfire rate where the sample is large enough
to bound it (:func:`goal_holds`; a lower T serves more positives; the goals
bound what it may cost); if no T meets them, the highest.
``gateway/verification.py`` RETRIEVAL_THRESHOLDS records the result.

    .venv/bin/python bench/semantic_eval_verifier.py [--per-kind 400]

``--dtype int8`` (or bfloat16) evaluates the English verifier in that compute dtype,
at the cut of its own calibration. (also ``bench/semantic_eval.py --verifier``). Writes
bench/results/semantic_eval_verifier.json and prints the table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.semantic_common import embed_batches
from bench.semantic_eval_scoring import wilson_upper
from bench.semantic_eval_verifier_report import GOALS, goals, merge_previous, table
from bench.verifier_eval import PAIRS, sample_eval
from bench.verifier_pairs import VPair, report_lang
from gateway.verification import retrieval_threshold_for
from semantic.question import normalize_question
from validators import Validator, ValidatorError
from validators.onnx_forward import INT8_SESSION_VERSION
from validators.verifier import DEFAULT_TARGET_MISFIRE, MODEL_DIR, PairVerifier
from validators.verifier_dtype import DTYPES, Dtype

RESULTS = Path(__file__).resolve().parent / "results" / "semantic_eval_verifier.json"
OLD_THRESHOLD = 0.89
SWEEP = np.round(np.arange(0.50, 0.96, 0.01), 2)


def kind_of(p: VPair) -> str:
    """``lang/kind`` with ``+``/``-`` on PAWS-X (whose kind holds both labels)."""
    lang = report_lang(p)
    if p.kind == "paws":
        return f"{lang}/paws{'+' if p.label else '-'}"
    return f"{lang}/{p.kind}" + ("+" if p.label else "")


def embedders(names: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        try:
            from semantic.embedders import build_embedder
        except ImportError:  # before the multilingual embedder existed
            if name != "minilm":
                continue
            from semantic import Embedder

            out[name] = Embedder(cpu_threads=1, progress=False)
            continue
        out[name] = build_embedder(name, progress=False)
    return out


def cosines(embedder: Any, pairs: Sequence[VPair]) -> tuple[np.ndarray, np.ndarray]:
    """Cosine per pair, and whether the embedder covers both questions."""
    texts = sorted({t for p in pairs for t in (p.a, p.b)})
    row = {t: i for i, t in enumerate(texts)}
    vectors = embed_batches(embedder, texts)
    cos = np.asarray([float(vectors[row[p.a]] @ vectors[row[p.b]]) for p in pairs])
    cover: Callable[[str], float] | None = getattr(embedder, "coverage", None)
    if cover is None:
        return cos, np.ones(len(pairs), dtype=bool)
    covered = {t: cover(t) >= 1.0 for t in texts}
    return cos, np.asarray([covered[p.a] and covered[p.b] for p in pairs])


def validator_ok(pairs: Sequence[VPair]) -> np.ndarray:
    v = Validator()
    out = []
    for p in pairs:
        try:
            out.append(v.check(p.a, p.b, None, 1.0, None, ()) is None)
        except ValidatorError:
            out.append(False)
    return np.asarray(out)


def verifier_scores(verifier: PairVerifier, pairs: Sequence[VPair]) -> np.ndarray:
    """The verifier's score per pair (0 when unsupported), kept beside the pairs file
    per digest of the weights and the Chinese model file: the scores depend on those alone,
    the cut on the calibration, so a new calibration reuses them."""
    head = verifier.zh_model_file  # the Chinese path's own weights (and score map)
    # The English compute dtype too, except float32 (whose files predate the option),
    # and for int8 the sessions' version (another int8 graph scores differently).
    dtype = b"" if verifier.dtype == "float32" else verifier.dtype.encode()
    if verifier.dtype == "int8":
        dtype += f".{INT8_SESSION_VERSION}".encode()
    digest = hashlib.sha256(
        verifier.meta["weights_sha256"].encode() + (head.read_bytes() if head else b"") + dtype
    ).hexdigest()
    kept = PAIRS.parent / f"eval_scores_{digest[:16]}.json"
    known: dict[str, float] = json.loads(kept.read_text()) if kept.exists() else {}
    keys = [json.dumps([p.a, p.b], ensure_ascii=False) for p in pairs]
    todo = [p for p, k in zip(pairs, keys, strict=True) if k not in known]
    for p, score in zip(todo, _score(verifier, todo), strict=True):
        known[json.dumps([p.a, p.b], ensure_ascii=False)] = score
    if todo:
        kept.write_text(json.dumps(known, ensure_ascii=False), encoding="utf-8")
    return np.asarray([known[k] for k in keys])


def _score(verifier: PairVerifier, pairs: Sequence[VPair]) -> list[float]:
    scores: list[float] = []
    for lo in range(0, len(pairs), 64):
        verdicts = verifier.verdicts_for_pairs([(p.a, p.b) for p in pairs[lo : lo + 64]])
        scores += [v.score if v.supported else 0.0 for v in verdicts]
        print(f"verifier: {len(scores)}/{len(pairs)}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return scores


def langs(kinds: np.ndarray, lang: str) -> np.ndarray:
    return np.asarray([k.startswith(lang + "/") for k in kinds])


def goal_holds(served: np.ndarray, bound: float) -> bool:
    """Whether a misfire goal holds on a calibration sample. Where the sample can bound
    the rate (at least 3 / ``bound`` pairs, the rule of three: 300 for 1%), the 95%
    Wilson upper bound of the misfire rate must be within it, unless nothing
    misfires: a point estimate at the bound held on the calibration split and not on
    the eval split (hard negatives depend on which intents neighbour each other), and
    the gateway bounds a tenant's cut the same way (gateway/calibration.py). A
    smaller sample cannot show a rate that low, so its rate itself is compared."""
    k, n = int(served.sum()), len(served)
    if n < 3 / bound:
        return k <= bound * n
    return k == 0 or wilson_upper(k, n) <= bound


#: The misfire goals on Chinese pairs alone (the hard-negative and entity bounds of the
#: English ones, and PAWS-X zh's): what a threshold for Chinese questions alone must
#: keep. Measured, not served: the gateway has one retrieval threshold per embedder.
ZH_GOALS = (
    ("zh/hard", 0.01, "max"),
    ("zhw/hard", 0.01, "max"),
    ("zh/entity", 0.01, "max"),
    ("zh/paws-", 0.05, "max"),
)


def choose_threshold(
    kinds: np.ndarray,
    verified: np.ndarray,
    cos: np.ndarray,
    goals: Sequence[tuple[str, float, str]] = GOALS,
) -> float:
    """The lowest T of :data:`SWEEP` at which the misfire goals hold (module docstring);
    the sweep's highest when they hold nowhere (:func:`goals_met` tells the two apart)."""
    for t in SWEEP:
        if goals_met(kinds, verified & (cos >= t), goals):
            return float(t)
    return float(SWEEP[-1])


def goals_met(
    kinds: np.ndarray, served: np.ndarray, goals: Sequence[tuple[str, float, str]] = GOALS
) -> bool:
    """Whether every misfire goal holds for ``served`` by :func:`goal_holds`."""
    return all(
        not (kinds == kind).any() or goal_holds(served[kinds == kind], bound)
        for kind, bound, how in goals
        if how == "max"
    )


def served_rates(kinds: np.ndarray, served: np.ndarray) -> dict[str, float]:
    out = {k: round(float(served[kinds == k].mean()), 4) for k in sorted(set(kinds))}
    for lang in ("en", "zh", "zhw"):
        pos = np.asarray([k.startswith(lang + "/") and k.endswith("+") for k in kinds])
        if pos.any():
            out[f"{lang}/positives+"] = round(float(served[pos].mean()), 4)
    return out


#: Served eval negatives listed per kind in the results, for reading by hand.
MAX_LISTED = 60


def served_negatives(
    ev: Scored, cos: np.ndarray, served: np.ndarray
) -> dict[str, list[dict[str, Any]]]:
    """The eval negatives the default path serves, per kind (at most ``MAX_LISTED``,
    highest verifier score first): what a misfire rate counts, to be read by hand."""
    out: dict[str, list[dict[str, Any]]] = {}
    for i in np.flatnonzero(served & (ev.labels == 0)):
        p = ev.pairs[int(i)]
        row = {"a": p.a, "b": p.b, "cosine": round(float(cos[i]), 4)}
        out.setdefault(str(ev.kinds[i]), []).append(
            row | {"verifier": round(float(ev.scores[i]), 4), "source": p.source}
        )
    return {
        k: sorted(rows, key=lambda r: -r["verifier"])[:MAX_LISTED]
        for k, rows in sorted(out.items())
    }


class Scored:
    """One split's pairs with everything the decision needs but the cosine."""

    def __init__(self, pairs: Sequence[VPair], verifier: PairVerifier, cut: float) -> None:
        self.pairs = pairs
        self.kinds = np.asarray([kind_of(p) for p in pairs])
        self.labels = np.asarray([p.label for p in pairs])
        self.accepted = validator_ok(pairs)
        self.scores = verifier_scores(verifier, pairs)
        scores = self.scores
        # As the cache (semantic/candidates.py): a question equal once normalized needs no verifier.
        self.same = np.asarray([normalize_question(p.a) == normalize_question(p.b) for p in pairs])
        self.verified = self.accepted & ((scores > cut) | self.same)


def evaluate(
    pairs: Sequence[VPair],
    names: Sequence[str],
    threads: int = 1,
    cal_pairs: Sequence[VPair] = (),
    model_dir: Path = MODEL_DIR,
    dtype: Dtype = "float32",
) -> dict[str, Any]:
    """Served shares on ``pairs`` (the eval split), T chosen on ``cal_pairs``."""
    verifier = PairVerifier(model_dir, threads=threads, dtype=dtype)
    cut = verifier.cut_for(DEFAULT_TARGET_MISFIRE)
    ev = Scored(pairs, verifier, cut)
    cal = Scored(cal_pairs, verifier, cut) if cal_pairs else None
    kinds, labels = ev.kinds, ev.labels
    result: dict[str, Any] = {
        "split": "eval",
        "dtype": verifier.dtype,
        "threshold_chosen_on": "cal" if cal else "eval",
        "pairs": len(pairs),
        "cal_pairs": len(cal_pairs),
        "counts": {k: int((kinds == k).sum()) for k in sorted(set(kinds))}
        | {
            f"{lang}/positives+": int(((labels == 1) & langs(kinds, lang)).sum())
            for lang in ("en", "zh", "zhw")
        },
        "target_misfire_rate": DEFAULT_TARGET_MISFIRE,
        "verifier_cut": round(cut, 6),
        "embedders": {},
    }
    for name, embedder in embedders(names).items():
        cos, covered = cosines(embedder, pairs)
        gated = ev.verified & covered
        if cal is not None:
            cal_cos, cal_covered = cosines(embedder, cal.pairs)
            on_kinds, on_verified, on_cos = cal.kinds, cal.verified & cal_covered, cal_cos
        else:
            on_kinds, on_verified, on_cos = kinds, gated, cos
        t = choose_threshold(on_kinds, on_verified, on_cos)
        t_zh = choose_threshold(on_kinds, on_verified, on_cos, ZH_GOALS)
        result["embedders"][name] = {
            "embedder_id": embedder.embedder_id,
            "retrieval_threshold": t,
            # False: no T of the sweep meets the goals where T was chosen (T is its top)
            "goals_met_where_chosen": goals_met(on_kinds, on_verified & (on_cos >= t)),
            "old_default": served_rates(kinds, ev.accepted & covered & (cos >= OLD_THRESHOLD)),
            "retrieval_only": served_rates(kinds, ev.accepted & covered & (cos >= t)),
            "verifier": served_rates(kinds, gated & (cos >= t)),
            "sweep": {
                f"{float(x):.2f}": served_rates(kinds, gated & (cos >= x)) for x in SWEEP[::5]
            },
            "served_negatives": served_negatives(ev, cos, gated & (cos >= t)),
        }
        if (covered & langs(kinds, "zh")).any():
            # The lowest T the Chinese goals alone allow, and what Chinese pairs get there.
            result["embedders"][name]["chinese_only"] = {
                "goals": [k for k, *_ in ZH_GOALS],
                "retrieval_threshold": t_zh,
                "goals_met_where_chosen": goals_met(
                    on_kinds, on_verified & (on_cos >= t_zh), ZH_GOALS
                ),
                "verifier": {
                    k: v
                    for k, v in served_rates(kinds, gated & (cos >= t_zh)).items()
                    if k.startswith("zh")
                },
            }
        # What the gateway serves: its retrieval threshold is one per embedder, chosen
        # for the float32 verifier; another dtype's run may choose another T here.
        gateway_t = retrieval_threshold_for(embedder.embedder_id)
        if abs(gateway_t - t) > 1e-9:
            result["embedders"][name]["at_gateway_threshold"] = {
                "retrieval_threshold": gateway_t,
                "verifier": served_rates(kinds, gated & (cos >= gateway_t)),
            }
    return result


def run(
    per_kind: int,
    names: Sequence[str] = ("minilm", "e5"),
    threads: int = 1,
    pairs_path: Path = PAIRS,
    cal_per_kind: int | None = None,
    model_dir: Path = MODEL_DIR,
    dtype: Dtype = "float32",
) -> dict[str, Any]:
    """Evaluate, check the goals, print the table; the result (also for semantic_eval.py)."""
    from bench.train_verifier import load_or_build_pairs

    every = load_or_build_pairs(pairs_path, rebuild=False)
    pairs = sample_eval(every, per_kind)
    cal = sample_eval(every, cal_per_kind or per_kind, split="cal")
    result = evaluate(pairs, names, threads, cal, model_dir, dtype)
    for e in result["embedders"].values():
        e["goals"] = goals(e["verifier"])
    print(table(result))
    for name, e in result["embedders"].items():
        if "at_gateway_threshold" in e:
            g = e["at_gateway_threshold"]
            print(
                f"{name} at the gateway's T {g['retrieval_threshold']:.2f}: "
                + "; ".join(f"{k} {g['verifier'][k]:.4f}" for k, *_ in GOALS if k in g["verifier"])
            )
        if "chinese_only" in e:
            z = e["chinese_only"]
            print(
                f"{name} at the T the Chinese goals alone allow ({z['retrieval_threshold']:.2f}): "
                + "; ".join(f"{k} {v:.4f}" for k, v in z["verifier"].items())
            )
        print(
            f"goals ({name}): "
            + "; ".join(
                f"{g['kind']} {g['goal']}: {g['got']} {'ok' if g['met'] else 'MISSED'}"
                for g in e["goals"]
            )
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--per-kind", type=int, default=400)
    ap.add_argument(
        "--cal-per-kind", type=int, default=None, help="calibration pairs per kind (--per-kind)"
    )
    ap.add_argument("--embedders", nargs="+", default=["minilm", "e5"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--model-dir", type=Path, default=MODEL_DIR, help="the verifier to evaluate")
    ap.add_argument(
        "--dtype", choices=DTYPES, default="float32", help="the English verifier's compute dtype"
    )
    args = ap.parse_args(argv)
    result = run(
        args.per_kind,
        args.embedders,
        args.threads,
        args.pairs,
        args.cal_per_kind,
        args.model_dir,
        args.dtype,
    )
    result = merge_previous(result, args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
