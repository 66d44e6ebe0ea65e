"""Run the real module under fake tensors and record functional, post-autograd ATen.

One trace does it all (two when a first, unfunctionalized try meets a write it cannot record
out of place; see ``trace``):

* one ``FakeTensorMode`` (with a ``ShapeEnv``) makes fake parameters, buffers and inputs;
* the module's parameters and buffers are swapped for the fakes by a reparametrization
  context that keeps tied weights tied, then swapped back;
* ``make_fx`` (below autograd, recording the module stack) sees every ATen op through a
  ``FunctionalTensorMode``, so in-place and out= ops come out functional and views stay views;
* after forward returns, each input is synced: a parameter, buffer or user input whose
  data changed becomes an extra graph output, ahead of the user outputs.

The result is an ``ExportState`` whose graph still has make_fx's placeholder names and
``_tensor_constant`` attributes; the passes turn it into export IR.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from .._dims import DynamicPlan
from .._errors import Category, ExportError, TraceError
from .._ir import graph_modules, node_frame
from .._state import ExportState
from .._torch_internals import (
    own_buffers,
    schema_of,
    FakeTensorMode,
    FunctionalTensor,
    OpOverload,
    TracingContext,
    effect_tokens,
    functional_mode,
    functional_state,
    has_effects,
    record_module_calls,
    rename_node,
    reparametrize_module,
    tracing,
    unwrap_functional,
)
from ..inputs.bind import BoundInputs
from ..inputs.containers import describe_class, holds_tensors, register_containers_in
from .draft import (
    data_dependent_assumptions,
    missing_fake_kernel_assumptions,
    record_assumption_sites,
)
from .explain import explain
from .active import traced_graph, traced_node
from .fast import FastPaths
from .patches import buffer_writes, tracing_patches
from .preserve import module_preserved
from .signature import constant_attribute_fqns, input_specs, output_specs
from .stacks import on_roomy_stack
from .state_inputs import StateInputs, collect_state, real_writes_undone
from .symbols import FakeInputs, fake_inputs, new_fake_mode

__all__ = ["trace"]

log = logging.getLogger(__name__)


@attrs.define
class _Recorded:
    """What the traced function learns while it runs, read back after make_fx returns."""

    out_spec: pytree.TreeSpec | None = None
    mutated: list[int] = attrs.field(factory=list)
    """Flat input indices (state first, then user leaves) whose data changed, in input order."""
    buffer_writes: dict[int, torch.fx.Node] = attrs.field(factory=dict)
    """Training IR: state input index -> the node of the value forward() assigned to it last."""


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


_ROOT_ATTR = "_export_root"


class _Holder(torch.nn.Module):
    """Holds the user's module so every module access during tracing goes through an
    attribute lookup the module-stack tracer can follow; a module reachable under two
    names (``self.encoder`` is ``self.decoder``) is then recorded under the name used."""

    def __init__(self, root: torch.nn.Module) -> None:
        super().__init__()
        setattr(self, _ROOT_ATTR, root)


def _strip_holder(text: str) -> str:
    if text == _ROOT_ATTR:
        return ""
    prefix = _ROOT_ATTR + "."
    return text[len(prefix) :] if text.startswith(prefix) else text


def _root_relative_module_stacks(gm: torch.fx.GraphModule) -> None:
    """Rewrite module-stack keys and paths recorded under the holder to be root-relative."""
    for module in graph_modules(gm):
        for node in module.graph.nodes:
            stack = node.meta.get("nn_module_stack")
            if stack:
                node.meta["nn_module_stack"] = {
                    _strip_holder(key): (_strip_holder(path), cls) for key, (path, cls) in stack.items()
                }


class _NeedsFunctionalization(Exception):
    """Internal: the unfunctionalized trace met a write, so it must be redone functionalized."""


def _writes(target) -> bool:
    return isinstance(target, OpOverload) and (schema_of(target).is_mutable or has_effects(target))


def _aliases(target) -> bool:
    """Whether an op's result may share memory with an argument (views, in-place and out= ops)."""
    return any(r.alias_info is not None for r in schema_of(target).returns)


# In-place ops the unfunctionalized trace records as their out-of-place op when they write
# to a fresh intermediate, and how the out-of-place op's dtype is known to be the tensor's
# own (functionalization would otherwise cast the result back with _to_copy).
_KEEPS_DTYPE = frozenset({"masked_fill_", "index_put_", "fill_", "zero_", "relu_"})
_PROMOTES = frozenset({"add_", "sub_", "mul_", "div_"})


def _out_of_place(target: OpOverload) -> OpOverload | None:
    """``aten.add.Tensor`` for ``aten.add_.Tensor``, when it takes the same arguments."""
    namespace, _, name = target.name().partition("::")
    packet, _, overload = name.partition(".")
    if packet not in _KEEPS_DTYPE and packet not in _PROMOTES:
        return None
    functional = getattr(getattr(getattr(torch.ops, namespace), packet[:-1], None), overload or "default", None)
    if not isinstance(functional, OpOverload) or _aliases(functional) or schema_of(functional).is_mutable:
        return None
    signature = [(a.name, str(a.type)) for a in schema_of(target).arguments]
    return functional if signature == [(a.name, str(a.type)) for a in schema_of(functional).arguments] else None


def _same_dtype_result(packet: str, node: torch.fx.Node) -> bool:
    if packet in _KEEPS_DTYPE:
        return True
    self_val = node.args[0].meta.get("val")
    other = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
    if not isinstance(self_val, torch.Tensor):
        return False
    if isinstance(other, torch.fx.Node):
        other_val = other.meta.get("val")
        return isinstance(other_val, torch.Tensor) and other_val.dtype == self_val.dtype
    if isinstance(other, bool):
        return True
    if isinstance(other, int):
        return self_val.dtype != torch.bool
    return isinstance(other, float) and self_val.dtype.is_floating_point


def _fresh_and_unaliased(written: Any, write: torch.fx.Node, graph: torch.fx.Graph | None) -> bool:
    """Whether ``written`` made a new tensor in the traced graph that nothing seen so far views."""
    if not isinstance(written, torch.fx.Node) or written.graph is not graph or written.op != "call_function":
        return False
    if not isinstance(written.target, OpOverload) or _aliases(written.target):
        return False
    return all(
        user is write or (isinstance(user.target, OpOverload) and not _aliases(user.target))
        for user in written.users
    )


@attrs.define
class _WriteWatch:
    """Node hook: while ``functionalized`` is off, a write to a fresh intermediate that
    nothing views (``buckets += t``, ``scores.masked_fill_(...)``) is recorded as the
    out-of-place op that functionalization would record; any other write to a tensor (or
    a side effect) aborts the trace.

    Functionalizing such a write changes nothing else in the graph (there is no other
    alias to update and no input to copy back), so the two traces agree node for node;
    the node is renamed as the out-of-place op's node would have been named."""

    functionalized: bool = False
    graph: torch.fx.Graph | None = None
    """The top-level graph: the first node the watch sees is one of its placeholders."""
    written: set[torch.fx.Node] = attrs.field(factory=set)
    """The nodes recorded out of place: the values of tensors written so far."""
    _writers: dict[Any, bool] = attrs.field(factory=dict)
    """target -> whether it writes (``_writes``), worked out once per target and trace."""

    def __call__(self, node: torch.fx.Node) -> None:
        if self.graph is None:
            self.graph = node.graph
        if self.functionalized or node.op != "call_function":
            return
        writes = self._writers.get(node.target)
        if writes is None:
            writes = self._writers[node.target] = _writes(node.target)
        if not writes:
            # Functionalization replays each new view of a written tensor from its base
            # when the view is first used, adding view nodes this trace would not have.
            viewing = not isinstance(node.target, OpOverload) or _aliases(node.target)
            if self.written and viewing and any(arg in self.written for arg in node.all_input_nodes):
                raise _NeedsFunctionalization(f"{node.target} of a tensor written in place")
            return
        functional = None if has_effects(node.target) else _out_of_place(node.target)
        packet = node.target.name().partition("::")[2].partition(".")[0]
        if (
            functional is None
            or node.graph is not self.graph
            or not node.args
            or not _fresh_and_unaliased(node.args[0], node, self.graph)
            or not _same_dtype_result(packet, node)
        ):
            raise _NeedsFunctionalization(str(node.target))
        node.target = functional
        rename_node(node, packet[:-1])
        self.written.add(node)


def _make_traced_fn(
    root: torch.nn.Module,
    state_inputs: StateInputs,
    bound: BoundInputs,
    input_labels: list[str],
    recorded: _Recorded,
    *,
    functionalized: bool,
    training: bool = False,
):
    """The flat function make_fx traces, (state..., user leaves...) -> (updates..., outputs...),
    and the module holding ``root`` that it calls."""
    state_names = state_inputs.names
    n_state = len(state_names)
    # make_fx records nn_module_stack relative to the module the traced function carries.
    holder = _Holder(root)

    root_buffers = {name: i for i, name in enumerate(state_names) if name in own_buffers(root)}

    def on_buffer_write(module: torch.nn.Module, name: str, value: Any) -> None:
        # As torch.export's training IR: the root module's buffers assigned in forward are
        # written back from the value last assigned (even `self.buf += x`, the same tensor).
        if module is root and name in root_buffers and isinstance(value, torch.Tensor):
            node = traced_node(value)
            if node is not None:
                recorded.buffer_writes[root_buffers[name]] = node

    def run(inputs: list[Any]) -> tuple[Any, dict[str, Any]]:
        state = dict(zip(state_names, inputs[:n_state]))
        swapped = state_inputs.module_state(state)
        rebuilt = {sub.name: swapped[sub.name] for sub in state_inputs.subclasses}
        args, kwargs = pytree.tree_unflatten(inputs[n_state:], bound.in_spec)
        with reparametrize_module(root, swapped, tie_weights=True, strict=True, stack_weights=True):
            with buffer_writes(on_buffer_write) if training else contextlib.nullcontext():
                out = getattr(holder, _ROOT_ATTR)(*args, **kwargs)
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

    def traced_plain(*flat_inputs):
        inputs = list(flat_inputs)
        out, state = run(inputs)
        if any(state[name] is not inputs[i] for i, name in enumerate(state_names)):
            raise _NeedsFunctionalization("a buffer was reassigned")
        flat_out, recorded.out_spec = _flatten_outputs(out)
        return tuple(flat_out)

    def traced_training(*flat_inputs):
        # Writes stay in place; a buffer reassigned in forward (self.buf = new) is written
        # back with copy_ (added after the trace, see `trace`), as torch.export does.
        inputs = list(flat_inputs)
        out, state = run(inputs)
        flat_out, recorded.out_spec = _flatten_outputs(out)
        for i, name in enumerate(state_names):
            new, old = state[name], inputs[i]
            if new is not old:
                _check_replacement(input_labels[i], old, new)
                node = traced_node(new)
                if node is not None and i not in recorded.buffer_writes:
                    recorded.buffer_writes[i] = node
        return tuple(flat_out)

    def traced_functional(*flat_inputs):
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

        for i, name in enumerate(state_names):
            if state[name] is not functional[i]:
                new, old = state[name], functional[i]
                if not isinstance(new, FunctionalTensor):
                    _replacement_error(input_labels[i], old, new)
                _check_replacement(input_labels[i], old, new)
                functional[i] = new
                recorded.mutated.append(i)

        updates = []
        for i, (value, original) in enumerate(zip(functional, flat_inputs)):
            if not isinstance(value, FunctionalTensor):
                continue
            if i in recorded.mutated:
                updates.append((i, _from_functional(value)))
                continue
            storage_changed, metadata_mutated, data_mutated = functional_state(value)
            if _layout_changed(value, original, storage_changed, metadata_mutated):
                # The node that made the input's current value: the view op that replays
                # an in-place one (unsqueeze for unsqueeze_), on the user's line.
                frame = node_frame(traced_node(unwrap_functional(value)))
                raise TraceError(
                    f"forward() changed the shape, strides or storage of {input_labels[i]} in place "
                    f"({f'`{frame.line}`' if frame and frame.line else 'resize_, set_, transpose_, ...'}), "
                    "which an exported program cannot express",
                    category=Category.UNSUPPORTED_MUTATION,
                    location=_where(frame),
                    hint="use the out-of-place op (x = x.unsqueeze(0) for x.unsqueeze_(0)) instead",
                )
            if data_mutated:
                updates.append((i, _from_functional(value)))
        updates.sort(key=lambda item: item[0])
        recorded.mutated = [i for i, _ in updates]
        return (*[v for _, v in updates], *[_from_functional(v) for v in flat_out])

    traced = traced_training if training else traced_functional if functionalized else traced_plain
    return traced, holder


def _check_replacement(label: str, old: torch.Tensor, new: Any) -> None:
    """A buffer reassigned in forward must keep its shape and dtype (the program updates it)."""
    if not isinstance(new, torch.Tensor) or (new.shape, new.dtype) != (old.shape, old.dtype):
        _replacement_error(label, old, new)


def _replacement_error(label: str, old: torch.Tensor, new: Any) -> None:
    found = f"{tuple(new.shape)} {new.dtype}" if isinstance(new, torch.Tensor) else type(new).__name__
    frame = node_frame(traced_node(_from_functional(new))) if isinstance(new, torch.Tensor) else None
    raise TraceError(
        f"forward() replaced {label} ({tuple(old.shape)} {old.dtype}) "
        f"with {found}; an exported program can only update a buffer in place",
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


_OUTPUT_LEAF_TYPES = (
    torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool,
    int, float, bool, str, type(None), torch.dtype, torch.device,
)


def _flatten_outputs(out: Any) -> tuple[list[Any], pytree.TreeSpec]:
    """forward()'s return value as leaves; container objects (KV caches) are opened up."""
    register_containers_in(out)
    with_paths, spec = pytree.tree_flatten_with_path(out)
    for path, leaf in with_paths:
        if not isinstance(leaf, _OUTPUT_LEAF_TYPES):
            where = f"output{pytree.keystr(path)}" if path else "the output"
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


def _keep_requires_grad(placeholder: torch.fx.Node, fake: torch.Tensor) -> None:
    """The training IR is autograd-visible: a placeholder's value requires grad when the
    input it stands for does (a parameter, a user input), as in torch.export's."""
    val = placeholder.meta.get("val")
    if isinstance(val, torch.Tensor) and val.is_leaf and val.requires_grad != fake.requires_grad:
        val.requires_grad_(fake.requires_grad)


def _one_update_per_node(gm: torch.fx.GraphModule, updates: int) -> list[Any]:
    """The graph's outputs, each input update its own node.

    Two inputs that are one tensor (passed twice, or registered under two names) get the
    same new value when forward writes to it; torch.export's signature names each update
    by its node, so the second one reads the value through an ``alias`` of its own."""
    output = gm.graph.output_node()
    outputs = list(output.args[0])
    seen: set[torch.fx.Node] = set()
    for i, value in enumerate(outputs[:updates]):
        if isinstance(value, torch.fx.Node) and value in seen:
            with gm.graph.inserting_before(output):
                alias = gm.graph.call_function(torch.ops.aten.alias.default, (value,))
            alias.meta = dict(value.meta)
            outputs[i] = alias
        seen.add(value)
    if outputs != list(output.args[0]):
        output.args = (tuple(outputs),)
    return outputs


def _write_back_buffers(gm: torch.fx.GraphModule, placeholders: list[torch.fx.Node], writes: dict[int, torch.fx.Node]) -> None:
    """``copy_(buffer, value)`` before the output for each buffer forward() assigned."""
    output = gm.graph.output_node()
    for i, value in sorted(writes.items()):
        with gm.graph.inserting_before(output):
            copy = gm.graph.call_function(torch.ops.aten.copy_.default, (placeholders[i], value))
        copy.meta = dict(value.meta)


@attrs.frozen
class _Traced:
    gm: torch.fx.GraphModule
    fake_mode: FakeTensorMode
    fakes: FakeInputs
    recorded: _Recorded
    root_relative: bool = False
    """Module stacks are already relative to the user's module (the recorder's are)."""


def _trace_once(
    root,
    state_inputs: StateInputs,
    bound,
    labels,
    plan,
    *,
    fast: FastPaths,
    functionalized: bool,
    draft: bool,
    deferred_asserts: bool,
    training: bool = False,
    recorder_hook: _WriteWatch | None = None,
) -> _Traced:
    """One trace with make_fx, or with the fast recorder (``fast.recorder.record``) when given
    the node hook it calls (make_fx's nodes reach the hook through the patches)."""
    fake_mode = new_fake_mode(root, deferred_asserts=deferred_asserts, dynamic=plan is not None)
    if draft:
        record_assumption_sites(fake_mode.shape_env)
    fakes = fake_inputs(fake_mode, state_inputs.values, bound, plan, direct=fast.direct_fake())
    recorded = _Recorded()
    traced, holder = _make_traced_fn(
        root, state_inputs, bound, labels, recorded, functionalized=functionalized, training=training
    )
    # The tracing context hands our fake mode to anything that compiles a region
    # internally (torch.cond runs its branches through torch.compile).
    # Symbolic sizes: repeated calls may be served from the trace's memo (a fast path).
    memo = contextlib.nullcontext()
    if plan is not None and not draft:
        memo = fast.symbolic_memo_for(fake_mode, training=training)
    with real_writes_undone(fake_mode), fake_mode, memo, tracing(TracingContext(fake_mode)):
        if recorder_hook is not None:
            from .fast.recorder import record

            recording = functools.partial(record, training=training, direct_pre_dispatch=fast.direct_pre_dispatch)
            gm = on_roomy_stack(recording, traced, root, fakes.inputs, recorder_hook, fake_mode.shape_env)
        else:
            with fast.pre_dispatch_for_make_fx() if training else contextlib.nullcontext():
                gm = on_roomy_stack(functools.partial(record_module_calls, pre_dispatch=training), traced, holder, {}, fakes.inputs)
    return _Traced(gm, fake_mode, fakes, recorded, root_relative=recorder_hook is not None)


def _refuse_subclass_state_in_training_ir(root: torch.nn.Module, state_inputs: StateInputs) -> None:
    """torch.export's training IR keeps a tensor-subclass parameter or buffer as one input of
    that subclass (its inner tensors read through ``export.access_subclass_inner_tensor``);
    exporter traces such state as its plain inner tensors, which is what the default IR
    holds and not what the training IR does."""
    state = dict(root.named_parameters(remove_duplicate=False)) | dict(root.named_buffers(remove_duplicate=False))
    named = ", ".join(f"{sub.name!r} ({type(state[sub.name]).__qualname__})" for sub in state_inputs.subclasses)
    raise TraceError(
        f"ir='training' keeps tensor-subclass parameters and buffers as subclass inputs, which exporter "
        f"does not trace: {named}",
        category=Category.UNSUPPORTED_TENSOR_SUBCLASS,
        hint="export with ir='inference' (the default; --ir inference on the command line), which "
        "traces them as their inner tensors as torch.export's run_decompositions does; or use "
        "torch.export.export for a training IR with subclass inputs",
    )


def _recorded_or_none(
    root, state_inputs: StateInputs, bound, labels, watch: _WriteWatch, deferred_asserts: bool, fast: FastPaths,
    training: bool = False,
) -> _Traced | None:
    """The fast recorder's trace; None when make_fx must trace instead (the recorder refused,
    or the model raised: make_fx's trace then reports the error as it always has).  A write
    that needs functionalization sets ``watch.functionalized``, as the make_fx try does."""
    from .fast.recorder import CannotRecord

    try:
        return _trace_once(
            root, state_inputs, bound, labels, None, fast=fast, functionalized=False, draft=False,
            deferred_asserts=deferred_asserts, training=training, recorder_hook=watch,
        )
    except _NeedsFunctionalization as why:
        log.debug("tracing again, functionalized: %s", why)
        watch.functionalized = True
    except ExportError:
        raise
    except Exception as why:  # CannotRecord, or an error make_fx's trace will report
        log.debug("tracing with make_fx: %s", why if isinstance(why, CannotRecord) else repr(why))
    watch.graph = None
    watch.written.clear()
    return None


def trace(
    root: torch.nn.Module,
    bound: BoundInputs,
    plan: DynamicPlan | None = None,
    *,
    always_functionalize: bool = False,
    fast: FastPaths | None = None,
    draft: bool = False,
    deferred_asserts: bool = False,
    training: bool = False,
) -> ExportState:
    """Trace ``root`` on ``bound`` inputs into an ExportState holding functional ATen.

    With a ``plan`` (parsed ``dynamic_shapes``) the dynamic dimensions of user inputs are
    symbolic; checking the guards the trace produced against the plan is a later step.

    Functionalization costs a quarter to two thirds of the trace and changes nothing in a
    program that never writes to a tensor, so the model is first traced without it.  A
    write to a fresh intermediate that nothing views is recorded there as the out-of-place
    op functionalization would record (``_WriteWatch``); any other in-place op, out= op,
    side-effectful op or buffer reassignment aborts that trace and the model is traced
    again, functionalized.  ``always_functionalize`` skips the first try.

    ``fast``: the fast paths to take (``FastPaths.resolve()`` when None).  With its
    ``recorder``, the first try of a static trace is recorded by ``fast.recorder.record``,
    which records what make_fx records at a fraction of its cost and hands anything it does
    not handle to make_fx (the tests hold the two equal).

    ``draft``: fake tensors carry real values; where the trace needs a tensor's value or an
    operator has no fake kernel, the example inputs decide, and ``state.assumptions`` lists
    each such place (see ``draft.py``).

    ``deferred_asserts``: size conditions that decide no control flow become runtime
    asserts in the program rather than guards (see ``new_fake_mode``).
    """
    state_inputs = collect_state(root)
    if training and state_inputs.subclasses:
        _refuse_subclass_state_in_training_ir(root, state_inputs)
    parameters, buffers = list(state_inputs.parameters), list(state_inputs.buffers)
    labels = [
        *(f"parameter '{n}'" for n in parameters),
        *(f"buffer '{n}'" for n in buffers),
        *bound.labels,
    ]

    fast = FastPaths.resolve() if fast is None else fast
    watch = _WriteWatch(functionalized=always_functionalize or training)
    try:
        with (
            tracing_patches(watch, draft=draft, training=training, fast=fast),
            module_preserved(root),
        ):
            traced = None
            recordable = fast.recorder and plan is None and not (draft or state_inputs.subclasses)
            if training:
                if recordable:
                    traced = _recorded_or_none(root, state_inputs, bound, labels, watch, deferred_asserts, fast, training=True)
                if traced is None:
                    traced = _trace_once(
                        root, state_inputs, bound, labels, plan, fast=fast, functionalized=False, draft=draft,
                        deferred_asserts=deferred_asserts, training=True,
                    )
            elif recordable and not always_functionalize:
                traced = _recorded_or_none(root, state_inputs, bound, labels, watch, deferred_asserts, fast)
            if traced is None and not watch.functionalized:
                try:
                    traced = _trace_once(
                        root, state_inputs, bound, labels, plan, fast=fast, functionalized=False, draft=draft,
                        deferred_asserts=deferred_asserts,
                    )
                except _NeedsFunctionalization as why:
                    log.debug("tracing again, functionalized: %s", why)
                    watch.functionalized = True
            if traced is None:
                traced = _trace_once(
                    root, state_inputs, bound, labels, plan, fast=fast, functionalized=True, draft=draft,
                    deferred_asserts=deferred_asserts,
                )
    except ExportError:
        raise
    except Exception as e:
        raise explain(e) from e

    gm, fake_mode, recorded = traced.gm, traced.fake_mode, traced.recorded
    if not traced.root_relative:
        _root_relative_module_stacks(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    _write_back_buffers(gm, placeholders, recorded.buffer_writes)
    for node, value in zip(placeholders, traced.fakes.inputs):
        if not isinstance(value, torch.Tensor):
            node.meta["val"] = value
        elif training:
            _keep_requires_grad(node, value)
    for node in gm.graph.nodes:
        # Ops that return nothing (asserts) get an explicit None, so every call has a `val`.
        if node.op == "call_function":
            node.meta.setdefault("val", None)

    outputs = _one_update_per_node(gm, len(recorded.mutated))
    state = ExportState(
        root=root,
        gm=gm,
        input_specs=input_specs(placeholders, parameters, buffers, state_inputs.non_persistent),
        output_specs=output_specs(outputs, recorded.mutated, placeholders, parameters, buffers),
        fake_mode=fake_mode,
        args=bound.args,
        kwargs=bound.kwargs,
        in_spec=bound.in_spec,
        out_spec=recorded.out_spec,
        user_input_paths=list(bound.paths),
        forward_arg_names=list(bound.forward_arg_names),
        constant_fqns=constant_attribute_fqns(root),
        subclass_leaves=state_inputs.leaves,
        dynamic=plan,
        tracked=traced.fakes.tracked,
        equalities=traced.fakes.equalities,
        training=training,
    )
    if draft:
        state.assumptions = data_dependent_assumptions(state) + missing_fake_kernel_assumptions(state)
    return state
