"""The Chinese half of the verifier refuses weights that are not the ones it started
with, on every call: the check runs before the loaded encoder is kept (it once kept it
first, so only the first caller saw the error, and since session 26 that caller is the
start-up warm-up, leaving every lookup to score with the wrong weights). Real files."""

from __future__ import annotations

import pytest

from validators.verifier import MODEL_DIR
from validators.verifier_errors import VerifierModelError
from validators.verifier_zh_path import ChinesePath


def _path() -> ChinesePath:
    import json

    meta = json.loads((MODEL_DIR / "verifier.json").read_text())
    return ChinesePath(
        MODEL_DIR,
        precision="float32",
        backend="torch",
        threads=1,
        en_weights_sha256=meta["weights_sha256"],
    )


def test_weights_other_than_at_start_stay_refused() -> None:
    path = _path()
    path.weights_sha256 = "0" * 64  # what start read: the files have changed since
    for _ in range(2):  # the second call too: nothing unchecked was kept
        with pytest.raises(VerifierModelError, match="changed after start"):
            _ = path.encoder
    assert not path.is_loaded


def test_the_weights_it_started_with_load_and_stay() -> None:
    path = _path()  # control: the same files, unchanged
    encoder = path.encoder
    assert path.is_loaded and path.encoder is encoder
