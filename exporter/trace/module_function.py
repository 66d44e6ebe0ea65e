"""The flat function a trace records: ``(state..., user leaves...) -> (updates..., outputs...)``.

It runs the user's module with the fake parameters, buffers and inputs swapped in, and
returns what the program returns.  There are three, one per kind of trace (``plain``,
``functional``, ``training``); each also notes in a ``Recorded`` what the trace must know
afterwards (the output structure, which inputs changed, which buffers were reassigned)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from .._errors import Category, TraceError
from .._ir import node_frame
from .._notes import Note, NoteKind
from .._torch_internals import (
    EXPORT_ROOT,
    FakeTensor,
    FunctionalTensor,
    effect_tokens,
    free_unbacked_symbols,
    functional_mode,
    functional_state,
    guard_or_false,
    own_buffers,
    reparametrize_module,
    unwrap_functional,
)
from ..inputs.bind import BoundInputs, dispatches_like_a_tensor
from ..inputs.containers import describe_class, holds_tensors, leaves_with_paths, register_containers_in
from .active import traced_graph, traced_node
from .patches import buffer_writes
from .state_inputs import StateInputs
from .write_watch import NeedsFunctionalization

__all__ = ["ROOT_ATTR", "Holder", "ModuleRun", "Recorded", "functional_fn", "plain_fn", "training_fn"]


@attrs.define
class Recorded:
    """What the traced function learns while it runs, read back after make_fx returns."""

    out_spec: pytree.TreeSpec | None = None
    mutated: list[int] = attrs.field(factory=list)
    """Flat input indices (state first, then user leaves) whose data changed, in input order."""
    buffer_writes: dict[int, torch.fx.Node] = attrs.field(factory=dict)
    """Training IR: state input index -> the node of the value forward() assigned to it last."""
    replaced: list[Note] = attrs.field(factory=list)
    """Buffers forward() replaced with a tensor of another shape or dtype: the program computes
    the new value where forward uses it but keeps the buffer as it was (not written back)."""


def _from_functional(value: Any) -> Any:
    return unwrap_functional(value) if isinstance(value, FunctionalTensor) else value


def _layout_changed(functional: FunctionalTensor, original: torch.Tensor, storage_changed: bool, metadata_mutated: bool) -> bool:
    """Whether an input was resized, restrided or given new storage in place."""
    if storage_changed:
        return True
    if not metadata_mutated:
        return False
    after = unwrap_functional(functional)
    return (after.shape, after.stride(), after.storage_offset()) != (
        original.shape,
        original.stride(),
        original.storage_offset(),
    )


ROOT_ATTR = EXPORT_ROOT


class Holder(torch.nn.Module):
    """Holds the user's module so every module access during tracing goes through an
    attribute lookup the module-stack tracer can follow; a module reachable under two
    names (``self.encoder`` is ``self.decoder``) is then recorded under the name used."""

    def __init__(self, root: torch.nn.Module) -> None:
        super().__init__()
        setattr(self, ROOT_ATTR, root)


@attrs.frozen
class ModuleRun:
    """Runs the user's module on flat inputs, the state ones swapped into it (tied weights
    kept tied), and returns its output and the state it holds afterwards, by name."""

    root: torch.nn.Module
    state_inputs: StateInputs
    bound: BoundInputs
    holder: Holder
    """The module make_fx's module stack starts from: every access to ``root`` goes through it."""

    @property
    def state_names(self) -> list[str]:
        return self.state_inputs.names

    def __call__(self, inputs: list[Any], on_buffer_write: Callable | None = None) -> tuple[Any, dict[str, Any]]:
        n_state = len(self.state_names)
        state = dict(zip(self.state_names, inputs[:n_state]))
        swapped = self.state_inputs.module_state(state)
        rebuilt = {sub.name: swapped[sub.name] for sub in self.state_inputs.subclasses}
        args, kwargs = pytree.tree_unflatten(inputs[n_state:], self.bound.in_spec)
        with reparametrize_module(self.root, swapped, tie_weights=True, strict=True, stack_weights=True):
            with buffer_writes(on_buffer_write) if on_buffer_write else contextlib.nullcontext():
                out = getattr(self.holder, ROOT_ATTR)(*args, **kwargs)
        # On exit the context writes the module's final tensors back into `swapped`, so a
        # buffer reassigned in forward (self.buf = new) shows up there as a new object.
        for name, tensor in rebuilt.items():
            if swapped[name] is not tensor:
                raise TraceError(
                    f"forward() replaced {name!r}, a tensor-subclass parameter or buffer, which a "
                    "program holds as its inner tensors",
                    category=Category.UNSUPPORTED_MUTATION,
                    hint="update it in place, or keep a plain tensor there",
                )
        return out, {name: swapped.get(name, value) for name, value in state.items()}


def plain_fn(run: ModuleRun, recorded: Recorded) -> Callable[..., tuple]:
    """The unfunctionalized first try: outputs only; a reassigned buffer ends it
    (``NeedsFunctionalization``), as does a write the ``WriteWatch`` cannot record."""

    def traced(*flat_inputs):
        inputs = list(flat_inputs)
        out, state = run(inputs)
        if any(state[name] is not inputs[i] for i, name in enumerate(run.state_names)):
            raise NeedsFunctionalization("a buffer was reassigned")
        flat_out, recorded.out_spec = _flatten_outputs(out)
        return tuple(flat_out)

    return traced


def functional_fn(run: ModuleRun, recorded: Recorded, labels: list[str]) -> Callable[..., tuple]:
    """The functionalized trace: every input whose data changed (written in place, or a
    buffer reassigned) is returned ahead of the outputs, its index in ``recorded.mutated``."""

    def traced(*flat_inputs):
        mode = functional_mode()
        with mode:
            # One functional wrapper per distinct tensor, so tied weights stay tied.
            wrappers: dict[int, Any] = {}
            functional = []
            for x in flat_inputs:
                if isinstance(x, torch.Tensor):
                    if id(x) not in wrappers:
                        wrappers[id(x)] = FunctionalTensor.to_functional(x)
                    x = wrappers[id(x)]
                functional.append(x)
            out, state = run(functional)
        if effect_tokens(mode):
            raise _side_effect_error()
        flat_out, recorded.out_spec = _flatten_outputs(out)

        for i, name in enumerate(run.state_names):
            if state[name] is not functional[i]:
                new, old = state[name], functional[i]
                if not isinstance(new, FunctionalTensor):
                    _replacement_error(labels[i], old, new)
                if _keeps_layout(old, new):
                    functional[i] = new
                    recorded.mutated.append(i)
                else:
                    recorded.replaced.append(_replaced(labels[i], i, old, _from_functional(new)))

        updates = []
        for i, (value, original) in enumerate(zip(functional, flat_inputs)):
            if not isinstance(value, FunctionalTensor):
                continue
            if i in recorded.mutated:
                updates.append((i, _from_functional(value)))
                continue
            storage_changed, metadata_mutated, data_mutated = functional_state(value)
            if _layout_changed(value, original, storage_changed, metadata_mutated):
                _layout_change_error(labels[i], value)
            if data_mutated:
                updates.append((i, _from_functional(value)))
        updates.sort(key=lambda item: item[0])
        recorded.mutated = [i for i, _ in updates]
        return (*[v for _, v in updates], *[_from_functional(v) for v in flat_out])

    return traced


def training_fn(run: ModuleRun, recorded: Recorded, labels: list[str]) -> Callable[..., tuple]:
    """The training IR's trace: writes stay in place; a buffer assigned in forward is noted in
    ``recorded.buffer_writes`` with the node of its last value, to be written back with
    ``copy_`` after the trace, as torch.export does (for the root module's own buffers on
    every assignment, even ``self.buf += x``; for the others when the tensor changed)."""
    root_buffers = {name: i for i, name in enumerate(run.state_names) if name in own_buffers(run.root)}

    def on_buffer_write(module: torch.nn.Module, name: str, value: Any) -> None:
        if module is run.root and name in root_buffers and isinstance(value, torch.Tensor):
            node = traced_node(value)
            if node is not None:
                recorded.buffer_writes[root_buffers[name]] = node

    def traced(*flat_inputs):
        inputs = list(flat_inputs)
        out, state = run(inputs, on_buffer_write)
        flat_out, recorded.out_spec = _flatten_outputs(out)
        for i, name in enumerate(run.state_names):
            new, old = state[name], inputs[i]
            if new is not old:
                if not isinstance(new, torch.Tensor):
                    _replacement_error(labels[i], old, new)
                if not _keeps_layout(old, new):
                    recorded.replaced.append(_replaced(labels[i], i, old, new))
                    recorded.buffer_writes.pop(i, None)
                    continue
                node = traced_node(new)
                if node is not None and i not in recorded.buffer_writes:
                    recorded.buffer_writes[i] = node
        return tuple(flat_out)

    return traced


def _layout_change_error(label: str, value: FunctionalTensor) -> None:
    # The node that made the input's current value: the view op that replays an in-place
    # one (unsqueeze for unsqueeze_), on the user's line.
    frame = node_frame(traced_node(unwrap_functional(value)))
    raise TraceError(
        f"forward() changed the shape, strides or storage of {label} in place "
        f"({f'`{frame.line}`' if frame and frame.line else 'resize_, set_, transpose_, ...'}), "
        "which an exported program cannot express",
        category=Category.UNSUPPORTED_MUTATION,
        location=_where(frame),
        hint="use the out-of-place op (x = x.unsqueeze(0) for x.unsqueeze_(0)) instead",
    )


def _keeps_layout(old: torch.Tensor, new: torch.Tensor) -> bool:
    """Whether a tensor assigned to a buffer has the buffer's shape and dtype, so the program
    can update the buffer with it."""
    if new.dtype != old.dtype or new.dim() != old.dim():
        return False
    # A size only the data decides is not asked about (it would be a branch of its own): a
    # buffer it may differ from is replaced, not written back.
    return all(guard_or_false(x == y) for x, y in zip(new.shape, old.shape))


def _replaced(label: str, index: int, old: torch.Tensor, new: torch.Tensor) -> Note:
    """A buffer replaced with another shape or dtype, as torch.export leaves it: computed where
    forward uses it, not written back.  Refused where the new value is made from the buffer's
    own (a state that grows: the program would lose it between calls)."""
    node = traced_node(new)
    placeholders = [n for n in node.graph.nodes if n.op == "placeholder"] if node is not None else []
    if node is not None and index < len(placeholders) and _reaches(node, placeholders[index]):
        _replacement_error(label, old, new)
    layout = _layout(new)
    message = (
        f"forward() replaced {label} {_layout(old)} with {layout}"
        + (" (? is a size only the data decides)" if "?" in layout else "")
        + "; the program computes the new value "
        "where forward uses it but does not write it back: the buffer keeps its shape and value, and each "
        "call computes the new value again"
    )
    return Note(NoteKind.BUFFER_NOT_WRITTEN_BACK, message, _where(node_frame(node)))


def _reaches(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    """Whether ``source`` is among the inputs ``node`` was computed from."""
    seen, stack = set(), [node]
    while stack:
        current = stack.pop()
        if current is source:
            return True
        if current in seen:
            continue
        seen.add(current)
        stack.extend(current.all_input_nodes)
    return False


def _layout(value: torch.Tensor) -> str:
    """``(1, ?, 32) float32``: a size only the data decides is ``?``, not the name one trace gave it."""
    sizes = ["?" if isinstance(size, torch.SymInt) and free_unbacked_symbols(size) else str(size) for size in value.shape]
    return f"({', '.join(sizes)}{',' if len(sizes) == 1 else ''}) {str(value.dtype).removeprefix('torch.')}"


def _replacement_error(label: str, old: torch.Tensor, new: Any) -> None:
    found = f"{tuple(new.shape)} {new.dtype}" if isinstance(new, torch.Tensor) else type(new).__name__
    frame = node_frame(traced_node(_from_functional(new))) if isinstance(new, torch.Tensor) else None
    grows = isinstance(new, torch.Tensor) and not _keeps_layout(old, new)
    raise TraceError(
        f"forward() replaced {label} ({tuple(old.shape)} {old.dtype}) with {found}"
        + (" computed from the buffer itself" if grows else "")
        + "; an exported program can only update a buffer in place",
        category=Category.UNSUPPORTED_MUTATION,
        location=_where(frame),
        hint=_replaced_buffer_hint(old, new),
    )


def _where(frame) -> str | None:
    return f"{frame.filename}:{frame.lineno}" if frame else None


def _replaced_buffer_hint(old: torch.Tensor, new: Any) -> str:
    if isinstance(new, torch.Tensor) and new.shape != old.shape:
        return (
            "a program keeps each buffer's shape: allocate the buffer at its largest shape and "
            "write into a slice (self.buf[:, start:end] = new), or pass the cache in as an input "
            "and return it (exporter takes KV cache objects as inputs and outputs)"
        )
    if isinstance(new, torch.Tensor) and new.dtype != old.dtype:
        return "keep the buffer's dtype (self.buf = new.to(self.buf.dtype))"
    return "assign a tensor of the buffer's shape and dtype computed in forward(), or register a separate buffer"


def _side_effect_error() -> TraceError:
    """The error for a side-effectful op (``aten._print``, an effectful custom op), naming the
    op and the user's line that called it; functionalization recorded it as ``with_effects``."""
    graph = traced_graph()
    calls = [
        node
        for node in (graph.nodes if graph is not None else ())
        if node.op == "call_function" and node.target is torch.ops.higher_order.with_effects
    ]
    ops = list(dict.fromkeys(str(node.args[1]) for node in calls))
    frame = node_frame(calls[0]) if calls else None
    code = f" (`{frame.line}`)" if frame and frame.line else ""
    return TraceError(
        f"forward() calls a side-effectful operator ({', '.join(ops) or 'unknown'}){code}, which "
        "exporter cannot keep in order in a program (torch.export threads effect tokens through it)",
        category=Category.UNSUPPORTED_OPERATOR,
        location=_where(frame),
        hint="move the call out of forward() (print or log around the exported model), or export "
        "with torch.export, which supports side-effectful operators",
    )


_TRACED_TENSORS = (FakeTensor, FunctionalTensor)
"""The tensor subclasses a trace itself makes its values of."""

_OUTPUT_LEAF_TYPES = (
    torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool,
    int, float, bool, str, type(None), torch.dtype, torch.device,
)


def _flatten_outputs(out: Any) -> tuple[list[Any], pytree.TreeSpec]:
    """forward()'s return value as leaves; container objects (KV caches) are opened up."""
    register_containers_in(out)
    with_paths, spec = leaves_with_paths(out)
    for path, leaf in with_paths:
        where = f"output{pytree.keystr(path)}" if path else "the output"
        if isinstance(leaf, torch.Tensor) and type(leaf) not in _TRACED_TENSORS and not dispatches_like_a_tensor(leaf):
            # Its inner tensors were traced, the wrapper was not: kept as a leaf, the program
            # would return a constant holding the trace's fake tensors.
            names = leaf.__tensor_flatten__()[0] if hasattr(leaf, "__tensor_flatten__") else ()
            inner = f" (out.{', out.'.join(names)})" if names else ""
            raise TraceError(
                f"forward() returns a tensor subclass {type(leaf).__qualname__} at {where}, which a "
                "program cannot return: it holds plain tensors",
                category=Category.UNSUPPORTED_TENSOR_SUBCLASS,
                hint=f"return the plain tensors it holds{inner} and build the {type(leaf).__qualname__} "
                "from the program's outputs",
            )
        if not isinstance(leaf, _OUTPUT_LEAF_TYPES):
            raise TraceError(
                f"forward() returns a {describe_class(type(leaf))} at {where}, which is not a pytree "
                "container: a program's outputs are tensors, numbers and containers of them",
                hint=_registration_hint(leaf),
            )
    return [leaf for _, leaf in with_paths], spec


def _registration_hint(leaf: Any) -> str:
    cls = type(leaf)
    if holds_tensors(vars(leaf) if hasattr(leaf, "__dict__") else ()):
        return f"register the class before exporting: exporter.register_container({describe_class(cls)})"
    return "return its tensors or values instead of the object"
