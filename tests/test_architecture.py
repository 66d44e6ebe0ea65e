"""The package's shape: one installed top-level name, imports that point one way (the
import-linter contract in pyproject.toml), private torch APIs in one module, and a mirror
test for every module."""

from __future__ import annotations

import ast
import os
import pathlib
import re
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


# Private torch APIs may be imported or read only in the boundary package; pytree is the one
# underscored module every torch user calls.
BOUNDARY = "exporter._torch_internals"
_PUBLIC_UNDERSCORED = {"torch.utils._pytree"}
# Private attributes of torch objects, caught whatever object they are read from.
_TORCH_PRIVATE_ATTRIBUTES = {
    "_schema", "_cdata", "_is_view", "_buffers", "_parameters", "_modules", "_non_persistent_buffers_set",
    "_overloadname", "_op_dk", "_dispatch_cache", "_get_dispatch", "_make_subclass", "_fake_device",
    "_version_counter", "_expr", "_orig_mod", "_hop_compile_and_call", "_check_fake_real_tensors",
}
# Underscored names that are no private torch attribute: Python's own, and operator names
# (``torch.ops.aten._unsafe_view`` is an ATen operator, named so by ATen).
_STDLIB_PRIVATE = {"_getframe", "_exit", "_asdict", "_replace", "_fields", "_make"}
_OPERATOR = re.compile(r"(torch\.ops\.\w+|aten|prims)(\.\w+)?")
"""An operator namespace or packet, whose underscored attributes are operators and overloads."""


def _defined_names(trees: list[ast.AST]) -> set[str]:
    """Every name the package defines itself: functions, classes, variables, arguments,
    attributes it assigns (``self._memo = ...``), import aliases."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[-1])
    return names - _TORCH_PRIVATE_ATTRIBUTES


def _private_torch_uses(tree: ast.AST, own: set[str]) -> list[str]:
    """Imports of underscored torch modules, ``torch._x``, and underscored attributes the
    package does not define itself (so they belong to a torch object)."""
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
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in own
            and node.attr not in _STDLIB_PRIVATE
            and not (node.attr not in _TORCH_PRIVATE_ATTRIBUTES and _OPERATOR.fullmatch(ast.unparse(node.value)))
            and not (isinstance(node.value, ast.Name) and node.value.id == "torch")
        ):
            uses.append(f"line {node.lineno}: .{node.attr}")
        if isinstance(node, ast.Attribute) and node.attr == "__version__" and ast.unparse(node.value) == "torch":
            uses.append(f"line {node.lineno}: torch.__version__")
    return uses


def _offenders(sources: dict[str, str]) -> dict[str, list[str]]:
    trees = {name: ast.parse(text) for name, text in sources.items()}
    own = _defined_names(list(trees.values()))
    offenders = {}
    for name, tree in trees.items():
        if name != BOUNDARY and not name.startswith(BOUNDARY + "."):
            uses = _private_torch_uses(tree, own)
            if uses:
                offenders[name] = uses
    return offenders


def _sources() -> dict[str, str]:
    return {name: path.read_text() for name, path in _modules()}


def test_private_torch_apis_are_used_only_in_the_boundary():
    assert _offenders(_sources()) == {}


@pytest.mark.parametrize(
    "module, line, found",
    [
        ("exporter.trace.tracer", "_ = torch.ops.aten.add.Tensor._schema", "._schema"),
        ("exporter.passes.lift_constants", "_ = torch.nn.Linear(1, 1)._parameters", "._parameters"),
        ("exporter.verifier.ops", "_ = torch.zeros(1).untyped_storage()._cdata", "._cdata"),
        ("exporter.trace.symbols", "_ = torch.zeros(1)._version_of_a_future_release", "._version_of_a_future_release"),
        ("exporter.cli.main", "import torch._dynamo", "torch._dynamo"),
        ("exporter._pipeline", "_ = torch.__version__ >= '2.15'", "torch.__version__"),
    ],
)
def test_the_boundary_check_fails_on_a_violation(module, line, found):
    sources = _sources()
    sources[module] += f"\n{line}  # a deliberate violation\n"
    offenders = _offenders(sources)
    assert list(offenders) == [module]
    assert offenders[module][0].endswith(found)


def test_only_the_fast_paths_import_their_torch_pieces():
    importers = set()
    for name, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("_torch_internals.fast"):
                importers.add(name)
            elif isinstance(node, ast.ImportFrom) and node.module == "_torch_internals" and any(a.name == "fast" for a in node.names):
                importers.add(name)
    assert importers and all(name.startswith("exporter.trace.fast") for name in importers), importers


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
