"""Which submodules of a model that fails to export export on their own: where the problem is.

    report = exporter.report_submodules(model, (x,), {"mask": mask})
    report.frontier           # [SubmoduleNode('encoder.layer.1.attention.gate', ...)]

The model runs eagerly once, with a forward pre-hook on every submodule recording the
inputs of its first call.  Then the tree is walked top-down: the root is exported; if it
fails, each child is exported on the inputs it was called with, failing children are
descended into, and the walk stops below a module that exports (so does all it contains).
The *frontier* is the failing modules with no failing module below them: the code that
does not export is in their own ``forward``.  Submodules are exported with static shapes.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from ._errors import ErrorInfo, InputSpecError
from ._pipeline import export
from .trace.explain import user_location
from .trace.preserve import module_preserved, state_values_restored

__all__ = ["ModuleStatus", "SubmoduleNode", "SubmoduleReport", "report_submodules"]

log = logging.getLogger(__name__)

ExportFn = Callable[[torch.nn.Module, tuple[Any, ...], dict[str, Any]], Any]


class ModuleStatus(enum.Enum):
    """What happened to one module of the tree; the value is the text JSON carries."""

    OK = "ok"
    """Exports on its own, and so does everything in it (not descended into)."""
    FAILED = "failed"
    """Fails to export on its own; its children were tried."""
    NOT_CALLED = "not called"
    """Not called in the eager run (a container such as ``ModuleList``, or unused)."""
    SKIPPED = "skipped"
    """Below ``max_depth``: not tried."""


@attrs.define
class SubmoduleNode:
    """One module of the tree and what exporting it on its own gave."""

    name: str
    """Qualified name in the model (``encoder.layer.0.attention``); ``""`` for the model itself."""
    class_name: str
    """The module's class (``BertAttention``)."""
    status: ModuleStatus
    """What exporting it on its own gave."""
    calls: int = 0
    """Times it was called in the eager run; it was exported on the inputs of the first."""
    error: ErrorInfo | None = None
    """Why its export failed (None unless ``FAILED``)."""
    seconds: float | None = None
    """Time its export took (None when it was not tried)."""
    frontier: bool = False
    """Failed, with nothing failing below it: the problem is here."""
    children: list[SubmoduleNode] = attrs.field(factory=list)
    """Its submodules, when it failed and was descended into."""

    def walk(self) -> Iterator[SubmoduleNode]:
        """This node, then its descendants, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def to_json(self) -> dict[str, Any]:
        """The node and its children as the JSON report writes them (the error's headline only)."""
        error = None
        if self.error is not None:
            error = {**self.error.to_json(), "message": self.error.headline}
        return {
            "name": self.name,
            "class": self.class_name,
            "status": self.status.value,
            "calls": self.calls,
            "seconds": None if self.seconds is None else round(self.seconds, 6),
            "frontier": self.frontier,
            "error": error,
            "children": [c.to_json() for c in self.children],
        }


@attrs.define
class SubmoduleReport:
    """The tree of modules tried, from the model down to where exporting starts to work."""

    root: SubmoduleNode
    """The model's own node; its children are the submodules tried."""
    seconds: float
    """The eager run and every export tried."""

    @property
    def frontier(self) -> list[SubmoduleNode]:
        """The failing modules with no failing module below them, in tree order."""
        return [n for n in self.root.walk() if n.frontier]

    def find(self, name: str) -> SubmoduleNode:
        """The node of the module named ``name`` (KeyError if it is not in the tree)."""
        for node in self.root.walk():
            if node.name == name:
                return node
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        """The report as ``--report-submodules --json`` writes it."""
        return {
            "seconds": round(self.seconds, 6),
            "frontier": [n.name for n in self.frontier],
            "root": self.root.to_json(),
        }


@attrs.define
class _Call:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    count: int = 1


def _detached(tree: Any) -> Any:
    # Copies, so what later layers do in place to a shared tensor does not change these inputs.
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), tree)


def _record_calls(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, _Call]:
    """Run ``model`` once without grad; per module (by id), the inputs of its first call."""
    calls: dict[int, _Call] = {}

    def record(module: torch.nn.Module, call_args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> None:
        seen = calls.get(id(module))
        if seen is not None:
            seen.count += 1
        else:
            calls[id(module)] = _Call(*_detached((call_args, call_kwargs)))

    # Prepended, so the inputs are the caller's, before any hook of the model's own changes them;
    # exporting the module runs those hooks again.
    handles = [m.register_forward_pre_hook(record, with_kwargs=True, prepend=True) for m in model.modules()]
    args, kwargs = _detached((args, kwargs))  # forward may write to its inputs; not to the caller's
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    except Exception as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise InputSpecError(
            "the model fails on these inputs when run eagerly, so the inputs of its submodules "
            f"cannot be recorded: {type(e).__name__}: {detail}",
            location=user_location(e),
            hint="check the example inputs' number, shapes and dtypes against what forward() expects",
        ) from e
    finally:
        for handle in handles:
            handle.remove()
    return calls


@attrs.define
class _Walk:
    calls: dict[int, _Call]
    export_fn: ExportFn
    max_depth: int | None
    seen: set[int] = attrs.field(factory=set)

    def tried(self, module: torch.nn.Module, name: str, depth: int, call: _Call, error: ErrorInfo | None) -> SubmoduleNode:
        """Export ``module`` (unless its ``error`` is known); below a failure, its children."""
        node = SubmoduleNode(name, type(module).__name__, ModuleStatus.OK, calls=call.count, error=error)
        if error is None:
            start = time.perf_counter()
            try:
                self.export_fn(module, call.args, call.kwargs)
            except Exception as e:  # noqa: BLE001 - the failure is the answer
                node.error = ErrorInfo.from_exception(e)
            node.seconds = time.perf_counter() - start
        log.debug("%s (%s): %s", name or "<model>", node.class_name, "fails" if node.error else "exports")
        if node.error is not None:
            node.status = ModuleStatus.FAILED
            node.children = self.children(module, name, depth)
        return node

    def children(self, module: torch.nn.Module, name: str, depth: int) -> list[SubmoduleNode]:
        nodes = []
        for child_name, child in module.named_children():
            if id(child) in self.seen:
                continue  # a shared module, listed where it was met first
            self.seen.add(id(child))
            nodes.append(self.child(child, f"{name}.{child_name}" if name else child_name, depth + 1))
        return nodes

    def child(self, module: torch.nn.Module, name: str, depth: int) -> SubmoduleNode:
        class_name = type(module).__name__
        call = self.calls.get(id(module))
        if self.max_depth is not None and depth > self.max_depth:
            return SubmoduleNode(name, class_name, ModuleStatus.SKIPPED, calls=0 if call is None else call.count)
        if call is not None:
            return self.tried(module, name, depth, call, None)
        node = SubmoduleNode(name, class_name, ModuleStatus.NOT_CALLED)
        # A container (ModuleList, ModuleDict) is not called, but what it holds may be.
        if any(id(m) in self.calls for m in module.modules()):
            node.children = self.children(module, name, depth)
        return node


def _mark_frontier(node: SubmoduleNode) -> bool:
    """Mark the failed nodes with no failure below them; whether ``node``'s subtree has a failure."""
    failing_below = False
    for child in node.children:
        failing_below |= _mark_frontier(child)
    node.frontier = node.status is ModuleStatus.FAILED and not failing_below
    return failing_below or node.status is ModuleStatus.FAILED


def report_submodules(
    model: torch.nn.Module,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    max_depth: int | None = None,
    export_fn: ExportFn | None = None,
    root_error: ErrorInfo | None = None,
) -> SubmoduleReport:
    """Export ``model``, and below each module that fails each of its children on its own.

    The model runs eagerly once (without grad, in its current train/eval mode) to record the
    inputs each submodule is first called with; each is exported on those (static shapes;
    non-tensor inputs become constants, as in ``export``). A module that exports is not
    descended into. A module never called is ``not called``; one deeper than ``max_depth`` is
    ``skipped``; a module reachable under two names is listed once. The model is left as it
    was: hooks removed, attributes, training flags, parameters and buffers (BatchNorm
    statistics the eager run updated) restored, also on failure.

    Args:
        model: the model whose export fails (or may fail).
        args: its positional example inputs.
        kwargs: its keyword example inputs.
        max_depth: how deep to descend (the model is depth 0); None for no limit.
        export_fn: how to export a module: ``export_fn(module, args, kwargs)``, by default
            ``exporter.export``.
        root_error: the model's own failure when it is already known (with a
            ``dynamic_shapes`` spec, say); the model is then not exported again.

    Returns:
        The tree of modules, each with its status (``ok``, ``failed``, ``not called``,
        ``skipped``) and error; ``frontier`` lists the failing modules whose children all
        export, where the problem lies.

    Raises:
        InputSpecError: the model fails in the eager run: the inputs do not fit it.

    Examples:
        >>> import torch, exporter
        >>> class Gate(torch.nn.Module):
        ...     def forward(self, x):
        ...         for _ in range(x.gt(0).sum()):
        ...             x = x * 0.5
        ...         return x
        >>> model = torch.nn.Sequential(torch.nn.Linear(8, 8), Gate()).eval()
        >>> report = exporter.report_submodules(model, (torch.randn(2, 8),))
        >>> report.root.status, [(node.name, node.error.category.value) for node in report.frontier]
        (<ModuleStatus.FAILED: 'failed'>, [('1', 'data-dependent control flow')])
    """
    kwargs = {} if kwargs is None else kwargs
    start = time.perf_counter()
    # Restored after the eager run, so the exports see the model as it was given; and again
    # after the exports, in case ``export_fn`` is not as careful as ``export``.
    with module_preserved(model), state_values_restored(model):
        calls = _record_calls(model, args, kwargs)
    with module_preserved(model), state_values_restored(model):
        walk = _Walk(calls, export if export_fn is None else export_fn, max_depth)
        walk.seen.add(id(model))
        root = walk.tried(model, "", 0, _Call(args, kwargs, calls[id(model)].count), root_error)
    _mark_frontier(root)
    return SubmoduleReport(root, time.perf_counter() - start)
