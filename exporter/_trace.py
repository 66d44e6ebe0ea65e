"""Run the real module under fake tensors and record functional, post-autograd ATen.

One trace does it all (two when a first, unfunctionalized try meets a write; see ``trace``):

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
import inspect
import logging
import sys
from collections.abc import Iterator
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._higher_order_ops.effects import has_effects
from torch._ops import OpOverload
# Source data classes: the ShapeEnv keys input sizes by them (the Dynamo tracer is not used).
from torch._dynamo.source import TensorProperty, TensorPropertySource  # Source data classes ShapeEnv requires; no Dynamo tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.export.graph_signature import (
    ConstantArgument,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)
from torch.fx._lazy_graph_module import _use_lazy_graph_module
from torch.fx.experimental import proxy_tensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.nn.utils.stateless import _reparametrize_module

from ._dispatch import EXPORT_LOCK, assert_conversion_metadata, keep_composites_whole
from ._errors import ExportError, TraceError
from ._explain import explain, is_library_frame
from ._dynamic import DynamicPlan
from ._inputs import BoundInputs, describe_path
from ._preserve import module_preserved
from ._stacks import user_stack_trace
from ._symbolic import symbolic_python
from ._state import ExportState

__all__ = ["trace"]

log = logging.getLogger(__name__)


@attrs.define
class _Recorded:
    """What the traced function learns while it runs, read back after make_fx returns."""

    out_spec: pytree.TreeSpec | None = None
    mutated: list[int] = attrs.field(factory=list)
    """Flat input indices (state first, then user leaves) whose data changed, in input order."""


def _named_state(root: torch.nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    params = dict(root.named_parameters(remove_duplicate=False))
    buffers = dict(root.named_buffers(remove_duplicate=False))
    return params, buffers


def non_persistent_buffer_names(root: torch.nn.Module) -> set[str]:
    """FQNs (all aliases) of buffers registered with ``persistent=False``."""
    names = set()
    for prefix, module in root.named_modules(remove_duplicate=False):
        for name in module._non_persistent_buffers_set:
            if module._buffers.get(name) is not None:
                names.add(f"{prefix}.{name}" if prefix else name)
    return names


def constant_attribute_fqns(root: torch.nn.Module) -> dict[int, list[str]]:
    """id(tensor) -> FQNs of plain tensor attributes (neither parameter nor buffer), in module order."""
    state_ids = {id(t) for t in root.parameters()} | {id(t) for t in root.buffers()}
    found: dict[int, list[str]] = {}
    for prefix, module in root.named_modules(remove_duplicate=False):
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and id(value) not in state_ids:
                found.setdefault(id(value), []).append(f"{prefix}.{name}" if prefix else name)
    return found


class _ShapeEnv(ShapeEnv):
    """A ShapeEnv that attributes guards to the user's own source line.

    The stock one blames the innermost frame outside a few shape-handling files, which is
    often a torch decomposition or meta kernel; constraint errors should point at the
    model's line that needed the guard.
    """

    def _get_user_frame(self):
        frame = inspect.currentframe()
        while frame is not None and is_library_frame(frame.f_code.co_filename):
            frame = frame.f_back
        return frame


def _new_fake_mode(root: torch.nn.Module) -> FakeTensorMode:
    code = getattr(type(root).forward, "__code__", None)
    co_fields = (
        {"co_name": code.co_name, "co_filename": code.co_filename, "co_firstlineno": code.co_firstlineno}
        if code is not None
        else {}
    )
    shape_env = _ShapeEnv(tracked_fakes=[], co_fields=co_fields, trace_asserts=True)
    return FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True, export=True)


@contextlib.contextmanager
def _tracing_environment() -> Iterator[None]:
    """Global switches for the duration of a trace, all restored on exit.

    * ``torch.compiler.is_compiling()`` / ``is_exporting()`` report True, so libraries take
      their export-friendly code paths;
    * mkldnn and nnpack are off, so convolutions are not routed to backend-specific kernels;
    * grad mode set inside forward does not leak out of the export.
    """
    compiler = torch.compiler
    saved_flags = (compiler._is_compiling_flag, compiler._is_exporting_flag)
    saved_mkldnn = torch.backends.mkldnn.set_flags(False)
    saved_nnpack = torch.backends.nnpack.set_flags(False)
    grad_enabled = torch.is_grad_enabled()
    compiler._is_compiling_flag = True
    compiler._is_exporting_flag = True
    try:
        yield
    finally:
        compiler._is_compiling_flag, compiler._is_exporting_flag = saved_flags
        torch.backends.mkldnn.set_flags(*saved_mkldnn)
        torch.backends.nnpack.set_flags(*saved_nnpack)
        torch.set_grad_enabled(grad_enabled)


def _from_functional(value: Any) -> Any:
    if isinstance(value, FunctionalTensor):
        torch._sync(value)
        return torch._from_functional_tensor(value.elem)
    return value


def _input_was_resized_or_restrided(functional: FunctionalTensor, original: torch.Tensor) -> bool:
    if torch._functionalize_was_storage_changed(functional.elem):
        return True
    if not torch._functionalize_has_metadata_mutation(functional.elem):
        return False
    after = torch._from_functional_tensor(functional.elem)
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
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            stack = node.meta.get("nn_module_stack")
            if stack:
                node.meta["nn_module_stack"] = {
                    _strip_holder(key): (_strip_holder(path), cls) for key, (path, cls) in stack.items()
                }


class _NeedsFunctionalization(Exception):
    """Internal: the unfunctionalized trace met a write, so it must be redone functionalized."""


def _writes(target) -> bool:
    return isinstance(target, OpOverload) and (target._schema.is_mutable or has_effects(target))


@contextlib.contextmanager
def _node_recording(functionalized: bool) -> Iterator[None]:
    """While tracing, every node gets a cheap stack trace; without functionalization, the
    first node that writes to a tensor (or has a side effect) aborts the trace."""
    tracer_cls = proxy_tensor._ModuleStackTracer
    original = tracer_cls.create_node
    saved_flag = torch.fx.config.do_not_emit_stack_traces

    def create_node(self, *args, **kwargs):
        node = original(self, *args, **kwargs)
        if node.op == "call_function" and not functionalized and _writes(node.target):
            raise _NeedsFunctionalization(str(node.target))
        if node.op not in ("placeholder", "output") and not node.stack_trace:
            trace = user_stack_trace(sys._getframe(1))
            if trace:
                node.stack_trace = trace
        return node

    # The flag stops make_fx's own, far costlier, capture; tracers read it when created.
    torch.fx.config.do_not_emit_stack_traces = True
    tracer_cls.create_node = create_node
    try:
        yield
    finally:
        tracer_cls.create_node = original
        torch.fx.config.do_not_emit_stack_traces = saved_flag


def _make_traced_fn(
    root: torch.nn.Module,
    state_names: list[str],
    bound: BoundInputs,
    input_labels: list[str],
    recorded: _Recorded,
    *,
    functionalized: bool,
):
    """The flat function make_fx traces: (state..., user leaves...) -> (updates..., outputs...)."""
    n_state = len(state_names)
    # make_fx records nn_module_stack relative to the module the traced function carries.
    holder = _Holder(root)

    def run(inputs: list[Any]) -> tuple[Any, dict[str, Any]]:
        state = dict(zip(state_names, inputs[:n_state]))
        args, kwargs = pytree.tree_unflatten(inputs[n_state:], bound.in_spec)
        with _reparametrize_module(root, state, tie_weights=True, strict=True, stack_weights=True):
            out = getattr(holder, _ROOT_ATTR)(*args, **kwargs)
        # On exit the context writes the module's final tensors back into `state`, so a
        # buffer reassigned in forward (self.buf = new) shows up there as a new object.
        return out, state

    def traced_plain(*flat_inputs):
        inputs = list(flat_inputs)
        out, state = run(inputs)
        if any(state[name] is not inputs[i] for i, name in enumerate(state_names)):
            raise _NeedsFunctionalization("a buffer was reassigned")
        flat_out, recorded.out_spec = pytree.tree_flatten(out)
        return tuple(flat_out)

    def traced_functional(*flat_inputs):
        mode = FunctionalTensorMode(pre_dispatch=False, export=True, _allow_token_discovery=True)
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
        if mode._tokens:
            raise TraceError(
                "the model calls a side-effectful operator "
                f"({', '.join(str(k) for k in mode._tokens)}) that needs effect tokens",
                category="unsupported operator",
                hint="side-effectful custom ops are not supported yet; move the call out of forward()",
            )
        flat_out, recorded.out_spec = pytree.tree_flatten(out)

        for i, name in enumerate(state_names):
            if state[name] is not functional[i]:
                new, old = state[name], functional[i]
                if not isinstance(new, FunctionalTensor) or (new.shape, new.dtype) != (old.shape, old.dtype):
                    found = (
                        f"{tuple(new.shape)} {new.dtype}" if isinstance(new, torch.Tensor) else type(new).__name__
                    )
                    raise TraceError(
                        f"forward() replaced {input_labels[i]} ({tuple(old.shape)} {old.dtype}) "
                        f"with {found}; an exported program can only update a buffer in place",
                        category="unsupported mutation",
                        hint="keep the buffer's shape and dtype (self.buf = new.to(self.buf.dtype)), "
                        "or register a separate buffer",
                    )
                functional[i] = new
                recorded.mutated.append(i)

        updates = []
        for i, (value, original) in enumerate(zip(functional, flat_inputs)):
            if not isinstance(value, FunctionalTensor):
                continue
            torch._sync(value)
            if i in recorded.mutated:
                updates.append((i, _from_functional(value)))
                continue
            if _input_was_resized_or_restrided(value, original):
                raise TraceError(
                    f"forward() changed the shape, strides or storage of {input_labels[i]} in place "
                    "(resize_, set_, transpose_, ...), which an exported program cannot express",
                    category="unsupported mutation",
                    hint="use the out-of-place op (x = x.transpose(0, 1)) instead",
                )
            if torch._functionalize_has_data_mutation(value.elem):
                updates.append((i, _from_functional(value)))
        updates.sort(key=lambda item: item[0])
        recorded.mutated = [i for i, _ in updates]
        return (*[v for _, v in updates], *[_from_functional(v) for v in flat_out])

    traced = traced_functional if functionalized else traced_plain
    traced._orig_mod = holder
    return traced


def _copy_fresh_constant(tensor: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.clone.default(tensor)


# ``torch.tensor([...])`` in forward reaches the tracer as ``lift_fresh`` of a constant,
# which make_fx would record as ``lift_fresh_copy``; torch.export's IR has the ``clone``
# that functionalization makes of it once the constant is a program input.
_DECOMPOSITIONS = {torch.ops.aten.lift_fresh.default: _copy_fresh_constant}


@attrs.frozen
class _Fakes:
    inputs: list[Any]
    """Fake state then fake user inputs, in the traced function's argument order."""
    tracked: list[tuple[int, Any, Any, Any]]
    """(leaf index, fake, source, symbolic context) of each user tensor, for checking guards."""
    equalities: Any = None


def _fake_inputs(fake_mode: FakeTensorMode, state_values: list[Any], bound: BoundInputs, plan) -> _Fakes:
    """Fake parameters and buffers (static; a tensor reached twice, as tied weights are, gets
    one fake) and user inputs (symbolic where ``plan`` makes a dimension dynamic)."""
    memo: dict[int, Any] = {}
    fakes = []
    for value in state_values:
        if id(value) not in memo:
            memo[id(value)] = fake_mode.from_tensor(value, static_shapes=True)
        fakes.append(memo[id(value)])
    tracked = []
    example_sizes = {}
    for i, value in enumerate(bound.flat):
        if not isinstance(value, torch.Tensor):
            fakes.append(value)
        elif plan is None:
            fakes.append(fake_mode.from_tensor(value, static_shapes=True))
        else:
            source, context = plan.sources[i], plan.symbolic_context(i, value)
            fake = fake_mode.from_tensor(value, source=source, symbolic_context=context)
            fakes.append(fake)
            tracked.append((i, fake, source, context))
            example_sizes.update({(i, d): int(size) for d, size in enumerate(value.shape)})
    equalities = None
    if plan is not None:
        size_sources = {
            (i, d): TensorPropertySource(plan.sources[i], TensorProperty.SIZE, d)
            for i, d in example_sizes
        }
        equalities = plan.equalities(fake_mode.shape_env, size_sources, example_sizes)
    return _Fakes(fakes, tracked, equalities)


@attrs.frozen
class _Traced:
    gm: torch.fx.GraphModule
    fake_mode: FakeTensorMode
    fakes: _Fakes
    recorded: _Recorded


def _trace_once(root, state_values, state_names, bound, labels, plan, *, functionalized: bool) -> _Traced:
    fake_mode = _new_fake_mode(root)
    fakes = _fake_inputs(fake_mode, state_values, bound, plan)
    recorded = _Recorded()
    traced = _make_traced_fn(root, state_names, bound, labels, recorded, functionalized=functionalized)
    # The tracing context hands our fake mode to anything that compiles a region
    # internally (torch.cond runs its branches through torch.compile).
    context = torch._guards.TracingContext(fake_mode)
    # The traced module's code is never run (the program builds its own), so make_fx need
    # not generate it: a lazy graph module compiles only if something calls it.
    with (
        fake_mode,
        torch._guards.tracing(context),
        _node_recording(functionalized),
        _use_lazy_graph_module(True),
        symbolic_python() if plan is not None else contextlib.nullcontext(),
    ):
        gm = make_fx(
            traced,
            _DECOMPOSITIONS,
            record_module_stack=True,
            pre_dispatch=False,
            _disable_torch_fn_metadata_mode=True,
        )(*fakes.inputs)
    return _Traced(gm, fake_mode, fakes, recorded)


def trace(
    root: torch.nn.Module,
    bound: BoundInputs,
    plan: DynamicPlan | None = None,
    *,
    always_functionalize: bool = False,
) -> ExportState:
    """Trace ``root`` on ``bound`` inputs into an ExportState holding functional ATen.

    With a ``plan`` (parsed ``dynamic_shapes``) the dynamic dimensions of user inputs are
    symbolic; checking the guards the trace produced against the plan is a later step.

    Functionalization costs about a quarter of the trace and changes nothing in a program
    that never writes to a tensor, so the model is first traced without it; the first
    in-place op, out= op, side-effectful op or buffer reassignment aborts that trace and
    the model is traced again, functionalized.  ``always_functionalize`` skips the first try.
    """
    params, buffers = _named_state(root)
    state_names = [*params, *buffers]
    state_values = [*params.values(), *buffers.values()]
    labels = [
        *(f"parameter '{n}'" for n in params),
        *(f"buffer '{n}'" for n in buffers),
        *(describe_path(p) for p in _leaf_paths(bound)),
    ]

    with EXPORT_LOCK, module_preserved(root), _tracing_environment():
        try:
            with enable_python_dispatcher(), keep_composites_whole(), assert_conversion_metadata():
                traced = None
                if not always_functionalize:
                    try:
                        traced = _trace_once(
                            root, state_values, state_names, bound, labels, plan, functionalized=False
                        )
                    except _NeedsFunctionalization as why:
                        log.debug("tracing again, functionalized: %s", why)
                if traced is None:
                    traced = _trace_once(root, state_values, state_names, bound, labels, plan, functionalized=True)
        except ExportError:
            raise
        except Exception as e:
            raise explain(e) from e

    gm, fake_mode, recorded = traced.gm, traced.fake_mode, traced.recorded
    fake_inputs = traced.fakes.inputs
    _root_relative_module_stacks(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(placeholders, fake_inputs):
        if not isinstance(value, torch.Tensor):
            node.meta["val"] = value
    for node in gm.graph.nodes:
        # Ops that return nothing (asserts) get an explicit None, so every call has a `val`.
        if node.op == "call_function":
            node.meta.setdefault("val", None)

    non_persistent = non_persistent_buffer_names(root)
    input_specs = []
    for i, node in enumerate(placeholders):
        if i < len(params):
            spec = InputSpec(InputKind.PARAMETER, TensorArgument(node.name), target=state_names[i])
        elif i < len(state_names):
            name = state_names[i]
            spec = InputSpec(
                InputKind.BUFFER, TensorArgument(node.name), target=name, persistent=name not in non_persistent
            )
        else:
            spec = InputSpec(InputKind.USER_INPUT, argument_spec(node, node.meta.get("val")), target=None)
        input_specs.append(spec)

    outputs = list(gm.graph.output_node().args[0])
    output_specs = []
    for value, index in zip(outputs, recorded.mutated):
        if index < len(params):
            kind, target = OutputKind.PARAMETER_MUTATION, state_names[index]
        elif index < len(state_names):
            kind, target = OutputKind.BUFFER_MUTATION, state_names[index]
        else:
            kind, target = OutputKind.USER_INPUT_MUTATION, placeholders[index].name
        output_specs.append(OutputSpec(kind, argument_spec(value, _val(value)), target=target))
    for value in outputs[len(recorded.mutated) :]:
        output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, argument_spec(value, _val(value)), target=None))

    return ExportState(
        root=root,
        gm=gm,
        input_specs=input_specs,
        output_specs=output_specs,
        fake_mode=fake_mode,
        args=bound.args,
        kwargs=bound.kwargs,
        in_spec=bound.in_spec,
        out_spec=recorded.out_spec,
        user_input_paths=list(bound.paths),
        forward_arg_names=list(bound.forward_arg_names),
        constant_fqns=constant_attribute_fqns(root),
        dynamic=plan,
        tracked=traced.fakes.tracked,
        equalities=traced.fakes.equalities,
    )


def _leaf_paths(bound: BoundInputs) -> list[pytree.KeyPath]:
    return [p for p, _ in pytree.tree_flatten_with_path((bound.args, bound.kwargs))[0]]


def _val(value: Any) -> Any:
    return value.meta.get("val") if isinstance(value, torch.fx.Node) else value


def argument_spec(value: Any, val: Any):
    """The signature argument for a graph input or output: tensor, symbolic int or constant."""
    if isinstance(value, torch.fx.Node):
        if isinstance(val, torch.SymInt):
            return SymIntArgument(name=value.name)
        if isinstance(val, torch.Tensor):
            return TensorArgument(name=value.name)
        return ConstantArgument(name=value.name, value=val)
    return ConstantArgument(name="", value=value)
