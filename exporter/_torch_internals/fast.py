"""The torch internals only the fast paths read (``exporter.trace.fast``): fake tensors made
directly, make_fx's node metadata, the pre-dispatch hand-over, ShapeEnv state.

Nothing outside ``exporter.trace.fast`` imports this module, and the fast paths are imported
only when switched on: a release that moved these names still exports, on the plain path."""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._C import DispatchKey
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import (
    FakeTensor,
    FakeTensorConfig,
    FakeTensorMode,
    in_kernel_invocation_manager,
)
from torch.fx.experimental import proxy_tensor

__all__ = [
    "BATCH_NORMS",
    "PRE_DISPATCH_LOOKUP",
    "storage_key",
    "fx_tracing_flag",
    "is_compiled_module",
    "active_fake_mode",
    "autograd_would_have_expanded",
    "default_device",
    "fake_cache_would_serve",
    "composite_on_meta",
    "fake_empty",
    "has_symbolic_layout",
    "fake_flat_restrided",
    "fake_empty_strided",
    "fake_of_plain_tensor",
    "fake_view_of",
    "fake_value_of",
    "fresh_symint",
    "graph_module_of",
    "is_make_fx_mode",
    "lazily_known",
    "lazy_graph_module",
    "meta_kernel_for",
    "MAKE_FX_TENSOR_METADATA",
    "needs_exact_strides",
    "node_name_for",
    "pre_dispatch_handler",
    "PreDispatchTorchFunctionMode",
    "program_module_factory",
    "PROXY_MODE_KEY",
    "ProxyTorchDispatchMode",
    "set_proxy_mode_fields",
    "shape_env_facts",
    "shape_env_version",
    "snapshot_fake",
    "symint_of",
    "takes_python_decomposition",
    "tensor_meta",
    "tensor_metadata_with",
]


def pre_dispatch_handler(op: OpOverload, accepts: Any) -> Any:
    """A kernel for ``op`` at the pre-dispatch key that hands each call straight to the mode
    there, or None unless one mode sits alone in the pre-dispatch slots and ``accepts(mode)``.

    torch's own kernel there (``OpOverload._get_dispatch``) does the same in the same
    order: take the mode out of its slot (turning the key off when no mode is left), call
    it, put it back.  It builds the kernel and a context manager afresh for every call and
    flattens the arguments to list the tensor types, on every call of a training-IR trace.  The mode must not read ``types`` (given as ``()``)."""
    state = torch._ops.mode_stack_state_for_pre_dispatch()
    mode = state.get(0)
    if (
        mode is None
        or state.get(1) is not None
        or state._schema_check_mode is not None
        or not accepts(mode)
        or torch._C._dispatch_tls_is_dispatch_key_excluded(DispatchKey.Python)
    ):
        return None
    include = torch._C._dispatch_tls_set_dispatch_key_included
    dispatch = mode.__torch_dispatch__

    def handler(*args: Any, **kwargs: Any) -> Any:
        state.set(0, None)
        include(DispatchKey.PreDispatch, False)
        try:
            return dispatch(op, (), args, kwargs)
        finally:
            state.set(0, mode)
            include(DispatchKey.PreDispatch, True)

    return handler


def is_make_fx_mode(mode: Any) -> bool:
    """Whether ``mode`` is make_fx's own dispatch mode (not a subclass), which reads no
    ``types`` in its ``__torch_dispatch__``."""
    return type(mode) is proxy_tensor.ProxyTorchDispatchMode




def graph_module_of(root: torch.nn.Module, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    """A graph module over ``graph`` whose attributes live on ``root``, made as make_fx makes
    its result (lazily compiled while ``use_lazy_graph_module(True)`` is in effect)."""
    from torch.fx._lazy_graph_module import _make_graph_module

    return _make_graph_module(root, graph)


def active_fake_mode() -> FakeTensorMode | None:
    """The fake mode on the dispatch-mode stack, if one is."""
    return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)


def default_device() -> torch.device:
    """The device factory calls default to (``torch.set_default_device``)."""
    return torch._C._get_default_device()


def fake_cache_would_serve(mode: FakeTensorMode, func: OpOverload, args: tuple, kwargs: dict) -> bool:
    """Whether the fake-tensor cache accepts a call of ``func`` on these arguments as
    cacheable (its per-op rules: no data-dependent or dynamic output shape, no in-place
    view change, no lift, built-in ops only, ...)."""
    from torch._subclasses.fake_tensor import _BypassDispatchCache

    try:
        mode._validate_cache_key(func, args, kwargs)
    except _BypassDispatchCache:
        return False
    return True


def fake_of_plain_tensor(mode: FakeTensorMode, t: torch.Tensor) -> FakeTensor | None:
    """``mode.from_tensor(t, static_shapes=True)`` for a plain tensor, made directly without
    describing every attribute first, or None when ``t`` is not plain (the caller converts it
    with ``from_tensor``).

    Plain: a CPU ``torch.Tensor`` or ``nn.Parameter``, strided, a leaf with no ``.grad``, not
    a view, at offset 0 of a non-empty storage no tensor converted in this mode shares, not
    an inference, conjugate or negative-bit tensor, of a dtype meta tensors carry.  For it
    torch's converter describes every attribute, then makes an empty fake tensor of the same
    sizes and strides with storage of its own; the same is made here, and recorded in the
    converter's tensor and storage memos as torch records it, so that a later conversion of
    ``t``, or of a tensor sharing its storage, finds it.
    """
    if (
        (type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter)
        or t.device.type != "cpu"
        or t.layout is not torch.strided
        or t.is_quantized
        or not t.is_leaf
        or t._is_view()
        or t.storage_offset() != 0
        or t.is_inference()
        or t.is_conj()
        or t.is_neg()
        or t.grad is not None
        or (t.requires_grad and t.grad_dtype != t.dtype)
        or mode.propagate_real_tensors
        or FakeTensorConfig.debug
    ):
        return None
    converter = mode.fake_tensor_converter
    meta = converter.meta_converter
    describer = meta.describer
    if t in describer.lookup_tensor:
        return None  # converted before: from_tensor answers from its memo
    storage = t.untyped_storage()
    if storage.nbytes() == 0 or storage in describer.lookup_storage:
        return None
    with torch._C._DisableTorchDispatch():
        empty = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    fake = _as_fake(mode, empty, t.device, t.requires_grad, None)
    if type(t) is torch.nn.Parameter:
        fake._is_param = True
    if getattr(t, "_is_buffer", False):
        fake._is_buffer = True
        if hasattr(t, "persistent"):
            fake.persistent = t.persistent
    meta.hit += 1
    meta.arg_cnt += 1
    meta.storage_memo[describer.get_storage_id(storage)] = fake.untyped_storage()
    meta.tensor_memo[describer.get_tensor_id(t)] = fake
    return fake


def fake_empty_strided(
    mode: FakeTensorMode, shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype, device: torch.device,
    requires_grad: bool,
) -> FakeTensor:
    """A fake tensor of this layout with storage of its own, as the fake-tensor cache makes
    one on a hit."""
    with torch._C._DisableTorchDispatch():  # reaches no mode: a meta tensor
        empty = torch.empty_strided(shape, stride, dtype=dtype, device="meta", requires_grad=requires_grad)
    if FakeTensorConfig.debug:  # each tensor records where it was made
        return FakeTensor(mode, empty, device)
    return _as_fake(mode, empty, device, requires_grad, None)


def fake_view_of(
    mode: FakeTensorMode, base: FakeTensor, shape: tuple[int, ...], stride: tuple[int, ...], offset: int,
    dtype: torch.dtype, device: torch.device, requires_grad: bool,
) -> FakeTensor:
    """A fake tensor of this layout over ``base``'s storage, as the fake-tensor cache makes a
    view op's result on a hit (below autograd, which makes it a view of ``base``).

    Of ``base``'s dtype it is ``as_strided`` on ``base`` as a meta tensor, as view kernels
    make their results: on symbolic sizes far cheaper than ``set_``, which checks the layout
    against the storage's size with a dozen symbolic computations."""
    if dtype == base.dtype:
        with in_kernel_invocation_manager(mode), torch._C._DisableTorchDispatch():  # base as meta
            empty = base.as_strided(shape, stride, offset)
        if FakeTensorConfig.debug:
            return FakeTensor(mode, empty.requires_grad_(requires_grad), device)
        return _as_fake(mode, empty, device, requires_grad, None)
    with torch._C._DisableTorchDispatch():  # reaches no mode: meta tensors
        empty = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        empty.set_(base.untyped_storage(), offset, shape, stride)
    if FakeTensorConfig.debug:  # each tensor records where it was made
        return FakeTensor(mode, empty.requires_grad_(requires_grad), device)
    return _as_fake(mode, empty, device, requires_grad, None)


def fake_flat_restrided(
    mode: FakeTensorMode, numel: int, shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype,
    device: torch.device,
) -> FakeTensor:
    """A fake tensor of this layout over new storage of ``numel`` elements, as kernels make
    their results with ``empty`` or ``empty_permuted``: the storage's size is the number of
    elements (on symbolic sizes another expression than ``fake_empty_strided``'s extent of the
    strides), and on symbolic sizes it is cheaper to make."""
    with torch._C._DisableTorchDispatch():  # reaches no mode: meta tensors
        empty = torch.empty((numel,), dtype=dtype, device="meta").as_strided(shape, stride, 0)
    if FakeTensorConfig.debug:
        return FakeTensor(mode, empty, device)
    return _as_fake(mode, empty, device, False, None)


def fake_empty(mode: FakeTensorMode, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> FakeTensor:
    """A contiguous fake tensor of ``shape`` over new storage, as kernels make their results
    with ``empty(shape)``: the one way that also works out (and keeps) that it is contiguous
    while it is made, as those results have."""
    with torch._C._DisableTorchDispatch():  # reaches no mode: a meta tensor
        empty = torch.empty(shape, dtype=dtype, device="meta")
    if FakeTensorConfig.debug:
        return FakeTensor(mode, empty, device)
    return _as_fake(mode, empty, device, False, None)


class _Computes(Exception):
    pass


def _stop_at_first_call(frame: Any, event: str, arg: Any) -> None:
    # A held answer is wrapped for Python in a SymInt: its __init__, and what it calls
    # (torch 2.15: ``typing.cast``), compute nothing.
    if event == "call" and frame.f_code is not _SYMINT_INIT and frame.f_back.f_code is not _SYMINT_INIT:
        raise _Computes(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")


_SYMINT_INIT = torch.SymInt.__init__.__code__


def lazily_known(t: torch.Tensor) -> tuple[str, str]:
    """What working out ``t``'s element count and its contiguity would start with, on
    symbolic sizes: "" when ``t`` already holds the answer (a symbolic one is only wrapped
    in a ``SymInt`` on its way out), else the first Python function torch calls to compute
    it.  Such answers are computed once per tensor and kept; a
    kernel's result may hold them or not, and when it does not the first question (from
    the model, under make_fx) records the arithmetic in the graph.

    Asked of a copy of ``t``'s metadata, each question stopped before its first Python call
    (a trace function of this thread raises), so nothing is computed, guarded or kept."""
    with torch._C._DisableTorchDispatch():
        copy = t.detach()  # copies the answers t holds
    answers = []
    previous = sys.gettrace()
    for ask in (copy.numel, copy.is_contiguous):
        sys.settrace(_stop_at_first_call)
        try:
            ask()
            answers.append("")
        except _Computes as stopped:
            answers.append(str(stopped))
        finally:
            sys.settrace(previous)
    return answers[0], answers[1]


def _as_fake(
    mode: FakeTensorMode, elem: torch.Tensor, device: torch.device, requires_grad: bool, real: torch.Tensor | None
) -> FakeTensor:
    """``FakeTensor(mode, elem, device, real_tensor=real)`` with ``requires_grad``, made without
    the constructor's checks; ``device`` is a fake tensor's (normalized).
    Not for ``FakeTensorConfig.debug``, where each tensor records where it was made.

    The constructor re-checks its arguments, sets each attribute through a descriptor, and
    reads two configs in ``__init__`` (the latter for torch.export's fake-tensor leak
    report, which exporter does not make).  Here the new tensor takes the state torch's
    constructor gave one tensor, with its own mode, device and real tensor.
    """
    global _FAKE_STATE
    if _FAKE_STATE is None:
        with torch._C._DisableTorchDispatch():
            made = FakeTensor(mode, torch.empty(0, device="meta"), torch.device("cpu"))
        _FAKE_STATE = {k: v for k, v in made.__dict__.items() if k not in _OWN_STATE}
    with torch._C._DisableTorchDispatch():  # the detach inside reaches no mode
        fake = torch.Tensor._make_subclass(
            FakeTensor, elem, requires_grad, dispatch_device=True, device_for_backend_keys=device
        )
    if mode._allow_unsafe_data_ptr_access:
        torch._C._set_warn_deprecated_on_mutable_data_ptr(fake)
    else:
        torch._C._set_throw_on_mutable_data_ptr(fake)
    fake.__dict__.update(_FAKE_STATE)
    fake._fake_device = device
    fake.fake_mode = mode
    fake.real_tensor = real
    return fake


_OWN_STATE = frozenset(("_fake_device", "fake_mode", "real_tensor"))
_FAKE_STATE: dict[str, Any] | None = None
"""The attributes torch's constructor gives every fake tensor, other than ``_OWN_STATE``
(memos, constant, ...: ``None`` in a tensor just made)."""


def program_module_factory() -> tuple[Any, str]:
    """Where ``ExportedProgram.__init__`` finds the function that wraps its graph in a graph
    module: (module, attribute name)."""
    import torch.export.exported_program as exported_program

    return exported_program, "_create_graph_module_for_export"


def lazy_graph_module(root: torch.nn.Module, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    """A graph module over ``graph`` that generates and compiles its Python code on first
    use (torch.fx's ``_LazyGraphModule``, as inductor makes its graph modules)."""
    from torch.fx._lazy_graph_module import _LazyGraphModule

    return _LazyGraphModule(root, graph)


def node_name_for(graph: torch.fx.Graph, name: str) -> str:
    """The name make_fx asks for a node calling an op named ``name`` (``__and__`` becomes
    ``and``, ``addMM`` ``add_mm``); the graph then avoids builtins' names (``max_1``) and numbers repeats."""
    return graph._target_to_str(name)


def snapshot_fake(value: torch.Tensor, include_real: bool = False) -> torch.Tensor:
    """A detached copy of a fake tensor's metadata, as make_fx stores in ``meta['val']``:
    a fake tensor of the same mode over the same storage, sizes, strides and offset,
    not requiring grad (``include_real``: keeping the real tensor it carries)."""
    if type(value) is not FakeTensor or FakeTensorConfig.debug:
        return proxy_tensor.snapshot_fake(value, include_real=include_real)
    return _as_fake(value.fake_mode, value, value.fake_device, False, value.real_tensor if include_real else None)


def fake_value_of(value: torch.Tensor) -> torch.Tensor:
    """The ``meta['val']`` make_fx gives a ``get_attr`` node reading a real tensor: an
    empty fake tensor of its size, strides, dtype and device, in the active fake mode."""
    return proxy_tensor.extract_val(value)


def needs_exact_strides(op: OpOverload) -> bool:
    """Whether make_fx records ``eager_input_vals`` for calls of ``op`` (its layout constraint
    is ``needs_exact_strides``: custom ops by default)."""
    return proxy_tensor._should_save_eager_input_vals(op, None)


def tensor_meta(value: torch.Tensor) -> Any:
    """The ``meta['tensor_meta']`` make_fx records for a tensor value."""
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    return _extract_tensor_metadata(value)


MAKE_FX_TENSOR_METADATA = (proxy_tensor, "_extract_tensor_metadata")
"""Where make_fx looks up the function that makes each node's ``tensor_meta`` (owner,
attribute name), for ``patches`` to replace."""


def tensor_metadata_with(value: torch.Tensor, memory_format: torch.memory_format | None) -> Any:
    """The ``tensor_meta`` torch's ``_extract_tensor_metadata`` makes for a plain, strided,
    unquantized tensor whose memory format is ``memory_format``, without working it out."""
    from torch.fx.passes.shape_prop import TensorMetadata

    return TensorMetadata(value.shape, value.dtype, value.requires_grad, value.stride(), memory_format, False, {})


def shape_env_version(shape_env: Any) -> tuple:
    """A value that changes whenever the ShapeEnv learns a fact that may change how a size
    expression evaluates: a replacement, a divisibility or a runtime assert (torch's own
    version counter), a guard (which may narrow a range without touching that counter) or
    a new symbol.  It only grows within one ShapeEnv; across ShapeEnvs it says nothing (see
    ``shape_env_facts``)."""
    return (
        shape_env._version_counter,
        len(shape_env.guards),
        len(shape_env.axioms),
        len(shape_env.var_to_range),
        shape_env.num_deferred_runtime_asserts,
        shape_env.frozen,
        shape_env.runtime_asserts_frozen,
    )


def shape_env_facts(shape_env: Any) -> tuple:
    """Everything a ShapeEnv holds that can decide how a backed size expression evaluates,
    or what a kernel computing on it makes: its settings, every guard and axiom, each
    symbol's range and example value, the replacements and divisibilities, the runtime
    asserts.  Two ShapeEnvs with equal facts answer every question about expressions over
    backed symbols alike.  Hashable; sympy expressions compare structurally."""
    from torch.fx.experimental import _config as shapes_config

    return (
        shape_env.settings,
        shapes_config.backed_size_oblivious,
        shape_env_version(shape_env)[1:],
        tuple((g.expr, g.size_oblivious) for g in shape_env.guards),
        tuple(shape_env.axioms.items()),
        tuple(shape_env.var_to_range.items()),
        tuple(shape_env.backed_var_to_val.items()),
        tuple(shape_env.var_to_hint_override.items()),
        tuple(shape_env.replacements.items()),
        frozenset(shape_env.divisible),
        frozenset(shape_env.size_like),
        tuple((k, tuple(ra.expr for ra in v)) for k, v in shape_env.deferred_runtime_asserts.items()),
    )


def autograd_would_have_expanded(op: OpOverload, flat_args: list[Any]) -> bool:
    """Whether autograd would have expanded ``op``'s composite kernel for these arguments
    (an op reaching the Python key below autograd is expanded there instead, as make_fx does)."""
    from torch.utils._python_dispatch import autograd_would_have_decomposed

    return autograd_would_have_decomposed(op, flat_args)

PROXY_MODE_KEY = torch._C._TorchDispatchModeKey.PROXY
"""The infra-mode slot make_fx's dispatch mode occupies (``get_proxy_mode()`` reads it)."""

ProxyTorchDispatchMode = proxy_tensor.ProxyTorchDispatchMode
"""make_fx's dispatch mode.  torch accepts only its instances in the pre-dispatch slot
(``torch._ops._set_mode_pre_dispatch``), so a recorder there must be one."""


def set_proxy_mode_fields(mode: ProxyTorchDispatchMode) -> None:
    """Set the private fields torch reads from a proxy mode on ``mode``, one of a subclass
    whose ``__init__`` does not run ``ProxyTorchDispatchMode.__init__``, to the values that
    sets for a pre-dispatch trace: its infra-mode slot, no decomposition tables entered,
    no fake constants allowed, an error on data-dependent ops."""
    mode._mode_key = PROXY_MODE_KEY
    mode._decomposition_table_stack = []
    mode._allow_fake_constant = False
    mode._error_on_data_dependent_ops = True

PreDispatchTorchFunctionMode = proxy_tensor.PreDispatchTorchFunctionMode
"""make_fx's function mode for pre-dispatch traces: records ``_set_grad_enabled`` and the
autocast enter/exit calls through ``self.tracer.create_node``.  ``torch.autocast`` reports
its regions only to instances of this class."""


def fresh_symint(size: torch.SymInt) -> torch.SymInt:
    """A new SymInt equal to ``size`` (same expression, hint and ShapeEnv) that is a distinct
    object: make_fx tracks each size object once, from the first tensor it sees it in."""
    node = size.node
    return torch.SymInt(node.with_shape_env(node.shape_env))


def symint_of(shape_env: Any, expr: Any, hint: int | None) -> torch.SymInt:
    """A SymInt of ``shape_env`` for the expression ``expr`` (over its symbols), with
    ``hint`` as its example value."""
    from torch.fx.experimental.sym_node import SymNode

    return torch.SymInt(SymNode(expr, shape_env, int, hint))


def is_compiled_module(module: torch.nn.Module) -> bool:
    """A ``torch.compile``-d module or a graph module, which make_fx's module stack skips."""
    if isinstance(module, torch.fx.GraphModule):
        return True
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame is not None and isinstance(module, eval_frame.OptimizedModule)


def fx_tracing_flag(value: bool) -> bool:
    """Set torch.fx's "an fx trace is running" flag (``is_fx_tracing()``), which make_fx sets
    for the length of its trace; returns the previous value.  The flag is a module global on
    2.13 and 2.14 and per thread from 2.15 on (set and read through functions)."""
    from torch.fx import _symbolic_trace

    if hasattr(_symbolic_trace, "_set_is_fx_tracing"):  # 2.15 and later: per thread
        previous = _symbolic_trace._get_is_fx_tracing()
        _symbolic_trace._set_is_fx_tracing(value)
        return previous
    previous = _symbolic_trace._is_fx_tracing_flag  # 2.13, 2.14: one flag for the process
    _symbolic_trace._is_fx_tracing_flag = value
    return previous


PRE_DISPATCH_LOOKUP = (OpOverload, "_get_dispatch")
"""Where an op finds its kernel for a dispatch key, ``lookup(op, key)`` (owner, attribute name),
for ``direct_pre_dispatch`` to replace."""


def storage_key(t: torch.Tensor) -> int:
    """An identity of ``t``'s storage, equal for every tensor over the same storage."""
    return t.untyped_storage()._cdata


def has_symbolic_layout(t: torch.Tensor) -> bool:
    """Whether a size, stride or offset of ``t`` is symbolic."""
    return t._has_symbolic_sizes_strides


def takes_python_decomposition(mode: FakeTensorMode, func: OpOverload) -> bool:
    """Whether ``mode`` computes a static call of ``func`` by running a Python decomposition
    under fake tensors though the op has a C++ meta kernel: an op with no Python meta
    registration whose table decomposition is ``torch._decomp``'s own (fake tensors prefer
    those: batch norm, ``addmm`` and ``gelu`` among them)."""
    from torch._decomp import decomposition_table, meta_table
    from torch._subclasses.fake_tensor import torch_decomp_decompositions

    name = func.name()
    return (
        func not in meta_table
        and func in decomposition_table
        and not mode.cpp_meta_supports_symint(func)
        and torch_decomp_decompositions(func)
        and torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta")
        and not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")
    )


def composite_on_meta(mode: FakeTensorMode, func: OpOverload, args: tuple, kwargs: dict) -> Any:
    """``func``'s results for fake ``args``, computed by its C++ kernels on meta tensors of the
    arguments' layouts, with no mode and no Python dispatcher in the way: for a composite op
    (``aten.linear``: ``t`` and ``mm`` under the hood) a few C++ calls, where fake tensors
    run each op of its expansion through Python.  The results are fake tensors of the
    results' layouts over storage of their own; ``func`` raises where an op inside has no
    meta kernel."""
    devices = []

    def twin(t: FakeTensor) -> torch.Tensor:
        devices.append(t.fake_device)
        with torch._C._DisableTorchDispatch():
            if t.storage_offset() == 0:
                return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
            extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
            base = torch.empty(t.storage_offset() + extent, dtype=t.dtype, device="meta")
            return base.as_strided(t.shape, t.stride(), t.storage_offset())

    meta_args, meta_kwargs = pytree.tree_map_only(FakeTensor, twin, (args, kwargs))
    with torch._C._DisablePythonDispatcher(), torch._C._DisableTorchDispatch(), torch.no_grad():
        out = func(*meta_args, **meta_kwargs)
    device = devices[0] if devices else torch.device("cpu")
    return pytree.tree_map_only(
        torch.Tensor, lambda m: fake_empty_strided(mode, tuple(m.shape), m.stride(), m.dtype, device, False), out
    )


class meta_kernel_for:
    """Within the block, ``mode`` computes ``func`` with its C++ meta kernel, as it computes
    every op without a Python decomposition (``cpp_meta_supports_symint`` is the question
    that sends a call past the decomposition; answered on this one mode object)."""

    def __init__(self, mode: FakeTensorMode, func: OpOverload) -> None:
        self.mode, self.func = mode, func
        self.previous: Any = None

    def __enter__(self) -> None:
        mode, func = self.mode, self.func
        self.previous = mode.__dict__.get("cpp_meta_supports_symint")
        asked = mode.cpp_meta_supports_symint
        mode.cpp_meta_supports_symint = lambda f: f is func or asked(f)

    def __exit__(self, *exc: Any) -> None:
        if self.previous is None:
            del self.mode.cpp_meta_supports_symint
        else:
            self.mode.cpp_meta_supports_symint = self.previous


BATCH_NORMS: dict[OpOverload, int | None] = {
    torch.ops.aten._native_batch_norm_legit_no_training.default: None,
    torch.ops.aten._native_batch_norm_legit.default: 5,
    torch.ops.aten._native_batch_norm_legit.no_stats: 3,
}
"""The batch norms a model's ``batch_norm`` reaches below autograd -> the position of their
``training`` argument (None: eval mode always)."""
