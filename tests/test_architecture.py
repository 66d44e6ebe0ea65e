"""The package's shape: one installed top-level name, imports that point one way (the
import-linter contract in pyproject.toml), private torch APIs in one module, and a mirror
test for every module."""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE_DIRS = {"exporter": ROOT / "exporter", "exporter.passes": ROOT / "passes", "exporter.verifier": ROOT / "verifier"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> pathlib.Path:
    """The project installed as ``pip install .`` installs it (no dependencies) into an empty directory.

    Built from a copy of the sources: a build writes into the tree it builds, and test
    workers running in parallel must not share one."""
    source = tmp_path_factory.mktemp("source")
    for name in ("exporter", "passes", "verifier"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    return target


def _run(args: list[str], site: pathlib.Path, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    # Run outside the source tree, so only the installed copy (and the venv's packages) is importable.
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)


def _lint_imports(site: pathlib.Path, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    lint = pathlib.Path(sys.executable).with_name("lint-imports")
    return _run([str(lint), str(ROOT / "pyproject.toml")], site, cwd)


def test_an_install_adds_exactly_one_top_level_name(installed, tmp_path):
    top_level = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")} - {"bin", "__pycache__"}
    assert top_level == {"exporter"}
    found = _run([sys.executable, "-c", "import exporter.passes, exporter.verifier; print(exporter.passes.__file__)"], installed, tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(installed / "exporter" / "passes" / "__init__.py")
    for name in ("passes", "verifier"):
        missing = _run([sys.executable, "-c", f"import {name}"], installed, tmp_path)
        assert missing.returncode != 0 and f"No module named '{name}'" in missing.stderr


def test_the_editable_install_maps_the_top_level_folders_into_the_package():
    import exporter
    import exporter.passes
    import exporter.verifier

    for name, module in (("exporter.passes", exporter.passes), ("exporter.verifier", exporter.verifier)):
        path = pathlib.Path(module.__file__).resolve()
        assert path.parent == SOURCE_DIRS[name] or path.parent.parent == pathlib.Path(exporter.__file__).resolve().parent


def test_the_import_contract_holds(installed, tmp_path):
    result = _lint_imports(installed, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    "module, line, contract",
    [
        ("passes/lift_constants.py", "import exporter.trace", "Passes and the verifier import only the shared vocabulary"),
        ("inputs/bind.py", "import exporter.trace", "Imports point one way"),
        ("trace/tracer.py", "import rich", "rich is for the application layer only"),
    ],
)
def test_the_import_contract_fails_on_a_violation(installed, tmp_path, module, line, contract):
    site = tmp_path / "site"
    shutil.copytree(installed / "exporter", site / "exporter")
    with open(site / "exporter" / module, "a") as f:
        f.write(f"\n{line}  # a deliberate violation\n")
    result = _lint_imports(site, tmp_path)
    assert result.returncode == 1
    broken = [line for line in result.stdout.splitlines() if line.endswith("BROKEN")]
    assert len(broken) == 1 and broken[0].startswith(contract)


def _modules() -> list[tuple[str, pathlib.Path]]:
    """(dotted name, file) of every module of the package, from the source tree."""
    found = []
    for package, directory in SOURCE_DIRS.items():
        for path in sorted(directory.rglob("*.py")):
            relative = path.relative_to(directory).with_suffix("")
            if package == "exporter" and relative.parts[0] in ("passes", "verifier"):
                continue
            found.append((".".join((package, *relative.parts)), path))
    return found


# Private torch APIs may be imported or read only in exporter._torch_internals; pytree is
# the one underscored module every torch user calls.
_PRIVATE_TORCH_ALLOWED = {"exporter._torch_internals"}
_PUBLIC_UNDERSCORED = {"torch.utils._pytree"}


def _private_torch_uses(tree: ast.AST) -> list[str]:
    uses = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
            names = [f"torch.{node.attr}"]
        for name in names:
            parts = name.split(".")
            private = any(p.startswith("_") and not p.startswith("__") for p in parts[1:])
            if parts[0] == "torch" and private and name not in _PUBLIC_UNDERSCORED:
                uses.append(f"line {node.lineno}: {name}")
    return uses


def test_private_torch_apis_are_used_only_in_torch_internals():
    offenders = {}
    for name, path in _modules():
        if name not in _PRIVATE_TORCH_ALLOWED:
            uses = _private_torch_uses(ast.parse(path.read_text()))
            if uses:
                offenders[name] = uses
    assert offenders == {}


# Modules that only re-export or start another module need no test of their own.
_NO_MIRROR = {"exporter.__main__", "exporter.testing"}


def _mirror_test(path: pathlib.Path) -> pathlib.Path:
    """``exporter/trace/patches.py`` is tested by ``tests/exporter/trace/test_patches.py``,
    ``passes/lift_constants.py`` by ``tests/passes/test_lift_constants.py``."""
    relative = path.relative_to(ROOT)
    return ROOT / "tests" / relative.parent / f"test_{relative.stem.lstrip('_')}.py"


def test_every_module_has_a_mirror_test():
    missing = [
        str(_mirror_test(path).relative_to(ROOT))
        for name, path in _modules()
        if path.name != "__init__.py" and name not in _NO_MIRROR and not _mirror_test(path).exists()
    ]
    assert missing == []


def test_the_module_walk_sees_the_whole_package():
    names = {name for name, _ in _modules()}
    assert {"exporter._pipeline", "exporter.trace.patches", "exporter.passes.lift_constants", "exporter.verifier.ops"} <= names
    assert not any(name.startswith(("exporter.exporter", "passes", "verifier")) for name in names)
    assert len(names) == len(set(_modules()))
