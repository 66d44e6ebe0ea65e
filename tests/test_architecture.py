"""The package's shape: one installed top-level name, imports that point one way (the
import-linter contract in pyproject.toml), private torch APIs in one module, and a mirror
test for every module."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import types

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
# underscored module every torch user calls.  torch.fx.experimental is public by name only (it
# changes between releases without notice), and which torch is running is decided once, in the
# boundary's ``release``: both count as private here.
BOUNDARY = "exporter._torch_internals"
_PUBLIC_UNDERSCORED = {"torch.utils._pytree"}
_PRIVATE_BY_USE = {"torch.fx.experimental"}
_TORCH_VERSION = {"torch.__version__", "torch.version", "torch.torch_version"}
_METADATA = ("importlib.metadata", "importlib_metadata", "pkg_resources")
"""Installed distributions' metadata, which gives torch's version without naming a torch module."""
_TORCH_NAME = re.compile(r"torch(\.\w+)+")
"""A string that is a dotted torch name (``"torch._dynamo"``, imported or named by string)."""
_NAMES_TORCH = re.compile(r"torch(\s*[\[(<>=!~;@].*)?", re.IGNORECASE | re.DOTALL)
"""A distribution name or requirement naming torch."""
# A private attribute torch reads from an object it does not make: the one torch.export's tracer
# holds the traced module under.
_TORCH_PRIVATE_ATTRIBUTES = {"_export_root"}
# Underscored names that are no private torch attribute: Python's own, and operator names
# (``torch.ops.aten._unsafe_view`` is an ATen operator, named so by ATen).
_STDLIB_PRIVATE = {"_getframe", "_exit", "_asdict", "_replace", "_fields", "_make"}
_OPERATOR = re.compile(r"(torch\.ops\.\w+|aten|prims)(\.\w+)?")
"""An operator namespace or packet, whose underscored attributes are operators and overloads."""
_GETATTR = {"getattr", "hasattr", "setattr", "delattr", "inspect.getattr_static"}
_ATTRIBUTE_HOOKS = {"__getattribute__", "__getattr__", "__setattr__", "__delattr__"}
_DICT_METHODS = {"get", "pop", "setdefault", "__getitem__", "__setitem__", "__delitem__", "__contains__"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _of_torch(dotted: str) -> bool:
    return dotted == "torch" or dotted.startswith("torch.")


def _class_attributes(cls: ast.ClassDef) -> set[str]:
    """The attributes a class defines: its body's names, and those its methods set on
    ``self`` or ``cls`` (by name, or by ``setattr`` or ``__setattr__`` with a literal)."""
    names = set()
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
        targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, ast.Call) and node.args:
            function, (first, *rest) = ast.unparse(node.func), node.args
            if function in ("setattr", "object.__setattr__") and rest and ast.unparse(first) in ("self", "cls"):
                first = rest[0]
            elif function not in ("super().__setattr__", "self.__setattr__"):
                continue
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
    return names


@functools.cache
def _source_classes(filename: str) -> dict[str, ast.ClassDef]:
    """The classes a source file defines, by qualified name."""
    found = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for statement in body:
            if isinstance(statement, ast.ClassDef):
                found[prefix + statement.name] = statement
                walk(statement.body, f"{prefix}{statement.name}.")
            elif isinstance(statement, (ast.If, ast.Try)):  # ``if TYPE_CHECKING:``, ``try: import``
                walk(statement.body + statement.orelse + getattr(statement, "finalbody", []), prefix)

    walk(ast.parse(pathlib.Path(filename).read_text()).body, "")
    return found


@functools.cache
def _torch_class_attributes(cls: type) -> frozenset[str]:
    """Underscored attributes of a torch class's objects: on the class, and those the methods
    of the classes it derives from set on ``self`` (``__init__``'s are on no class)."""
    names = {n for n in dir(cls) if _private(n)}
    for klass in cls.__mro__:
        try:
            source = inspect.getsourcefile(klass) if _of_torch(klass.__module__) else None
        except TypeError:  # a class of torch's C extension: dir() has it all
            continue
        definition = _source_classes(source).get(klass.__qualname__) if source else None
        if definition is not None:
            names |= {n for n in _class_attributes(definition) if _private(n)}
    return frozenset(names)


def _torch_objects() -> tuple[list, list, list]:
    """(torch's modules and objects exporter handles, its classes, its operator objects).

    A few objects are built for what only an object has: the symbolic sizes a ShapeEnv holds,
    and the flag ``Parameter`` sets on a tensor subclass it wraps (``_is_param``)."""
    import torch
    import torch._dynamo.eval_frame
    import torch._higher_order_ops.utils
    import torch._subclasses.fake_utils
    import torch.amp.autocast_mode
    import torch.fx.experimental.proxy_tensor as proxy_tensor
    import torch.fx.experimental.symbolic_shapes as symbolic_shapes
    import torch.utils._python_dispatch as python_dispatch
    import torch.utils._pytree
    from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

    modules = [
        torch, torch.nn, torch.nn.functional, torch.fx, torch.export, torch.compiler, torch.autograd, torch.library,
        torch.amp.autocast_mode, torch.utils._pytree, torch._ops, torch._subclasses.fake_tensor,
        torch._subclasses.fake_utils, torch._higher_order_ops.utils, proxy_tensor, symbolic_shapes, python_dispatch,
    ]
    classes = [
        torch.Tensor, torch.nn.Module, torch.nn.Parameter, torch.nn.Buffer, torch.fx.Node, torch.fx.Graph,
        torch.fx.GraphModule, torch.fx.Tracer, torch.fx.Interpreter, torch.fx.Proxy, OpOverload, OpOverloadPacket,
        HigherOrderOperator, FakeTensor, FakeTensorMode, FunctionalTensor, FunctionalTensorMode, symbolic_shapes.ShapeEnv,
        symbolic_shapes.DimConstraints, torch.SymInt, torch.SymBool, torch.SymFloat, python_dispatch.TorchDispatchMode,
        torch.overrides.TorchFunctionMode, proxy_tensor.ProxyTorchDispatchMode, proxy_tensor.PythonKeyTracer,
        torch.autograd.Function, torch.export.ExportedProgram, torch.export.ExportGraphSignature, torch.UntypedStorage,
        torch._dynamo.eval_frame.OptimizedModule,
    ]
    shape_env = symbolic_shapes.ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)
    dynamic = symbolic_shapes.StatelessSymbolicContext(dynamic_sizes=[symbolic_shapes.DimDynamic.DYNAMIC] * 2)
    fake = mode.from_tensor(torch.zeros(2, 3), symbolic_context=dynamic)
    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    instances = [fake, torch.nn.Parameter(fake), torch.nn.Buffer(fake), fake.shape[0], mode, shape_env, gm, gm.graph]
    operators = [torch.ops, torch.ops.aten, torch.ops.aten.add, torch.ops.aten.add.Tensor, torch.ops.higher_order.cond]
    return modules + instances + operators, classes, operators


def _underscored_attributes(objects: list, depth: int) -> set[str]:
    """Underscored attributes of ``objects`` and of the torch objects they hold, ``depth``
    levels down; an operator an operator object caches under its name (``aten._to_copy``) is none."""
    from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket, _OpNamespace

    operator = (HigherOrderOperator, OpOverload, OpOverloadPacket, _OpNamespace)
    names, seen, level = set(), set(), list(objects)
    for _ in range(depth + 1):
        below = []
        for obj in (o for o in level if id(o) not in seen):
            seen.add(id(obj))
            held = getattr(obj, "__dict__", {})
            names |= {n for n in dir(obj) if _private(n) and not isinstance(held.get(n), operator)}
            if not isinstance(obj, types.ModuleType):
                names |= _torch_class_attributes(type(obj))
            below += [v for v in held.values() if _of_torch(type(v).__module__) and not isinstance(v, type)]
        level = below
    return names


@functools.cache
def _torch_attributes() -> tuple[frozenset[str], frozenset[str]]:
    """(underscored attributes torch's objects have, those of its operator objects)."""
    objects, classes, operators = _torch_objects()
    every = _underscored_attributes(objects, depth=2).union(*map(_torch_class_attributes, classes))
    return frozenset(every | _TORCH_PRIVATE_ATTRIBUTES), frozenset(_underscored_attributes(operators, depth=0))


def _private_torch_prefix(path: str) -> str | None:
    """The shortest prefix of the dotted name ``path`` that is private torch, if one is."""
    parts = path.split(".")
    if parts[0] != "torch":
        return None
    for i in range(1, len(parts)):
        prefix = ".".join(parts[: i + 1])
        if prefix in _TORCH_VERSION or prefix in _PRIVATE_BY_USE:
            return prefix
        if not _private(parts[i]) or prefix in _PUBLIC_UNDERSCORED:
            continue
        if parts[1] == "ops" and 2 <= i <= 4 and parts[i] not in _torch_attributes()[1]:
            continue  # a namespace, operator or overload: ATen's name
        return prefix
    return None


def _defined_names(tree: ast.AST) -> set[str]:
    """Every name a module defines: functions, classes, variables, arguments, attributes it
    assigns (``self._memo = ...``), import aliases."""
    names = set()
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
    return names


def _imports(module: str, tree: ast.Module) -> dict[str, str]:
    """Each name an import in ``module`` binds, and the dotted name it stands for."""
    package = module.rsplit(".", 1)[0].split(".")
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], node.module or ""]) if node.level else node.module
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{base.rstrip('.')}.{alias.name}"
    return bound


def _resolve(dotted: str) -> object | None:
    """The object a dotted name imports as, or None."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            found = getattr(found, part, None)
        return found
    return None


class _Scan(ast.NodeVisitor):
    """One module's private torch uses, each (line, what was used, condition).

    The condition is None for a use that is private whatever the rest of the package does;
    for an underscored attribute of an object the scan cannot name, it is (the attribute,
    the class whose ``self`` or ``cls`` it is read from, if one is), for ``_Package.owns``."""

    def __init__(self, name: str, tree: ast.Module):
        self.uses: list[tuple[int, str, tuple | None]] = []
        self.defined = _defined_names(tree)
        self.imported = _imports(name, tree)
        self.torch_bases: dict[ast.ClassDef, list[type]] = {}
        self._constants = {
            t.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        self._enclosing: list[ast.ClassDef] = []
        self.visit(tree)

    def _use(self, node: ast.AST, what: str, condition: tuple | None = None) -> None:
        self.uses.append((node.lineno, what, condition))

    def _qualified(self, expr: ast.AST | None) -> str | None:
        """The dotted name ``expr`` reads through an import (``F.relu``: ``torch.nn.functional.relu``)."""
        if isinstance(expr, ast.Name):
            return self.imported.get(expr.id)
        if isinstance(expr, ast.Attribute):
            owner = self._qualified(expr.value)
            return f"{owner}.{expr.attr}" if owner else None
        return None

    def _string(self, expr: ast.AST) -> str | None:
        """The string ``expr`` is: a literal, or a module constant holding one."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        return self._constants.get(expr.id) if isinstance(expr, ast.Name) else None

    def _builtin(self, expr: ast.AST) -> str | None:
        """The builtin or stdlib function ``expr`` names (``getattr``, ``inspect.getattr_static``)."""
        if isinstance(expr, ast.Name) and expr.id not in self.imported:
            return expr.id
        qualified = self._qualified(expr)
        return qualified.removeprefix("builtins.") if qualified else None

    def _namespace_of(self, expr: ast.AST) -> ast.AST | None:
        """The object whose attributes ``expr`` holds by name: ``x`` of ``vars(x)``, ``x.__dict__``, ``dir(x)``."""
        if isinstance(expr, ast.Call) and self._builtin(expr.func) in ("vars", "dir") and len(expr.args) == 1:
            return expr.args[0]
        if isinstance(expr, ast.Attribute) and expr.attr == "__dict__":
            return expr.value
        return None

    def _access(self, node: ast.AST, owner: ast.AST | None, name: str | None) -> None:
        """Attribute ``name`` of ``owner``, read, written or tested, however it is spelled."""
        if name is None:
            return
        path = self._qualified(owner)
        if path is not None and _of_torch(path):
            if _private_torch_prefix(f"{path}.{name}") == f"{path}.{name}":
                self._use(node, f"{path}.{name}")
        elif name == "__version__" and path is None:
            self._use(node, ".__version__")  # of an object that may be torch
        elif _private(name) and name not in _STDLIB_PRIVATE:
            if owner is not None and _OPERATOR.fullmatch(ast.unparse(owner)) and name not in _torch_attributes()[1]:
                return
            reads_own = isinstance(owner, ast.Name) and owner.id in ("self", "cls") and self._enclosing
            self._use(node, f".{name}", (name, self._enclosing[-1] if reads_own else None))

    def _reads_metadata(self, node: ast.AST, function: str | None, names: list[ast.AST]) -> None:
        """A metadata lookup reads torch's version when it names torch (by a string the scan can
        read, or computed from torch: ``version(torch.__name__)``) or names no distribution (so
        reads them all).  A name computed otherwise is taken for another distribution's, as
        when the versions of a model's own distributions are looked up."""
        if function is None or not any(function == m or function.startswith(m + ".") for m in _METADATA):
            return
        strings = [s for s in map(self._string, names) if s is not None]
        computed_from_torch = any(
            _of_torch(self._qualified(n) or "")
            for name in names
            for n in ast.walk(name)
            if isinstance(n, (ast.Name, ast.Attribute))
        )
        if not names or computed_from_torch or any(_NAMES_TORCH.fullmatch(s.strip()) for s in strings):
            self._use(node, ast.unparse(node))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # a base from torch, directly or through the boundary; the package's own are found by name
        named = [q for q in map(self._qualified, node.bases) if q and (_of_torch(q) or q.startswith(BOUNDARY + "."))]
        bases = map(_resolve, named)
        self.torch_bases[node] = [b for b in bases if isinstance(b, type) and _of_torch(b.__module__)]
        self._enclosing.append(node)
        self.generic_visit(node)
        self._enclosing.pop()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _private_torch_prefix(alias.name):
                self._use(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        if _private_torch_prefix(node.module):
            self._use(node, node.module)
            return
        for alias in node.names:
            if _private_torch_prefix(f"{node.module}.{alias.name}"):
                self._use(node, f"{node.module}.{alias.name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._access(node, node.value, node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function, args = self._builtin(node.func), node.args
        if function in _GETATTR and len(args) > 1:
            self._access(node, args[0], self._string(args[1]))
        elif function == "operator.attrgetter":
            for name in (n for a in args if (s := self._string(a)) for n in s.split(".")):
                self._access(node, None, name)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _ATTRIBUTE_HOOKS and args:
            if self._builtin(node.func.value) in ("object", "type") and len(args) > 1:
                self._access(node, args[0], self._string(args[1]))
            else:
                self._access(node, node.func.value, self._string(args[0]))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _DICT_METHODS and args:
            owner = self._namespace_of(node.func.value)
            if owner is not None:
                self._access(node, owner, self._string(args[0]))
        self._reads_metadata(node, self._qualified(node.func), [*args, *(k.value for k in node.keywords)])
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        owner = self._namespace_of(node.value)
        if owner is not None:
            self._access(node, owner, self._string(node.slice))
        self._reads_metadata(node, self._qualified(node.value), [node.slice])
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            owner = self._namespace_of(node.comparators[0])
            if owner is not None:
                self._access(node, owner, self._string(node.left))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _TORCH_NAME.fullmatch(node.value) and _private_torch_prefix(node.value):
            self._use(node, repr(node.value))


@functools.lru_cache(maxsize=None)
def _scan(name: str, text: str) -> _Scan:
    return _Scan(name, ast.parse(text))


class _Package:
    """The whole package as the scans saw it: the names it defines and its classes."""

    def __init__(self, scans: list[_Scan]):
        self.defined = set().union(*(s.defined for s in scans))
        self.torch_bases = {cls: bases for s in scans for cls, bases in s.torch_bases.items()}
        self.classes: dict[str, list[ast.ClassDef]] = {}
        for cls in self.torch_bases:
            self.classes.setdefault(cls.name, []).append(cls)

    def _lineage(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        """``cls`` and the classes of the package it derives from (found by name)."""
        found, stack = [], [cls]
        while stack:
            current = stack.pop()
            if current not in found:
                found.append(current)
                stack += [c for b in current.bases for c in self.classes.get(ast.unparse(b).rsplit(".", 1)[-1], ())]
        return found

    def owns(self, name: str, reader: ast.ClassDef | None) -> bool:
        """Whether the underscored attribute ``name``, read from an object of class ``reader``
        (``self`` or ``cls`` in it) or of a class the scan cannot tell, is the package's own.

        A name torch's objects have is torch's, unless ``reader`` or a class of the package
        it derives from defines it, and no torch class it derives from has it.  Any other
        name is the package's when the package defines it anywhere."""
        if name not in _torch_attributes()[0]:
            return name in self.defined
        if reader is None:
            return False
        lineage = self._lineage(reader)
        if any(name in _torch_class_attributes(base) for cls in lineage for base in self.torch_bases[cls]):
            return False
        return any(name in _class_attributes(cls) for cls in lineage)


def _private_torch_uses(scan: _Scan, package: _Package) -> list[str]:
    """Private torch a module reaches, however it is spelled: imports of underscored torch
    modules (``from torch import _C``, ``importlib.import_module("torch._dynamo")``) and of
    torch.fx.experimental; ``torch._x``; reads of torch's version; and underscored attributes
    that are torch's (``_Package.owns``), by name or by string (``getattr(x, "_cdata")``,
    ``vars(m)["_buffers"]``)."""
    return [f"line {line}: {what}" for line, what, condition in scan.uses if condition is None or not package.owns(*condition)]


def _offenders(sources: dict[str, str]) -> dict[str, list[str]]:
    scans = {name: _scan(name, text) for name, text in sources.items()}
    package = _Package(list(scans.values()))
    offenders = {}
    for name, scan in scans.items():
        if name != BOUNDARY and not name.startswith(BOUNDARY + "."):
            uses = _private_torch_uses(scan, package)
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
        ("exporter.trace.tracer", "_ = torch.ops.aten.add.Tensor._schema", "torch.ops.aten.add.Tensor._schema"),
        ("exporter.passes.lift_constants", "_ = torch.nn.Linear(1, 1)._parameters", "._parameters"),
        ("exporter.verifier.ops", "_ = torch.zeros(1).untyped_storage()._cdata", "._cdata"),
        ("exporter.trace.symbols", "_ = torch.zeros(1)._version_of_a_future_release", "._version_of_a_future_release"),
        ("exporter.cli.main", "import torch._dynamo", "torch._dynamo"),
        ("exporter._pipeline", "_ = torch.__version__ >= '2.15'", "torch.__version__"),
        ("exporter._pipeline", "import torch as t; _ = t._C", "torch._C"),
        # by string
        ("exporter.verifier.ops", '_ = getattr(torch.zeros(1).untyped_storage(), "_cdata")', "._cdata"),
        ("exporter.passes.lift_constants", 'setattr(torch.nn.Linear(1, 1), "_modules", {})', "._modules"),
        ("exporter.trace.tracer", '_ = hasattr(torch.zeros(1), "_base")', "._base"),
        ("exporter.trace.tracer", 'delattr(torch.ops.aten.add.Tensor, "_dispatch_cache")', "torch.ops.aten.add.Tensor._dispatch_cache"),
        ("exporter.passes.lift_constants", '_ = vars(torch.nn.Linear(1, 1))["_parameters"]', "._parameters"),
        ("exporter.passes.lift_constants", '_ = torch.nn.Linear(1, 1).__dict__["_buffers"]', "._buffers"),
        ("exporter.passes.lift_constants", '_ = torch.nn.Linear(1, 1).__dict__.get("_modules")', "._modules"),
        ("exporter.passes.lift_constants", '_ = "_buffers" in vars(torch.nn.Linear(1, 1))', "._buffers"),
        ("exporter.trace.tracer", '_ = object.__getattribute__(torch.zeros(1), "_backward_hooks")', "._backward_hooks"),
        ("exporter.trace.symbols", '_ = inspect.getattr_static(torch.zeros(1), "_cdata")', "._cdata"),
        ("exporter.verifier.ops", '_ = operator.attrgetter("_parameters")', "._parameters"),
        ("exporter.trace.tracer", '_NAME = "_cdata"\n_ = getattr(torch.zeros(1).untyped_storage(), _NAME)', "._cdata"),
        # underscored names imported from torch, and imports by name
        ("exporter.trace.tracer", "from torch import _C", "torch._C"),
        ("exporter.trace.tracer", "from torch import _ops as ops", "torch._ops"),
        ("exporter.passes.lift_constants", "from torch import _subclasses", "torch._subclasses"),
        ("exporter.cli.main", "from torch import _dynamo", "torch._dynamo"),
        ("exporter._pipeline", 'import importlib; _ = importlib.import_module("torch._dynamo")', "'torch._dynamo'"),
        ("exporter.verifier.ops", '_ = __import__("torch._x")', "'torch._x'"),
        ("exporter.cli.main", 'import logging; _ = logging.getLogger("torch._subclasses.fake_tensor")', "'torch._subclasses.fake_tensor'"),
        # torch.fx.experimental
        ("exporter.trace.tracer", "import torch.fx.experimental.proxy_tensor", "torch.fx.experimental.proxy_tensor"),
        ("exporter.passes.lift_constants", "from torch.fx.experimental import symbolic_shapes", "torch.fx.experimental"),
        ("exporter.passes.lift_constants", "from torch.fx.experimental.proxy_tensor import make_fx", "torch.fx.experimental.proxy_tensor"),
        ("exporter.verifier.ops", "from torch.fx import experimental", "torch.fx.experimental"),
        ("exporter._pipeline", "_ = torch.fx.experimental.symbolic_shapes.ShapeEnv", "torch.fx.experimental"),
        # torch's version, however it is read
        ("exporter._pipeline", "from torch import __version__", "torch.__version__"),
        ("exporter._pipeline", "_ = torch.version.__version__", "torch.version"),
        ("exporter._pipeline", "_ = torch.version.git_version", "torch.version"),
        ("exporter._pipeline", "import torch.version", "torch.version"),
        ("exporter._pipeline", "from torch.torch_version import TorchVersion", "torch.torch_version"),
        ("exporter._pipeline", '_ = getattr(torch, "__version__")', "torch.__version__"),
        ("exporter.cli.main", '_ = sys.modules["torch"].__version__', ".__version__"),
        ("exporter.cli.main", "import importlib.metadata; _ = importlib.metadata.version('torch')", "importlib.metadata.version('torch')"),
        (
            "exporter.cli.main",
            "import importlib.metadata; _ = importlib.metadata.distribution('torch').version",
            "importlib.metadata.distribution('torch')",
        ),
        ("exporter.cli.main", "from importlib.metadata import version; _ = version('torch')", "version('torch')"),
        ("exporter._pipeline", "import importlib.metadata as m; _ = m.version(torch.__name__)", "m.version(torch.__name__)"),
        (
            "exporter.cli.main",
            "import importlib.metadata; _ = list(importlib.metadata.distributions())",
            "importlib.metadata.distributions()",
        ),
        (
            "exporter.cli.main",
            "import pkg_resources; _ = pkg_resources.get_distribution('torch').version",
            "pkg_resources.get_distribution('torch')",
        ),
        ("exporter.cli.main", "import pkg_resources; _ = pkg_resources.require('torch>=2.13')", "pkg_resources.require('torch>=2.13')"),
        # a name torch's objects have is torch's, though the package defines it too
        ("exporter.trace.symbols", "_ = torch.zeros(1)._version", "._version"),
        ("exporter.trace.symbols", '_ = getattr(torch.zeros(1), "_version")', "._version"),
        ("exporter.passes.lift_constants", "_ = torch.nn.Parameter(torch.zeros(1))._is_param", "._is_param"),
        ("exporter._program", "class _Memo:\n    def read(self):\n        return self._version", "._version"),
        (
            "exporter.trace.fast.recorder",
            "class _Mode(ProxyTorchDispatchMode):\n    def __init__(self):\n        self._mode_key = None",
            "._mode_key",
        ),
        ("exporter.trace.tracer", "class _Holder(torch.nn.Module):\n    def clear(self):\n        self._parameters = {}", "._parameters"),
        (
            "exporter.trace.tracer",
            "from exporter._torch_internals import fast; _ = fast.proxy_tensor._ModuleStackTracer",
            "._ModuleStackTracer",
        ),
    ],
)
def test_the_boundary_check_fails_on_a_violation(module, line, found):
    sources = _sources()
    sources[module] += f"\n{line}  # a deliberate violation\n"
    last = sources[module].count("\n")
    assert _offenders(sources) == {module: [f"line {last}: {found}"]}


@pytest.mark.parametrize(
    "module, line",
    [
        (
            "exporter._program",
            "class _Memo:\n    def __init__(self):\n        self._version = 0\n\n    def read(self):\n        return self._version",
        ),
        (
            "exporter.trace.fast.recorder",
            "class _Mode(TorchDispatchMode):\n    def __init__(self):\n        self._ops = []\n\n    def count(self):\n        return len(self._ops)",
        ),
        ("exporter.trace.tracer", "_ = torch.ops.aten._unsafe_view.default"),
        ("exporter.trace.tracer", '_ = getattr(torch.zeros(1), "__class__")'),
        ("exporter.trace.tracer", "from torch.utils import _pytree"),
        ("exporter.trace.tracer", '_ = "torch._dynamo is imported on first use"'),
        ("exporter.cli.main", "import importlib.metadata; _ = importlib.metadata.version('torch-exporter')"),
    ],
)
def test_the_boundary_check_passes_what_is_not_private_torch(module, line):
    sources = _sources()
    sources[module] += f"\n{line}\n"
    assert _offenders(sources) == {}


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
