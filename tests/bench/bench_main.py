"""Running a verifier bench's ``main()`` in a test: its command line given, its results
file written under the test's directory, torch's thread count restored after (the
benches time on one thread)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import bench._common


def run_main(
    main: Callable[[], None], argv: list[str], results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench._common, "RESULTS", results)
    monkeypatch.setattr(sys, "argv", argv)
    threads = torch.get_num_threads()
    try:
        main()
    finally:
        torch.set_num_threads(threads)
