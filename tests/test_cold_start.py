"""What a fresh process imports: ``import exporter`` loads neither Dynamo nor inductor, and
an export (static, dynamic, saved, from the command line) loads them only where torch's
own fake tensors make it, never through torch.export's tracer or a private import of ours.

Each case runs in a fresh interpreter; a finder on ``sys.meta_path`` records the frame that
first imports each watched module (benchmarks/bench_cold.py measures what it costs)."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MLP = f"{ROOT / 'examples' / 'mlp.py'}:MLP"

WATCHED = ("torch._dynamo", "torch._inductor", "torch.export._trace", "torch._functorch.aot_autograd", "transformers")

# Prepended to every case: records, per watched module, the innermost frame outside
# importlib that imported it, as (file relative to its package root, function).
_RECORDER = textwrap.dedent(
    """
    import importlib.abc, json, os, sys, traceback
    WATCHED = {watched!r}
    FIRST = {{}}

    class Recorder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name in WATCHED and name not in FIRST:
                frames = [f for f in traceback.extract_stack()[:-1] if "importlib" not in f.filename]
                filename = frames[-1].filename.replace(os.sep, "/")
                for package in ("/torch/", "/exporter/", "/passes/", "/verifier/"):
                    if package in filename:
                        filename = package.strip("/") + "/" + filename.rsplit(package, 1)[1]
                        break
                FIRST[name] = [filename, frames[-1].name]
            return None

    sys.meta_path.insert(0, Recorder())
    """
).format(watched=WATCHED)

_REPORT = "\nprint('FIRST-IMPORTS ' + json.dumps(FIRST))\n"

_EXPORT = """
import torch
import exporter
sys.path.insert(0, {examples!r})
from mlp import MLP, example_inputs
dynamic_shapes = {dynamic_shapes}
program = exporter.export(MLP(), example_inputs(), dynamic_shapes=dynamic_shapes)
torch.export.save(program, {path!r})
"""

# The command line: the parent runs main() the way ``python -m exporter`` does.
_CLI = """
from exporter.cli import main
try:
    main({argv!r})
except SystemExit as e:
    assert not e.code, e.code
"""

# Where torch 2.13 itself imports Dynamo on an export: FakeTensorMode.__init__ imports
# torch._dynamo.config, and ShapeEnv (through torch.fx.experimental.validator) imports
# torch._dynamo.exc; both run on every export, so does torch.export.  Inductor comes in with
# Dynamo.  Nothing of exporter's may be added here, and nothing else of torch's.
TORCH_IMPORTS_DYNAMO = {
    ("torch/_subclasses/fake_tensor.py", "__init__"),
    ("torch/fx/experimental/validator.py", "<module>"),
}
DYNAMO_IMPORTS_INDUCTOR = {("torch/_dynamo/trace_rules.py", "<module>")}


def _first_imports(body: str, tmp_path: pathlib.Path) -> dict[str, tuple[str, str]]:
    script = _RECORDER + body + _REPORT
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("FIRST-IMPORTS "))
    return {name: tuple(where) for name, where in json.loads(line.split(" ", 1)[1]).items()}


@pytest.mark.parametrize("body", ["import exporter", "import exporter.cli", "import exporter.testing"])
def test_importing_exporter_imports_no_compiler(body, tmp_path):
    assert _first_imports(body, tmp_path) == {}


def test_cli_help_imports_no_compiler(tmp_path):
    assert _first_imports(_CLI.format(argv=["--help"]), tmp_path) == {}


def _export_body(tmp_path: pathlib.Path, dynamic: bool) -> str:
    dynamic_shapes = '{"x": {0: torch.export.Dim("batch", max=64)}}' if dynamic else "None"
    return _EXPORT.format(examples=str(ROOT / "examples"), dynamic_shapes=dynamic_shapes, path=str(tmp_path / "m.pt2"))


def _assert_only_torch_imports_compilers(first: dict[str, tuple[str, str]], *, in_workers: bool = False) -> None:
    for name in ("torch.export._trace", "torch._functorch.aot_autograd", "transformers"):
        assert name not in first, f"{name} imported from {first[name]}"
    if in_workers:
        # check exports in worker processes forked from a server that loads once what
        # every export's FakeTensorMode would load (torch's Dynamo import above): the
        # process that runs check imports no compiler itself.
        assert "torch._dynamo" not in first and "torch._inductor" not in first, first
        return
    assert first.get("torch._dynamo") in TORCH_IMPORTS_DYNAMO
    assert first.get("torch._inductor") in DYNAMO_IMPORTS_INDUCTOR


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_an_export_imports_compilers_only_where_torch_does(dynamic, tmp_path):
    _assert_only_torch_imports_compilers(_first_imports(_export_body(tmp_path, dynamic), tmp_path))


@pytest.mark.parametrize(
    "argv",
    [[MLP, "-q"], [MLP, "-q", "--dynamic", "x.0=batch:1..64"], ["check", "-q", MLP]],
    ids=["export", "dynamic", "check"],
)
@pytest.mark.slow
def test_the_command_line_imports_compilers_only_where_torch_does(argv, tmp_path):
    first = _first_imports(_CLI.format(argv=argv), tmp_path)
    _assert_only_torch_imports_compilers(first, in_workers=argv[0] == "check")


@pytest.mark.xfail(
    strict=True,
    reason="torch 2.13-2.15's FakeTensorMode and ShapeEnv import Dynamo when they are created (TORCH_IMPORTS_DYNAMO)",
)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_an_export_imports_no_compiler(dynamic, tmp_path):
    """What a cold export should import; when torch stops importing Dynamo here this passes,
    and the strict xfail makes it fail until the marker is removed."""
    first = _first_imports(_export_body(tmp_path, dynamic), tmp_path)
    assert "torch._dynamo" not in first and "torch._inductor" not in first


# Dynamo's Source classes are needed only for dynamic shapes, where torch's ShapeEnv imports
# them itself; these functions of exporter._torch_internals may import them, nothing else may.
_MAY_IMPORT_DYNAMO = {"size_source", "constant_source"}
# the --aoti wrappers: AOTInductor, imported only when a package is asked for
_MAY_IMPORT_INDUCTOR = {"aoti_compile_package", "aoti_load_package"}
_COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch.export._trace", "torch._functorch.aot_autograd")


def _compiler_imports(tree: ast.AST) -> list[tuple[str, int, str]]:
    """(enclosing function or ``<module>``, line, module) of every import of a compiler module."""
    found = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
            names = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module]
            found.extend((scope, child.lineno, n) for n in names if n.startswith(_COMPILER_MODULES))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_only_the_source_helpers_import_dynamo():
    found = [
        entry
        for path in sorted((ROOT / "exporter" / "_torch_internals").glob("*.py"))
        for entry in _compiler_imports(ast.parse(path.read_text()))
    ]
    allowed = {**dict.fromkeys(_MAY_IMPORT_DYNAMO, "torch._dynamo.source"), **dict.fromkeys(_MAY_IMPORT_INDUCTOR, "torch._inductor")}
    assert all(allowed.get(scope) == module for scope, _, module in found), found
    assert {module for _, _, module in found} == {"torch._dynamo.source", "torch._inductor"}


def test_the_import_check_finds_imports():
    tree = ast.parse("import torch._dynamo\ndef f():\n    from torch._inductor import config\n")
    assert _compiler_imports(tree) == [("<module>", 1, "torch._dynamo"), ("f", 3, "torch._inductor")]
