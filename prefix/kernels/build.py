"""Compile a kernel's C source once per (source, flags, compiler) and cache the library.

The kernels are plain C with intrinsics, not torch extensions: they include no torch
headers, so a build takes ~2 s with gcc instead of the ~40 s a ``cpp_extension``
build spends parsing ATen, and they are called through ``ctypes`` (which releases the
GIL for the call). OpenMP is linked by soname (``libgomp.so.1``), which in a process
that has imported torch resolves to the runtime torch already loaded, so a kernel's
parallel regions use the calling thread's existing OpenMP pool.

Torch-free, so the build and its cache are tested in milliseconds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from prefix.errors import KernelUnavailableError

log = logging.getLogger("cachegate.prefix")

# what the kernels use: AVX-512 foundation and byte/word ops, and bf16 dot products
AVX512_BF16_FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16")
CFLAGS = (
    "-O3",
    "-std=gnu11",
    "-mavx512f",
    "-mavx512bw",
    "-mavx512vl",
    "-mavx512dq",
    "-mavx512bf16",
    "-mfma",
    "-fopenmp",
    "-shared",
    "-fPIC",
)
BUILD_TIMEOUT_S = 180.0


def default_cache_dir() -> Path:
    """``~/.cache/cachegate/kernels``, or the temp dir where home is not writable."""
    home = Path.home() / ".cache" / "cachegate" / "kernels"
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / f".probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
        return home
    except OSError:
        return Path(tempfile.gettempdir()) / "cachegate-kernels"


def find_compiler() -> str:
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    raise KernelUnavailableError("no C compiler (cc, gcc or clang) on PATH")


def _compiler_version(compiler: str) -> str:
    try:
        done = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise KernelUnavailableError(f"the C compiler {compiler} does not run: {exc}") from exc
    return done.stdout


def library_path(sources: list[Path], name: str, cache_dir: Path, compiler: str) -> Path:
    """The cached library's path: a digest of the sources, the headers beside them, the
    flags and the compiler."""
    digest = hashlib.sha256()
    headers = sorted({h for source in sources for h in source.parent.glob("*.h")})
    for path in [*sources, *headers]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update("\0".join(CFLAGS).encode())
    digest.update(_compiler_version(compiler).encode())
    return cache_dir / f"{name}-{digest.hexdigest()[:16]}.so"


def build(
    sources: Path | list[Path],
    cache_dir: Path | None = None,
    compiler: str | None = None,
    name: str | None = None,
) -> Path:
    """One library from ``sources``, built now unless a cached one matches.

    Concurrent builders (two engines starting together) each compile to a private
    temporary name and rename it into place; the rename is atomic, so a reader never
    opens a half-written library.
    """
    sources = [sources] if isinstance(sources, Path) else sources
    name = name or sources[0].stem
    compiler = compiler or find_compiler()
    cache_dir = cache_dir or default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = library_path(sources, name, cache_dir, compiler)
    if target.exists():
        return target
    log.info("compiling the native kernels %s (once per machine, a few seconds)", name)
    started = time.perf_counter()
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        done = subprocess.run(
            [compiler, *CFLAGS, "-o", str(partial), *(str(s) for s in sources)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        partial.unlink(missing_ok=True)
        raise KernelUnavailableError(f"compiling {name} failed: {exc}") from exc
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        tail = done.stderr.strip().splitlines()[-5:]
        raise KernelUnavailableError(f"compiling {name} failed: {' | '.join(tail)}")
    partial.replace(target)
    log.info("compiled %s in %.1f s -> %s", name, time.perf_counter() - started, target)
    return target
