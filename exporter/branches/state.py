"""The Python state a loop over a data-sized tensor reaches: the frames from forward to the
loop, what their locals hold and what is reachable from those (attributes, list and dict
contents and lengths), as fingerprints that two points of a run compare; and the writes to
the loop's frame that carry a changed number through the program or unbind a changed value."""

from __future__ import annotations

import ast
import collections
import dis
import enum
import inspect
import linecache
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

import attrs
import sympy
import torch

from .._ir import is_library_frame
from .._torch_internals import TRACING_MACHINERY

__all__ = [
    "Change",
    "Expr",
    "Kind",
    "Ref",
    "State",
    "assigned_at",
    "changes",
    "iterated_by_for",
    "refs",
    "scope",
    "set_local",
    "snapshot",
    "unbind_local",
    "zipped_by_for",
]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

MISSING = ("missing",)
"""The fingerprint of a path that does not exist (a local not yet bound)."""

MAX_OBJECTS = 200_000
"""How many objects one snapshot fingerprints; past that, the rest count as unchanged."""


class Kind(enum.Enum):
    """What a loop's frame local holds, for carrying it through a torch.while_loop."""

    BOOL = torch.bool
    INT = torch.int64
    FLOAT = torch.float64


def kind_of(value: Any) -> Kind | None:
    """The number kind of ``value`` (plain or symbolic), else None."""
    if isinstance(value, (bool, torch.SymBool)):
        return Kind.BOOL
    if isinstance(value, (int, torch.SymInt)):
        return Kind.INT
    if isinstance(value, (float, torch.SymFloat)):
        return Kind.FLOAT
    return None


State = dict
"""A snapshot: ``(frame, name)`` -> the fingerprint of that local of that scope frame (0 is
the loop's).  A fingerprint is a tuple: a leaf starts with a string (``("int", 3)``,
``("tensor",)``); an object or container is ``(what it is, ((step, fingerprint), ...))``,
its steps ``.attr`` and ``[key]``, what it is ``("object", type name, ...)``: a container's
length, an iterator's position."""


def scope(frame: types.FrameType) -> list[types.FrameType]:
    """``frame`` (the loop's) and the user's frames outside it, out to the one exporter called
    (forward's), innermost first; torch's frames between them (``Module.__call__``) hold
    nothing the user's do not.  A frame of code with no file (``python -c``) is the user's."""
    frames = [frame]
    frame = frame.f_back
    while frame is not None and not frame.f_code.co_filename.startswith(_PACKAGE):
        if not is_library_frame(os.path.abspath(frame.f_code.co_filename)):
            frames.append(frame)
        frame = frame.f_back
    return frames


_INSTRUCTIONS: dict[types.CodeType, dict[int, str]] = {}


def iterated_by_for(frame: types.FrameType) -> bool:
    """Whether ``frame`` asks for an iterator to run a ``for`` statement over it itself (its
    instruction is ``GET_ITER`` and the next ``FOR_ITER``), in a plain function: not for
    ``enumerate``, ``zip``, ``islice``, ``list`` or a comprehension, whose own state of the
    iteration Python does not show, and not in a generator, which hands each step to a
    caller."""
    ops = _instructions_from(frame, 2)
    return ops is not None and ops == ["GET_ITER", "FOR_ITER"]


def _instructions_from(frame: types.FrameType, count: int) -> list[str] | None:
    """The names of ``frame``'s current instruction and the ones after it, ``count`` in all
    (an ``EXTENDED_ARG``, which a long loop's jump takes, left out); None in a generator or
    coroutine, which hands each step to a caller."""
    code = frame.f_code
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return None
    ops = _INSTRUCTIONS.get(code)
    if ops is None:
        ops = _INSTRUCTIONS[code] = {i.offset: i.opname for i in dis.get_instructions(code)}
    at = frame.f_lasti
    return [ops.get(at, "")] + [ops[o] for o in sorted(ops) if o > at and ops[o] != "EXTENDED_ARG"][: count - 1]


def zipped_by_for(frame: types.FrameType) -> int | None:
    """How many iterables the builtin ``zip`` takes where ``frame`` calls it to run a ``for``
    statement over what it gives (``for box, score in zip(boxes, scores):``: its instruction
    is the call, and the next ``GET_ITER`` and ``FOR_ITER``); None where it does not."""
    ops = _instructions_from(frame, 3)
    if ops is None or not ops[0].startswith("CALL") or ops[1:] != ["GET_ITER", "FOR_ITER"]:
        return None
    if "zip" in frame.f_locals or frame.f_globals.get("zip", zip) is not zip:
        return None
    from .meeting import statement_at

    statement = statement_at(frame)
    call = statement.iter if isinstance(statement, ast.For) else None
    if not (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "zip"
        and not any(isinstance(a, ast.Starred) for a in call.args)
        and all(k.arg == "strict" for k in call.keywords) and len(call.args) >= 2
    ):
        return None
    return len(call.args)


# -- fingerprints


_PLAIN = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented), range, slice,
          torch.dtype, torch.device, torch.layout, torch.memory_format, enum.Enum)
_IDENTITY = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, type, types.CodeType,
             types.MethodWrapperType, types.WrapperDescriptorType, types.MethodDescriptorType)
_TENSOR = ("tensor",)


class _How(enum.Enum):
    """How a snapshot fingerprints a value of one type."""

    TENSOR = enum.auto()
    SYMBOLIC = enum.auto()
    PLAIN = enum.auto()
    FUNCTION = enum.auto()
    IDENTITY = enum.auto()
    SEQUENCE = enum.auto()
    MAPPING = enum.auto()
    SET = enum.auto()
    GENERATOR = enum.auto()
    CELL = enum.auto()
    ITERATOR = enum.auto()
    OBJECT = enum.auto()
    SYMPY = enum.auto()


_MACHINERY = (*TRACING_MACHINERY, "_pytest.", "pluggy.")
"""Modules whose objects are the tracing's machinery or a test runner's, not a model's
state: each counts as itself, unwalked."""


_HOW: dict[type, tuple[_How, tuple[str, ...]]] = {}


def _how_of(cls: type) -> tuple[_How, tuple[str, ...]]:
    """How values of ``cls`` are fingerprinted, and the slots an object of it has."""
    found = _HOW.get(cls)
    if found is not None:
        return found
    slots: tuple[str, ...] = ()
    if issubclass(cls, torch.Tensor):
        how = _How.TENSOR
    elif issubclass(cls, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        how = _How.SYMBOLIC
    elif issubclass(cls, sympy.Basic):
        how = _How.SYMPY  # immutable: its expression
    elif "__fingerprinted__" in dir(cls):  # an object of exporter's that says what of it counts
        how, slots = _How.OBJECT, tuple(cls.__fingerprinted__)
    elif (getattr(cls, "__module__", "") or "").startswith(_MACHINERY):
        how = _How.IDENTITY
    elif issubclass(cls, _PLAIN):
        how = _How.PLAIN
    elif cls is types.FunctionType:
        how = _How.FUNCTION
    elif issubclass(cls, _IDENTITY):
        how = _How.IDENTITY
    elif issubclass(cls, (list, tuple, collections.deque)):
        how = _How.SEQUENCE
    elif issubclass(cls, dict):
        how = _How.MAPPING
    elif issubclass(cls, (set, frozenset)):
        how = _How.SET
    elif issubclass(cls, types.GeneratorType):
        how = _How.GENERATOR
    elif issubclass(cls, types.CellType):
        how = _How.CELL
    elif hasattr(cls, "__next__") and "__dict__" not in dir(cls):
        how = _How.ITERATOR  # a builtin iterator: its position, where it gives it
    elif _standard(cls) and cls is not types.SimpleNamespace:
        how = _How.IDENTITY  # a logger, a lock, a pattern: not the model's state
    else:
        how = _How.OBJECT
        slots = tuple(_slots(cls))
    _HOW[cls] = (how, slots)
    return how, slots


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, enum.Enum):
        return ("enum", type(value).__qualname__, value.name)
    return (type(value).__name__, value if isinstance(value, (bool, int, str, bytes, type(None))) else repr(value))


@attrs.frozen(eq=False)
class Ref:
    """A tensor in a fingerprint, with the node of the run's graph that holds it (None where
    the trace has none): equal to every other, like ``Expr``, but there for a comparison that
    knows which node of one run stands for which of the other (``align``)."""

    node: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref)

    def __hash__(self) -> int:
        return 1


def refs(ours: Any, theirs: Any) -> Iterator[tuple[Any, Any]]:
    """The tensors at the same places of two equal fingerprints (``snapshot`` with
    ``nodes``), as pairs of their nodes."""
    if isinstance(ours, Ref) and isinstance(theirs, Ref):
        yield ours.node, theirs.node
    elif isinstance(ours, dict) and isinstance(theirs, dict):
        for key, value in ours.items():
            if key in theirs:
                yield from refs(value, theirs[key])
    elif isinstance(ours, (tuple, list)) and isinstance(theirs, (tuple, list)) and len(ours) == len(theirs):
        for x, y in zip(ours, theirs):
            yield from refs(x, y)


@attrs.frozen(eq=False)
class Expr:
    """A symbolic number's expression in a fingerprint that counts it as one of its kind:
    equal to every other (two runs' symbols are their own), but there for a comparison that
    knows what one run's symbols are in the other's (``align``)."""

    expr: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expr)

    def __hash__(self) -> int:
        return 0


def _symbolic(value: Any, exprs: bool = True) -> Any:
    constant = value.node.maybe_as_int() if isinstance(value, torch.SymInt) else None
    if constant is not None:
        return ("int", constant)
    return ("symbolic", type(value).__name__, str(value.node.expr) if exprs else Expr(value.node.expr))


def snapshot(
    frames: list[types.FrameType], skip: frozenset[str] = frozenset(), exprs: bool = True, nodes: Any = None
) -> State:
    """Fingerprint what ``frames`` reach: every local, its module's globals, and the
    attributes and contents of the objects and containers they hold.  A tensor counts as a
    tensor whatever it holds (the graph compares tensors); a function as its code and what
    its closure holds; a class or module, or an object of the standard library's, as
    itself.  An object reached twice has one fingerprint, whichever way it was reached.
    ``skip``: locals of the loop's frame left out (carried values, which the caller
    compares).  ``exprs=False``: a symbolic number counts as one of its kind, not by its
    expression (for comparing two runs, whose symbols are their own).  ``nodes``: a function
    giving the graph node of a tensor; each tensor then counts with it (``Ref``), for a
    comparison of two runs that pairs them (``refs``)."""
    walk = _Walk(exprs, nodes)
    state: State = {}
    modules: set[int] = set()
    for k, frame in enumerate(frames):
        for name, value in _locals(frame).items():
            if not (k == 0 and name in skip):
                state[(k, name)] = walk(value, 0)
        if id(frame.f_globals) not in modules:  # a module's globals, once for its frames
            modules.add(id(frame.f_globals))
            for name, value in list(frame.f_globals.items()):
                if not name.startswith("__"):
                    state[(k, f"<global {name}>")] = walk(value, 0)
    return state


class _Walk:
    """Fingerprints of values, each object's computed once per snapshot."""

    def __init__(self, exprs: bool = True, nodes: Any = None) -> None:
        self.memo: dict[int, Any] = {}
        self.keep: list[Any] = []  # alive until the walk ends, so no id is reused within it
        self.count = 0
        self.exprs = exprs
        self.nodes = nodes

    def __call__(self, value: Any, depth: int) -> Any:
        cls = type(value)
        how, slots = _HOW.get(cls) or _how_of(cls)
        if how is _How.TENSOR:
            return _TENSOR if self.nodes is None else ("tensor", Ref(self.nodes(value)))
        if how is _How.PLAIN:
            return _plain(value)
        if how is _How.SYMBOLIC:
            return _symbolic(value, self.exprs)
        if how is _How.SYMPY:
            return ("sympy", str(value) if self.exprs else type(value).__name__)
        if how is _How.FUNCTION:  # made anew on each run where forward defines it: its code and closure
            if depth > MAX_DEPTH:
                return ("past the limit",)
            cells = tuple(self(c, depth + 1) for c in (value.__closure__ or ()))
            return ("function", id(value.__code__), cells, self(value.__defaults__, depth + 1))
        if how is _How.IDENTITY:
            return ("identity", id(value))
        known = self.memo.get(id(value))
        if known is not None:
            return known
        self.count += 1
        if self.count > MAX_OBJECTS or depth > MAX_DEPTH:
            return ("past the limit",)
        self.memo[id(value)] = ("cycle",)  # reached again while its own children are walked
        self.keep.append(value)
        kind, children = _object(value, cls, how, slots)
        found = (kind, tuple((step, self(child, depth + 1)) for step, child in children))
        self.memo[id(value)] = found
        return found


MAX_DEPTH = 100
"""How deep one snapshot follows attributes and items."""


def _object(value: Any, cls: type, how: _How, slots: tuple[str, ...]) -> tuple[Any, list[tuple[str, Any]]]:
    """The fingerprint of a container or object (``("object", type name, ...)``) and its
    children as ``(step, value)``."""
    kind = ("object", cls.__qualname__)
    if how is _How.SEQUENCE:
        return (*kind, len(value)), [(f"[{i}]", v) for i, v in enumerate(value)]
    if how is _How.MAPPING:
        return (*kind, len(value)), [(f"[{_key(key)}]", v) for key, v in list(value.items())]
    if how is _How.SET:
        items = sorted(repr(_plain(v)) if isinstance(v, _PLAIN) else f"#{id(v)}" for v in value)
        return (*kind, tuple(items)), []
    if how is _How.GENERATOR:
        frame = value.gi_frame
        mine = frame is not None and not is_library_frame(os.path.abspath(frame.f_code.co_filename))
        return (*kind, frame.f_lasti if frame is not None else -1), (
            [(f"<{name}>", v) for name, v in frame.f_locals.items()] if mine else []  # a library's: where it stands
        )
    if how is _How.CELL:
        try:
            return kind, [("<cell>", value.cell_contents)]
        except ValueError:
            return (*kind, "empty"), []
    if how is _How.ITERATOR:
        try:
            reduced = value.__reduce__()
        except Exception:  # noqa: BLE001 - an iterator that does not say
            return ("identity", id(value)), []
        return (*kind, repr(reduced[2:]) if len(reduced) > 2 else None), []
    attributes = getattr(value, "__dict__", None)
    children = [(f".{name}", v) for name, v in list(attributes.items())] if isinstance(attributes, dict) else []
    for name in slots:
        if hasattr(value, name):
            children.append((f".{name}", getattr(value, name)))
    if children or attributes is not None:
        return kind, children
    return ("identity", id(value)), []


_STANDARD: dict[type, bool] = {}
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep


def _standard(cls: type) -> bool:
    """Whether ``cls`` is the standard library's (``logging.Logger``, ``threading.Lock``)."""
    known = _STANDARD.get(cls)
    if known is None:
        module = sys.modules.get(getattr(cls, "__module__", "") or "")
        path = getattr(module, "__file__", None)
        known = _STANDARD[cls] = bool(path) and os.path.abspath(path).startswith(_STDLIB) and "site-packages" not in path
    return known


def _slots(cls: type) -> list[str]:
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else [s for s in slots if s not in ("__dict__", "__weakref__")])
    return names


def _key(key: Any) -> str:
    return repr(key) if isinstance(key, _PLAIN) else f"#{id(key)}"


def _locals(frame: types.FrameType) -> dict[str, Any]:
    return dict(frame.f_locals)


# -- changes


@attrs.frozen
class Change:
    """One path whose fingerprint differs between the snapshots of a loop's steps."""

    path: tuple
    before: Any
    """Its fingerprint before the loop (``MISSING`` where it did not exist)."""
    after: tuple
    """Its fingerprint after each step."""

    @property
    def local(self) -> str | None:
        """The loop frame's local this change rebinds (None: something else changed)."""
        name = self.path[1]
        return name if len(self.path) == 2 and self.path[0] == 0 and not name.startswith("<global ") else None

    @property
    def name(self) -> str:
        """The variable the path starts from (a local's or a global's name)."""
        name = self.path[1]
        return name[len("<global ") : -1] if name.startswith("<global ") else name

    def named(self, frames: list[types.FrameType]) -> str:
        """The path in Python's words: `` `count` ``, `` `self.steps` ``, `` `seen[0]` ``,
        ``the global `COUNT` ``, `` `out` (in forward) ``."""
        frame, name, *steps = self.path
        text = f"`{self.name}{''.join(steps)}`"
        if name.startswith("<global "):
            return "the global " + text
        if frame and frame < len(frames):
            text += f" (in {frames[frame].f_code.co_name})"
        return text


def changes(states: list[State]) -> list[Change]:
    """Where the fingerprints in ``states`` (before a loop, then after each of its steps) are
    not all the same, outermost first: a local rebound, or the first attribute or item that
    differs inside what a local holds (a list that grew is named, not each of its items)."""
    found: list[Change] = []
    for key in dict.fromkeys(k for s in states for k in s):
        _differ(key, [s.get(key, MISSING) for s in states], found)
    return found


def _differ(path: tuple, values: list[Any], found: list[Change]) -> None:
    if all(v == values[0] for v in values[1:]):
        return
    tops = [_top(v) for v in values]
    if any(t != tops[0] for t in tops[1:]):
        found.append(Change(path, tops[0], tuple(tops[1:])))
        return
    children = [dict(v[1]) for v in values]
    for step in dict.fromkeys(s for c in children for s in c):
        _differ((*path, step), [c.get(step, MISSING) for c in children], found)


def _top(fingerprint: Any) -> Any:
    """A fingerprint without its children's: what it is, not what it holds."""
    return fingerprint[0] if isinstance(fingerprint[0], tuple) else fingerprint


# -- writing the loop's frame


def set_local(frame: types.FrameType, name: str, value: Any) -> None:
    """Bind ``name`` in ``frame`` (a running frame that called into exporter) to ``value``."""
    if sys.version_info >= (3, 13):  # PEP 667: f_locals writes through
        frame.f_locals[name] = value
        return
    import ctypes

    frame.f_locals[name] = value
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


def unbind_local(frame: types.FrameType, name: str) -> bool:
    """Unbind ``name`` in ``frame``, so that reading it raises ``UnboundLocalError``
    (``NameError`` for a variable a closure shares); False where Python cannot."""
    if sys.version_info >= (3, 13):  # PEP 667's proxy deletes no local
        return False
    import ctypes

    values = frame.f_locals
    values.pop(name, None)
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(1))
    return True


# -- naming lines


def assigned_at(frame: types.FrameType, loop_line: int, name: str) -> int | None:
    """The line inside the ``for`` statement at ``loop_line`` of ``frame``'s function that
    first writes ``name`` (assigns it, or calls a method on it, for a path's first name)."""
    for node in _loop_body(frame, loop_line):
        for child in ast.walk(node):
            if _writes(child, name):
                return child.lineno
    return None


def _loop_body(frame: types.FrameType, loop_line: int) -> Iterator[ast.AST]:
    try:
        lines, start = inspect.getsourcelines(frame.f_code)
    except (OSError, TypeError):
        return iter(())
    try:
        tree = ast.parse(_dedent("".join(lines)))
    except SyntaxError:
        return iter(())
    offset = start - 1 if start > 0 else 0
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and node.lineno + offset == loop_line:
            for child in ast.walk(node):
                if hasattr(child, "lineno"):
                    child.lineno += offset
            return iter(node.body)
    return iter(())


def _dedent(source: str) -> str:
    import textwrap

    return textwrap.dedent(source)


def _writes(node: ast.AST, name: str) -> bool:
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        targets = [node.func.value]
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Name) and part.id == name:
                return True
            if isinstance(part, ast.Attribute) and part.attr == name:
                return True
    return False


def line_text(path: str, line: int) -> str | None:
    return linecache.getline(path, line).strip() or None


def tensors_held(frames: list[types.FrameType]) -> dict[tuple[int, str, str | None], int]:
    """Where the locals of ``frames`` hold tensors, and which: (frame, local, attribute) ->
    the tensor's id, for each local and each attribute of a local's ``__dict__`` (a module's
    plain tensors).  A loop whose steps rebind one to a tensor that existed before it changes
    what forward reads after the loop, and no graph shows it (``loops.DataLoop``)."""
    found: dict[tuple[int, str, str | None], int] = {}
    for k, frame in enumerate(frames):
        for name, value in frame.f_locals.items():
            if isinstance(value, torch.Tensor):
                found[(k, name, None)] = id(value)
            attributes = getattr(value, "__dict__", None)
            if isinstance(attributes, dict) and not isinstance(value, type):
                for attribute, held in list(attributes.items()):
                    if isinstance(held, torch.Tensor):
                        found[(k, name, attribute)] = id(held)
    return found

