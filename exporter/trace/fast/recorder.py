"""The fast recorder: make_fx's graph for a static, unfunctionalized trace, recorded directly
by a dispatch mode instead of through make_fx's general machinery (a fast path).

``Recorder`` makes the nodes make_fx makes, with the same names and metadata, and refuses
(``CannotRecord``) whatever it does not handle as make_fx would, handing the trace to make_fx.
``tests/exporter/trace/fast/test_recorder.py`` holds the two to the same graphs; the design
page ("The fast paths") says what it records and what it refuses."""

from __future__ import annotations

import collections
import contextlib
import operator
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..._torch_internals import (
    is_view,
    COMPOSITE_KEY,
    PRE_DISPATCH,
    FakeTensor,
    OpOverload,
    TorchDispatchMode,
    enable_python_dispatcher,
    has_composite_kernel,
    outside_pre_dispatch,
)
from ..._torch_internals.fast import (
    storage_key,
    PreDispatchTorchFunctionMode,
    ProxyTorchDispatchMode,
    active_fake_mode,
    autograd_would_have_expanded,
    default_device,
    fake_cache_would_serve,
    fake_empty_strided,
    fake_view_of,
    fake_value_of,
    graph_module_of,
    is_compiled_module,
    needs_exact_strides,
    node_name_for,
    set_proxy_mode_fields,
    snapshot_fake,
    tensor_meta,
)
from ..active import recording
from ..patches import NodeHook
from ..stacks import user_stack_trace
from .patches import direct_pre_dispatch as handed_straight_to, fast_recording
from .symbolic_memo import forget_shared, memoizable

__all__ = ["CannotRecord", "Recorder", "TrainingRecorder", "forget_fake_results", "record"]

_DEVICE = torch.ops.prim.device.default
_META = torch.device("meta")
_LIFT_FRESH = torch.ops.aten.lift_fresh.default
_LIFT_FRESH_COPY = torch.ops.aten.lift_fresh_copy.default
_UNSAFE_VIEW = torch.ops.aten._unsafe_view.default
"""Not a view op, but its fake result lies over its argument's storage: the fake-tensor cache
refuses it for that alone (it rebuilds aliases only for view ops), and the memo serves it
as it serves a view.  In the training IR every ``matmul`` on 3-d inputs (``linear`` too)
ends in one below autograd."""
_IS_NONZERO = torch.ops.aten.is_nonzero.default
_DATA_DEPENDENT = torch.Tag.data_dependent_output
_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_QUANTIZED = frozenset({torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4})
_PLAIN = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format})
_UNSEEN = object()


class _NoKey(Exception):
    pass


def _device_of_fake(args: tuple, kwargs: dict | None) -> torch.device | None:
    """``prim.device`` of a fake tensor, as the fake mode's handler answers it; None for
    anything else."""
    tensor = args[0] if len(args) == 1 and not kwargs else None
    if type(tensor) is FakeTensor:
        return _META if tensor.fake_mode.in_kernel_invocation else tensor.fake_device
    return None


class CannotRecord(Exception):
    """Internal: the recorder met something only make_fx records; trace with make_fx."""


class Recorder(TorchDispatchMode):
    """A dispatch mode that records every ATen op into ``graph`` (see module doc)."""

    EXPANDS_COMPOSITES = True
    """Below autograd, a composite op reaching the mode is expanded as make_fx expands it."""

    MEMOIZES = True
    """Fake results are served from the process's memo (see ``_served``) as the recorder
    makes each call."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ so that Dynamo never compiles inside it.
        # No Dynamo frame is active in a trace (torch.compile runs code uncompiled while
        # is_compiling() is True), and the wrapper costs two frame-hook swaps and an
        # is_exporting() call on every op, twice over with the device queries.
        return False

    def __init__(
        self, root: torch.nn.Module, on_node: NodeHook | None, shape_env: Any = None, dispatch_key: Any = None
    ) -> None:
        TorchDispatchMode.__init__(self, dispatch_key)
        self.shape_env = shape_env
        self.graph = torch.fx.Graph()
        self.constants = torch.nn.Module()
        """The graph module's root: holds the ``_tensor_constant`` attributes."""
        self.on_node = on_node
        self.refused: str | None = None
        # id(tensor) -> (weak reference to the tensor, node): the node holding each tensor's
        # current value.  Weak as make_fx's table is: a factory op's result that something
        # else still references is detached when it returns to Python (an extra node).  An
        # entry counts only while its tensor is alive (a dead tensor's id may be reused).
        self._nodes: dict[int, tuple[weakref.ref, torch.fx.Node]] = {}
        self._constants: dict[int, str] = {}
        # op -> (expanded when it reaches the recorder?, reads a value?, node name, records
        # eager_input_vals?, served from the memo?), worked out once per op and trace
        self._ops: dict[OpOverload, tuple[bool, bool, str, bool, bool]] = {}
        self.fake_mode: Any = None
        """The fake mode the trace runs in (set by ``record``); the memo serves its tensors only."""
        # memo key -> how to lay out the results again, or None: not served
        self._memo: dict[tuple, tuple | None] = {}
        self._tensor_metas: dict[tuple, Any] = {}
        self.module_stack: dict[str, tuple[str, str]] = {}
        # What nodes record: one dict shared by the nodes made while the stack stays as it is
        # (the passes replace each node's, never edit it), an empty OrderedDict as torch.fx's
        # tracer records an empty stack.
        self._stack_meta: dict[str, tuple[str, str]] | None = None
        self._calls: dict[str, int] = {}
        self._paths: dict[int, tuple[str, str]] = {}
        seen: set[int] = set()
        for name, module in root.named_modules(remove_duplicate=False):
            if id(module) in seen:
                raise CannotRecord(f"module {name!r} is reachable under two names")
            seen.add(id(module))
            cls = type(module)
            self._paths[id(module)] = (name, f"{cls.__module__}.{cls.__qualname__}")

    def node_of(self, value: Any) -> torch.fx.Node | None:
        """The node holding ``value``'s current value, if this trace produced it."""
        entry = self._nodes.get(id(value))
        return entry[1] if entry is not None and entry[0]() is value else None

    # -- refusing ------------------------------------------------------------------------

    def refuse(self, why: str) -> CannotRecord:
        if self.refused is None:
            self.refused = why
        return CannotRecord(self.refused)

    def on_hop(self, name: str) -> None:
        raise self.refuse(f"higher-order op {name}")

    # -- nodes ---------------------------------------------------------------------------

    def _node(
        self, op: str, target: Any, args: tuple, kwargs: dict, name: str | None = None, exact_strides: bool = False
    ) -> torch.fx.Node:
        node = self.graph.create_node(op, target, args, kwargs, name)
        if op != "placeholder" and op != "output":
            stack = self._stack_meta
            if stack is None:
                stack = self._stack_meta = dict(self.module_stack) if self.module_stack else collections.OrderedDict()
            node.meta["nn_module_stack"] = stack
            trace = user_stack_trace(sys._getframe(1))
            if trace:
                node.stack_trace = trace
            if exact_strides:
                node.meta["eager_input_vals"] = torch.fx.node.map_aggregate((args, kwargs), _input_val)
        if self.on_node is not None:
            self.on_node(node)
        return node

    def _op(self, func: OpOverload) -> tuple[bool, bool, str, bool, bool]:
        info = self._ops[func] = (
            self.EXPANDS_COMPOSITES and (COMPOSITE_KEY in func.py_kernels or has_composite_kernel(func)),
            _DATA_DEPENDENT in func.tags or func is _IS_NONZERO,
            node_name_for(self.graph, func.overloadpacket.__name__),
            needs_exact_strides(func),
            self.MEMOIZES and memoizable(func),
        )
        return info

    # -- the memo ------------------------------------------------------------------------
    #
    # A fake-tensor cache hit builds a key from every argument's full metadata, then
    # rebuilds the result.  A model repeats the same calls on the same layouts
    # layer after layer, and export after export; in a static trace a call matching an
    # earlier one (same op, argument layouts and values, default dtype and device, inference
    # mode, ShapeEnv settings) gets results made as the cache makes them on a hit, from a key
    # a fraction of the cost.  Served only where the fake-tensor cache would serve (its own
    # per-op rules), for tensors of this trace's fake mode carrying no constant, and only
    # once the first call's results were checked to be what remaking them gives.  What a
    # trace learns serves the traces after it (``record`` hands each the process's memo),
    # as torch's fake-tensor cache is shared by every fake mode.

    def _served(self, func: OpOverload, args: tuple, kwargs: dict, run: Callable[..., Any] | None = None) -> Any:
        """``func(*args, **kwargs)``, from the memo when it can be; ``run(func, args, kwargs)``
        computes it when not (default: the call itself)."""
        if run is None:
            run = _call
        mode = self.fake_mode
        if mode is None or not mode.cache_enabled:
            return run(func, args, kwargs)
        try:
            key = (
                func,
                torch.get_default_dtype(),
                default_device(),
                torch.is_inference_mode_enabled(),
                tuple(map(self._arg_key, args)),
                tuple((k, self._arg_key(v)) for k, v in kwargs.items()),
            )
        except _NoKey:
            return run(func, args, kwargs)
        layouts = self._memo.get(key, _UNSEEN)
        if layouts is _UNSEEN:
            mode.cache_enabled = False
            try:
                out = run(func, args, kwargs)
            finally:
                mode.cache_enabled = True
            self._memo[key] = self._layouts(func, args, kwargs, out)
            return out
        if layouts is None:
            return run(func, args, kwargs)
        return self._remade(layouts, args)

    def _arg_key(self, value: Any) -> Any:
        kind = type(value)
        if kind is FakeTensor:
            if (
                value.fake_mode is not self.fake_mode
                or value.constant is not None
                or value.layout is not torch.strided
                or value.dtype in _QUANTIZED
            ):
                raise _NoKey
            return (
                value.shape, value.stride(), value.storage_offset(), value.dtype, value.fake_device,
                value.requires_grad, value.is_conj(), value.is_neg(), value.is_inference(),
                value.untyped_storage().nbytes(),
            )
        if kind in _PLAIN:
            return (kind, value)
        if kind is list or kind is tuple:
            return (kind, tuple(map(self._arg_key, value)))
        raise _NoKey

    def _layouts(self, func: OpOverload, args: tuple, kwargs: dict, out: Any) -> tuple | None:
        """How to make ``out`` again, or None when the memo must not serve this call."""
        aliasing = func.is_view or func is _UNSAFE_VIEW
        if func is not _UNSAFE_VIEW and not fake_cache_would_serve(self.fake_mode, func, args, kwargs):
            return None
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        storages = {storage_key(t) for t in tensors}
        outputs = out if type(out) is tuple else (out,)
        layouts = []
        for o in outputs:
            if type(o) is not FakeTensor or o.fake_mode is not self.fake_mode or o.constant is not None:
                return None
            if o.layout is not torch.strided or o.is_conj() or o.is_neg():
                return None
            layout = (tuple(o.shape), o.stride(), o.dtype, o.fake_device, o.requires_grad)
            storage = storage_key(o)
            if aliasing:
                # Below autograd a view's fake result is a tensor over its one tensor
                # argument's storage (autograd, above, makes it a view), as the fake cache
                # makes it on a hit; so is ``_unsafe_view``'s.
                viewed = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
                if len(viewed) != 1 or len(tensors) != 1 or storage != storage_key(args[viewed[0]]):
                    return None
                layout = (*layout, o.storage_offset(), viewed[0])
            elif o.storage_offset() != 0 or storage in storages:
                return None
            remade = self._remade_one(layout, args)
            if _description(remade) != _description(o) or (aliasing and storage_key(remade) != storage):
                return None
            layouts.append(layout)
        return (type(out) is tuple, tuple(layouts))

    def _remade_one(self, layout: tuple, args: tuple) -> FakeTensor:
        if len(layout) == 5:
            return fake_empty_strided(self.fake_mode, *layout)
        shape, stride, dtype, device, requires_grad, offset, viewed = layout
        return fake_view_of(self.fake_mode, args[viewed], shape, stride, offset, dtype, device, requires_grad)

    def _remade(self, layouts: tuple, args: tuple) -> Any:
        is_tuple, parts = layouts
        made = tuple(self._remade_one(layout, args) for layout in parts)
        return made if is_tuple else made[0]

    def _tensor_meta(self, value: torch.Tensor) -> Any:
        """make_fx's ``tensor_meta``, shared by values of one size, stride, dtype and
        requires_grad (it is a tuple of those and what follows from them)."""
        dtype = value.dtype
        if value.layout is not torch.strided or dtype in _QUANTIZED:
            return tensor_meta(value)
        key = (value.shape, value.stride(), dtype, value.requires_grad)
        meta = self._tensor_metas.get(key)
        if meta is None:
            meta = self._tensor_metas[key] = tensor_meta(value)
        return meta

    def placeholder(self, index: int, value: Any) -> torch.fx.Node:
        name = f"arg{index}_1"
        node = self._node("placeholder", name, (), {}, name)
        if isinstance(value, torch.Tensor):
            if type(value) is not FakeTensor:
                raise self.refuse(f"input {index} is a {type(value).__name__}")
            node.meta["val"] = snapshot_fake(value, include_real=True)
            node.meta["tensor_meta"] = self._tensor_meta(value)
            self._nodes[id(value)] = (weakref.ref(value), node)
        elif isinstance(value, _SYMBOLIC):
            raise self.refuse("a symbolic input")
        return node

    def output(self, values: Sequence[Any]) -> None:
        self._node("output", "output", (tuple(self._arg(v) for v in values),), {})

    def _arg(self, value: Any) -> Any:
        """``value`` as a node argument: tensors become their nodes."""
        if isinstance(value, torch.Tensor):
            entry = self._nodes.get(id(value))
            if entry is not None and entry[0]() is value:
                return entry[1]
            if type(value) is torch.Tensor:
                return self._constant(value)
            raise self.refuse(f"a {type(value).__name__} the trace did not produce")
        if isinstance(value, (list, tuple)):
            return type(value)(self._arg(v) for v in value)
        if isinstance(value, _SYMBOLIC):
            raise self.refuse("a symbolic size")
        return value

    def _constant(self, value: torch.Tensor) -> torch.fx.Node:
        name = self._constants.get(id(value))
        if name is None:
            i = 0
            while hasattr(self.constants, f"_tensor_constant{i}"):
                i += 1
            name = f"_tensor_constant{i}"
            setattr(self.constants, name, value)  # which keeps it alive: its id stays its own
            self._constants[id(value)] = name
        node = self._node("get_attr", name, (), {})
        node.meta["val"] = fake_value_of(value)
        return node

    def _track(self, out: Any, node: torch.fx.Node) -> None:
        if isinstance(out, torch.Tensor):
            node.meta["val"] = snapshot_fake(out)
            node.meta["tensor_meta"] = self._tensor_meta(out)
            self._nodes[id(out)] = (weakref.ref(out), node)
        elif isinstance(out, (tuple, list)):
            node.meta["val"] = type(out)(snapshot_fake(o) if isinstance(o, torch.Tensor) else o for o in out)
            for i, item in enumerate(out):
                item_node = self._node("call_function", operator.getitem, (node, i), {}, "getitem")
                if isinstance(item, torch.Tensor):
                    item_node.meta["val"] = snapshot_fake(item)
                    item_node.meta["tensor_meta"] = self._tensor_meta(item)
                    self._nodes[id(item)] = (weakref.ref(item), item_node)
                elif item is not None:
                    raise self.refuse("an op returning a list of non-tensors")
        elif out is not None:
            raise self.refuse(f"an op returning a {type(out).__name__}")

    # -- the mode ------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args, kwargs=None):
        if func is _DEVICE:
            # Every tensor method called from Python asks its tensor's device (the binding's
            # device guard), which a fake tensor answers through the modes: answered here as
            # the fake mode's device handler would, without the trip through it.
            device = _device_of_fake(args, kwargs)
            return device if device is not None else func(*args, **(kwargs or {}))
        kwargs = kwargs or {}
        if self.refused is not None:
            raise CannotRecord(self.refused)
        expands, reads_value, name, exact_strides, memoized = self._ops.get(func) or self._op(func)
        if expands:
            flat = []
            for a in (*args, *kwargs.values()):
                if isinstance(a, (list, tuple)):
                    flat.extend(a)
                else:
                    flat.append(a)
            if autograd_would_have_expanded(func, flat):
                with self:
                    out = func.decompose(*args, **kwargs)
                if out is not NotImplemented:
                    return out
        if reads_value:
            raise self.refuse(f"{func} reads a tensor's value")
        if func is _LIFT_FRESH:
            # torch.tensor(...): make_fx records a copy of the constant, which forward may
            # then write to (its constant propagation matters to value-reading ops only)
            func = _LIFT_FRESH_COPY
            name = node_name_for(self.graph, func.overloadpacket.__name__)
        node_args = tuple(self._arg(a) for a in args)
        node_kwargs = {k: self._arg(v) for k, v in kwargs.items()}
        node = self._node("call_function", func, node_args, node_kwargs, name, exact_strides)
        out = self._served(func, args, kwargs) if memoized else func(*args, **kwargs)
        if self.shape_env is not None and self.shape_env.pending_fresh_unbacked_symbols:
            raise self.refuse(f"{func} made a data-dependent size")
        self._track(out, node)
        return out

    # -- module calls ----------------------------------------------------------------------

    def call_module(self, module: torch.nn.Module, call: Callable, args: tuple, kwargs: dict) -> Any:
        path = self._paths.get(id(module))
        if path is None or is_compiled_module(module):
            return call(module, *args, **kwargs)
        name, cls = path
        n = self._calls.get(name, 0)
        key = f"{name}@{n}" if n else name
        self._calls[name] = n + 1
        self.module_stack[key] = (name, cls)
        self._stack_meta = None
        try:
            return call(module, *args, **kwargs)
        finally:
            self.module_stack.pop(key, None)
            self._stack_meta = None


class TrainingRecorder(Recorder, ProxyTorchDispatchMode):
    """The recorder of a pre-dispatch (training IR) trace: ops are recorded above autograd,
    as called (``aten.linear`` whole, in-place ops in place), and grad-mode and autocast
    changes by ``_GradRegions``.

    torch accepts only make_fx's mode class in the pre-dispatch slot, so this is one by
    inheritance, set up with what torch reads from a mode there.  Its ``tracer`` is make_fx's
    alone: anything in torch that reaches for it (a higher-order op, a torch.func transform,
    symbolic-size arithmetic) meets a refusal, and make_fx traces instead.
    """

    EXPANDS_COMPOSITES = False
    # Above autograd a call runs through autograd, which no memo can skip; the memo serves
    # what autograd then asks of the fake mode instead (``_ServedBelowAutograd``).
    MEMOIZES = False

    def __init__(self, root: torch.nn.Module, on_node: NodeHook | None, shape_env: Any = None) -> None:
        Recorder.__init__(self, root, on_node, shape_env, PRE_DISPATCH)
        set_proxy_mode_fields(self)
        self.pre_dispatch = True
        self.tracing_mode = "fake"
        self.enter_stack: list[Any] = []
        self.decomposition_table: dict = {}
        self.decomp_layers = 0
        self.emulate_precision_casts = False

    @property
    def tracer(self) -> Any:
        raise self.refuse("torch reached for make_fx's tracer")

    def __sym_dispatch__(self, func, types, args, kwargs):
        raise self.refuse("a symbolic size")


class _ServedBelowAutograd(TorchDispatchMode):
    """The training recorder's memo, as a mode between autograd and the fake mode.

    A pre-dispatch trace records each call above autograd, and every call must still run
    through autograd there (forward may read ``requires_grad`` or ``grad_fn``).  What autograd
    then asks of the fake mode is what an inference trace asks: the fake results of plain
    calls, which the recorder's memo serves on the same terms (see ``Recorder._served``).
    """

    def __init__(self, recorder: Recorder) -> None:
        TorchDispatchMode.__init__(self)
        self._recorder = recorder
        self._memoizable: dict[OpOverload, bool] = {}

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as the recorder's

    def __torch_dispatch__(self, func, types, args, kwargs=None):
        if func is _DEVICE and (device := _device_of_fake(args, kwargs)) is not None:
            return device  # as the recorder answers it
        kwargs = kwargs or {}
        able = self._memoizable.get(func)
        if able is None:
            able = self._memoizable[func] = memoizable(func)
        if able:
            return self._recorder._served(func, args, kwargs, _below_the_trace)
        return _below_the_trace(func, args, kwargs)


def _call(func: OpOverload, args: tuple, kwargs: dict) -> Any:
    return func(*args, **kwargs)


def _below_the_trace(func: OpOverload, args: tuple, kwargs: dict) -> Any:
    """Run a call a mode below autograd handles as the fake mode runs it: the pre-dispatch
    trace above has recorded whatever forward called (see ``outside_pre_dispatch``)."""
    with outside_pre_dispatch():
        return func(*args, **kwargs)


class _GradRegions(PreDispatchTorchFunctionMode):
    """make_fx's pre-dispatch function mode, recording into the recorder's graph: its
    ``__torch_function__`` records ``_set_grad_enabled`` and autocast enter/exit through
    ``tracer.create_node``, which is all of make_fx's tracer it gets here."""

    def __init__(self, recorder: Recorder) -> None:
        self.tracer = _NodeMaker(recorder)
        self.enter_autocast_nodes: list[torch.fx.Node] = []


class _NodeMaker:
    """Stands in for make_fx's tracer in ``_GradRegions``: makes nodes; anything more (the
    torch.func transforms' proxies) is refused."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def create_node(self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None, type_expr: Any = None) -> torch.fx.Node:
        return self._recorder._node(kind, target, tuple(self._recorder._arg(a) for a in args), kwargs, name)

    def __getattr__(self, name: str) -> Any:
        raise self.__dict__["_recorder"].refuse(f"a pre-dispatch call that needs make_fx's tracer ({name})")


def _description(t: FakeTensor) -> tuple:
    """Everything about a fake tensor the memo's remade results must match."""
    return (
        t.shape, t.stride(), t.storage_offset(), t.dtype, t.fake_device, t.requires_grad, t.is_inference(),
        is_view(t), t.untyped_storage().nbytes(), t.is_contiguous(), type(t),
    )


def _input_val(arg: Any) -> Any:
    """An argument's entry in ``eager_input_vals``, as make_fx writes it."""
    if not isinstance(arg, torch.fx.Node) or "val" not in arg.meta:
        return None
    val = arg.meta["val"]
    if isinstance(val, torch.Tensor) and not isinstance(val, FakeTensor):
        return None
    return fake_value_of(val)


def record(
    fn: Callable[..., Sequence[Any]],
    root: torch.nn.Module,
    inputs: Sequence[Any],
    on_node: NodeHook | None,
    shape_env: Any,
    *,
    training: bool = False,
    direct_pre_dispatch: bool = True,
) -> torch.fx.GraphModule:
    """The graph of ``fn(*inputs)`` (flat inputs, flat outputs) as make_fx would record it
    with ``root``'s module stack, or ``CannotRecord``.  Runs inside the fake mode whose
    ShapeEnv is ``shape_env``.  ``training``: as make_fx with ``pre_dispatch=True`` records it
    (torch.export's training IR), its pre-dispatch calls handed to the recorder
    directly (``patches.direct_pre_dispatch``) unless ``direct_pre_dispatch`` is False."""
    recorder = (TrainingRecorder if training else Recorder)(root, on_node, shape_env)
    recorder.fake_mode = active_fake_mode()
    if recorder.fake_mode is not None:
        recorder._memo = _memo_for(recorder.fake_mode)
    for i, value in enumerate(inputs):
        recorder.placeholder(i, value)
    with contextlib.ExitStack() as modes:
        modes.enter_context(recording(recorder))
        modes.enter_context(fast_recording(recorder.call_module, recorder.on_hop))
        if training and direct_pre_dispatch:
            modes.enter_context(handed_straight_to(lambda mode: mode is recorder))
            # as make_fx enters them: per-key modes need the Python dispatcher
            modes.enter_context(enable_python_dispatcher())
            modes.enter_context(_GradRegions(recorder))
        modes.enter_context(recorder)
        if training and recorder.fake_mode is not None:
            modes.enter_context(_ServedBelowAutograd(recorder))
        try:
            outputs = fn(*inputs)
        finally:
            refused = recorder.refused
    if refused is not None:
        raise CannotRecord(refused)
    recorder.output(outputs)
    gm = graph_module_of(recorder.constants, recorder.graph)
    gm.shape_env = shape_env
    return gm


_MEMOS: dict[Any, dict[tuple, tuple | None]] = {}
"""The process's memo of fake results, per ShapeEnv settings (which can change what an op
makes of the same arguments, as torch's fake-tensor cache keys on them too)."""

_MEMO_LIMIT = 20_000
"""Entries kept before the memo starts over: about 500 bytes each with their keys, 10 MB at
most (a GPT-2 of any depth makes about 60, its layers repeating the same calls)."""


def _memo_for(fake_mode: Any) -> dict[tuple, tuple | None]:
    settings = fake_mode.shape_env.settings if fake_mode.shape_env is not None else None
    memo = _MEMOS.get(settings)
    if memo is None or len(memo) > _MEMO_LIMIT:
        memo = _MEMOS[settings] = {}
    return memo


def forget_fake_results() -> None:
    """Empty the memo of fake results that traces share (see ``Recorder._served``); for
    after registering a new fake or meta kernel for a built-in op.  Empties the symbolic
    memo's shared part and the meta-kernel verdicts too."""
    from .meta_kernels import forget_meta_verdicts

    _MEMOS.clear()
    forget_shared()
    forget_meta_verdicts()
