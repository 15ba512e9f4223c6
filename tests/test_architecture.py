"""The dependency rules of DESIGN.md and docs/architecture.md, checked over the source.

Every ``import`` and ``from … import`` of every module is read with ``ast`` (function-
level imports included, so a lazy import cannot hide a wrong arrow):

* ``gateway`` → {``semantic``, ``prefix``, ``validators``, ``protocol``}; the three
  libraries never import each other or ``gateway``;
* ``protocol`` (the wire format) imports only itself, and never torch;
* the bookkeeping in ``prefix/core`` never imports torch;
* importing the gateway app, its routes and its CLI loads no torch (checked in a
  fresh interpreter): a gateway in front of a remote engine stays torch-free.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("gateway", "semantic", "prefix", "validators", "protocol", "migrations")
ALLOWED: dict[str, set[str]] = {
    "gateway": {"gateway", "semantic", "prefix", "validators", "protocol", "migrations"},
    "semantic": {"semantic"},
    "prefix": {"prefix", "protocol"},
    "validators": {"validators"},
    "protocol": {"protocol"},
}


def imports(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports (absolute imports only)."""
    source = path.read_text()
    try:
        tree = ast.parse(source, filename=str(path))
    except SystemError:  # CPython 3.11.7's "AST constructor recursion depth mismatch"
        # after some earlier test's RecursionError (gh-106905; once in a full run): the
        # depth it tracks is per thread, so a fresh thread parses the file as it is
        with ThreadPoolExecutor(1) as pool:
            tree = pool.submit(ast.parse, source, str(path)).result()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_what_the_design_allows(package: str) -> None:
    assert modules(package), f"{package}/ has no modules"
    wrong = []
    for path in modules(package):
        for name in imports(path):
            top = name.split(".")[0]
            if top in PROJECT and top not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("folder", ["protocol", "prefix/core"])
def test_wire_protocol_and_bookkeeping_are_torch_free(folder: str) -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules(folder)
        for name in imports(path)
        if name.split(".")[0] in {"torch", "transformers", "sentence_transformers"}
    ]
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_a_wrong_arrow(tmp_path: Path) -> None:
    # Positive control: a lazy import inside a function is still found.
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from gateway.proxy import routes\n    import torch\n")
    assert imports(bad) == {"gateway.proxy", "torch"}


def test_gateway_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "import gateway.app, gateway.proxy.routes, gateway.proxy.engine_pool, gateway.cli\n"
        "loaded = sorted(m for m in ('torch', 'transformers') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", f"importing the gateway loaded {out.stdout.strip()}"
    # Positive control: the same check sees torch when the engine is imported.
    code = code.replace("gateway.cli\n", "gateway.cli, prefix.serve.engine\n")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "torch" in out.stdout
