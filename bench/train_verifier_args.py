"""The command line of bench/train_verifier.py (its docstring says what each step does)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.verifier_training import TrainConfig
from validators.verifier import MODEL_DIR
from validators.verifier_dtype import DTYPES


def build_parser(description: str, *, pairs: Path, judge_cache: Path) -> argparse.ArgumentParser:
    """``pairs`` and ``judge_cache``: the default files of ``--pairs`` and ``--teacher-scores``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--pairs", type=Path, default=pairs)
    ap.add_argument("--rebuild-pairs", action="store_true")
    ap.add_argument("--out", type=Path, default=MODEL_DIR)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=14.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument(
        "--cap",
        action="append",
        metavar="KIND=N",
        help="training pairs of one English kind (repeatable; default: CAPS)",
    )
    ap.add_argument(
        "--init-from",
        type=Path,
        help="continue training this verifier directory's English weights",
    )
    ap.add_argument(
        "--bf16-autocast",
        action="store_true",
        help="train with bfloat16 matrix products (float32 weights): faster on CPUs with"
        " AMX or AVX512-BF16",
    )
    ap.add_argument(
        "--topics",
        action="store_true",
        help="add the English topic pool (bench/data/en_topic_intents.jsonl; measured in"
        " session 28 without a gain, so not in the shipped recipe)",
    )
    ap.add_argument(
        "--minimal-pairs",
        type=int,
        default=0,
        metavar="N",
        help="add N English minimal pairs (bench/verifier_pairs_minimal.py: one sibling noun"
        " swapped, label 0; one synonym swapped, label 1; half each); 0 = none, the shipped"
        " recipe",
    )
    ap.add_argument(
        "--teacher-scores",
        type=Path,
        default=judge_cache,
        help="the 1.5B judge's scores of training pairs (bench/verifier_llm_judge.py"
        " --split train --seed SEED); used with --teacher-weight",
    )
    ap.add_argument(
        "--teacher-weight",
        type=float,
        default=0.0,
        help="train the judged pairs towards (1 - w) * label + w * judge"
        " (bench/verifier_judge_teacher.py); 0 = labels only, the shipped recipe",
    )
    ap.add_argument(
        "--skip-training",
        action="store_true",
        help="reuse the weights (both languages) already in --out; calibrate, record, evaluate",
    )
    ap.add_argument(
        "--calibrate-dtype",
        action="append",
        choices=DTYPES,
        help="calibrate in this compute dtype (repeatable; default: all). Without float32 "
        "(with --skip-training only): just those calibration files and the card's section",
    )
    ap.add_argument(
        "--calibrate-zh-int8",
        action="store_true",
        help="(with --skip-training and --calibrate-dtype: also) calibrate the int8 Chinese "
        "graph; done anyway whenever float32 is calibrated",
    )
    return ap
