"""Building a native kernel: compiled once per source, cached, and clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from prefix.errors import KernelUnavailableError
from prefix.kernels import build as kernel_build

SOURCE = "int cachegate_answer(void) { return 42; }\n"


def write_source(directory: Path, text: str = SOURCE) -> Path:
    path = directory / "answer.c"
    path.write_text(text)
    return path


def test_builds_once_and_reuses_the_cached_library(tmp_path: Path) -> None:
    import ctypes

    source = write_source(tmp_path)
    first = kernel_build.build(source, tmp_path / "cache")
    assert first.exists() and first.parent == tmp_path / "cache"
    assert ctypes.CDLL(str(first)).cachegate_answer() == 42
    stamp = first.stat().st_mtime_ns
    os.utime(first, ns=(stamp - 10**9, stamp - 10**9))
    again = kernel_build.build(source, tmp_path / "cache")
    assert again == first
    assert again.stat().st_mtime_ns == stamp - 10**9  # not rebuilt
    # no temporary file left behind
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [first.name]


def test_a_changed_source_builds_a_new_library(tmp_path: Path) -> None:
    source = write_source(tmp_path)
    first = kernel_build.build(source, tmp_path / "cache")
    write_source(tmp_path, SOURCE.replace("42", "43"))
    second = kernel_build.build(source, tmp_path / "cache")
    assert second != first and second.exists()


def test_a_compile_error_is_reported_without_leaving_files(tmp_path: Path) -> None:
    source = write_source(tmp_path, "int broken( { return ; }\n")
    with pytest.raises(KernelUnavailableError, match="compiling answer failed"):
        kernel_build.build(source, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_no_compiler_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_build.shutil, "which", lambda name: None)
    with pytest.raises(KernelUnavailableError, match="no C compiler"):
        kernel_build.find_compiler()


def test_a_compiler_that_does_not_run_is_a_clear_error(tmp_path: Path) -> None:
    source = write_source(tmp_path)
    with pytest.raises(KernelUnavailableError, match="does not run"):
        kernel_build.build(source, tmp_path / "cache", compiler=str(tmp_path / "missing-cc"))
