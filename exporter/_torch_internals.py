"""Every private torch API exporter leans on, imported or wrapped in this one module.

exporter builds on torch's tracing primitives, and several of them live behind
underscored names that move between releases: fake and functional tensor internals,
dispatcher kernel tables, the module-stack tracer, Source data classes the ShapeEnv
keys sizes by, Dim hint classes.  Nothing else in exporter imports an underscored torch
module or reads an underscored torch attribute; a torch upgrade starts here.
(``torch.utils._pytree`` is the exception: it is the pytree API every torch user calls.)
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch._C import DispatchKey, _AutoDispatchBelowAutograd
from torch._decomp import _should_decompose_because_unsafe_op
from torch._dispatch.python import enable_python_dispatcher
from torch._guards import GuardSource, Source, TracingContext, tracing
from torch._higher_order_ops.effects import has_effects
from torch._library.utils import has_fake_kernel, is_builtin as is_builtin_op
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
from torch._prims_common import compare_tensor_meta
from torch._subclasses import fake_impls, fake_utils
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorConfig,
    FakeTensorMode,
    UnsupportedOperatorException,
    in_kernel_invocation_manager,
)
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.export.dynamic_shapes import Dim, _DerivedDim as DerivedDim, _DimHint as DimHint, _DimHintType as DimHintType
from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
from torch.fx._lazy_graph_module import _use_lazy_graph_module as use_lazy_graph_module
from torch.fx._pytree import register_pytree_flatten_spec as register_flatten_spec
from torch.fx.experimental import proxy_tensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import (
    ConstraintViolationError,
    DimDynamic,
    EqualityConstraint,
    GuardOnDataDependentSymNode,
    RelaxedUnspecConstraint,
    ShapeEnv,
    StatelessSymbolicContext,
    StrictMinMaxConstraint,
    SymIntSymbolicContext,
    free_unbacked_symbols,
)
from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts
from torch.nn.utils.stateless import _reparametrize_module as reparametrize_module
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._sympy.functions import Max as SizeMax, Min as SizeMin
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

__all__ = [
    "COMPOSITE_KEY",
    "ENTER_AUTOCAST",
    "EXIT_AUTOCAST",
    "PREDISPATCH_FUNCTIONS",
    "SET_GRAD_ENABLED",
    "ConstraintViolationError",
    "DataDependentOutputException",
    "DerivedDim",
    "Dim",
    "DimDynamic",
    "DimHint",
    "DimHintType",
    "DispatchKey",
    "DynamicOutputShapeException",
    "EqualityConstraint",
    "FakeTensor",
    "FakeTensorMode",
    "FunctionalTensor",
    "FunctionalTensorMode",
    "GuardOnDataDependentSymNode",
    "GuardSource",
    "HigherOrderOperator",
    "ModuleCallEntry",
    "ModuleCallSignature",
    "OpOverload",
    "OpOverloadPacket",
    "RelaxedUnspecConstraint",
    "ShapeEnv",
    "Source",
    "StatelessSymbolicContext",
    "StrictMinMaxConstraint",
    "SymIntSymbolicContext",
    "TorchDispatchMode",
    "TracingContext",
    "UnsupportedOperatorException",
    "ValueRanges",
    "autograd_visible",
    "below_autograd",
    "AUTOCAST_DEVICES",
    "autocast_keys_excluded",
    "call_at_key",
    "clear_dispatch_cache",
    "compiler_flags",
    "composite_registrations",
    "effect_tokens",
    "enable_python_dispatcher",
    "fake_impls",
    "free_unbacked_symbols",
    "functional_mode",
    "functional_state",
    "has_fake_kernel",
    "is_builtin_op",
    "on_real_value_decision",
    "compare_tensor_meta",
    "constant_source",
    "fake_utils",
    "forget_compiled",
    "real_tensor_propagation",
    "runtime_check",
    "has_composite_kernel",
    "has_effects",
    "hop_compile_module",
    "insert_deferred_runtime_asserts",
    "is_traceable_wrapper_subclass",
    "int_oo",
    "SizeMax",
    "SizeMin",
    "loaded_dynamo_config",
    "dynamo_compile_lock",
    "load_what_shape_envs_load",
    "make_fx",
    "MAKE_FX_TENSOR_METADATA",
    "graph_module_of",
    "active_fake_mode",
    "fake_cache_would_serve",
    "default_device",
    "fake_dispatch_through",
    "fake_fresh",
    "fake_contiguous",
    "fake_like",
    "fake_of_plain_tensor",
    "fake_over",
    "lazy_graph_module",
    "program_module_factory",
    "node_name_for",
    "snapshot_fake",
    "fake_value_of",
    "needs_exact_strides",
    "tensor_meta",
    "tensor_metadata_with",
    "lazily_known",
    "shape_env_facts",
    "shape_env_version",
    "symint_of",
    "autograd_would_have_expanded",
    "fx_tracing_flag",
    "PRE_DISPATCH",
    "PROXY_MODE_KEY",
    "ProxyTorchDispatchMode",
    "PreDispatchTorchFunctionMode",
    "outside_pre_dispatch",
    "pre_dispatch_handler",
    "real_clone",
    "real_copy_into",
    "tensors_written",
    "is_make_fx_mode",
    "is_compiled_module",
    "module_stack_tracer",
    "op_implementation_dirs",
    "proxy_tensor",
    "raw_expr",
    "fresh_symint",
    "record_module_calls",
    "register_flatten_spec",
    "reparametrize_module",
    "set_compiler_flags",
    "size_source",
    "should_decompose_because_unsafe",
    "stack_trace_anchors",
    "sym_sqrt",
    "symbolic_tensor",
    "traced_graph",
    "traced_node",
    "tracing",
    "training_dialect",
    "unwrap_functional",
    "uninteresting_files",
    "use_lazy_graph_module",
    # -- graph node names (speed work, issue 10)
    "rename_node",
    "take_name",
    # -- AOTInductor packages (command line --aoti, issue 11)
    "aoti_compile_package",
    "aoti_load_package",
]

runtime_check = torch._check
"""``torch._check``: a condition on sizes the program checks when it runs (no guard)."""

COMPOSITE_KEY = DispatchKey.CompositeImplicitAutograd

should_decompose_because_unsafe = _should_decompose_because_unsafe_op
sym_sqrt = torch._sym_sqrt
below_autograd = _AutoDispatchBelowAutograd


# -- symbol sources --------------------------------------------------------------------------
# Dynamo's Source data classes, imported when first asked for: importing torch._dynamo.source
# imports all of Dynamo (half a second), and a static export never needs them.  A dynamic
# export does, and so does the ShapeEnv itself (it imports the module when it gives a tensor
# symbolic sizes and when it produces guards), so asking here adds no import it would not make.


def size_source(base: Source, dim: int) -> Source:
    """The source ShapeEnv names ``base.size()[dim]`` by; equal to the one it makes itself, so
    the equalities handed to it match its own sizes."""
    from torch._dynamo.source import TensorProperty, TensorPropertySource

    return TensorPropertySource(base, TensorProperty.SIZE, dim)


def constant_source(name: str) -> Source:
    """A source for a symbol that belongs to no input (guards never name it as an input)."""
    from torch._dynamo.source import ConstantSource

    return ConstantSource(name)


# -- the files a guard is never blamed on -------------------------------------------------

# torch's ``symbolic_shapes.uninteresting_files()``, module by module (torch 2.13), as paths
# under the torch package.  torch's function imports each module to ask for its file, and
# among them are Dynamo, inductor and torch.export's tracer: a large share of cold start for
# a list of names.  A frame can only come from a module that is loaded, so a path is enough.
_UNINTERESTING_MODULES = (
    "fx/experimental/symbolic_shapes.py",
    "export/_trace.py",
    "fx/experimental/recording.py",
    "fx/experimental/sym_node.py",
    "fx/interpreter.py",
    "fx/_symbolic_trace.py",
    "__init__.py",
    "_compile.py",
    "_dynamo/eval_frame.py",
    "_inductor/sizevars.py",
    "_library/custom_ops.py",
    "_library/fake_impl.py",
    "_subclasses/meta_utils.py",
    "_subclasses/fake_tensor.py",
    "_logging/_internal.py",
    "_logging/structured.py",
    # Dynamo's own (torch._dynamo.guards.uninteresting_files)
    "_dynamo/external_utils.py",
)
# Whole directories: every higher-order op, and Dynamo's polyfills (torch lists most of them).
_UNINTERESTING_DIRS = ("_higher_order_ops", "_dynamo/polyfills")


@functools.lru_cache(None)
def uninteresting_files() -> set[str]:
    """The files torch never attributes a guard to (``symbolic_shapes.uninteresting_files``),
    found without importing them."""
    root = os.path.dirname(torch.__file__)
    files = {os.path.join(root, *name.split("/")) for name in _UNINTERESTING_MODULES}
    for directory in _UNINTERESTING_DIRS:
        files.update(glob.glob(os.path.join(root, *directory.split("/"), "*.py")))
    return files | {"<string>"}


# -- the dispatcher ------------------------------------------------------------------------


def composite_registrations() -> tuple[str, ...]:
    """Qualified names of every op with a CompositeImplicitAutograd kernel."""
    return tuple(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd"))


def has_composite_kernel(op: OpOverload) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), COMPOSITE_KEY)


def _autocast_keys() -> tuple[tuple[Any, str], ...]:
    keys = []
    for name in dir(torch._C.DispatchKey):
        if name.startswith("Autocast"):
            device = name.removeprefix("Autocast").lower()
            device = torch._C._get_privateuse1_backend_name() if device == "privateuse1" else device
            try:
                torch.is_autocast_enabled(device)
            except RuntimeError:  # a device type autocast does not know
                continue
            keys.append((getattr(torch._C.DispatchKey, name), device))
    return tuple(keys)


_AUTOCAST_KEYS = _autocast_keys()


def autocast_keys_excluded() -> list[str]:
    """The device types whose autocast dispatch key is excluded just now.  That is the case
    while a device's autocast is off, and, while it is on, inside its kernels (for the
    casts of an op's inputs and the op they call): ``torch.is_autocast_enabled`` reads
    False in both, so telling them apart takes knowing whether the model turned it on."""
    excluded = torch._C._dispatch_tls_local_exclude_set()
    return [device for key, device in _AUTOCAST_KEYS if excluded.has(key)]


AUTOCAST_DEVICES = tuple(device for _, device in _AUTOCAST_KEYS)


@contextlib.contextmanager
def autograd_visible() -> Any:
    """Within the block, ops run through autograd again (grad mode on), as they do above it,
    though the block sits below autograd (inside a kernel or a fake-tensor rule)."""
    C = torch._C
    included = C._dispatch_tls_local_include_set()
    excluded = C._dispatch_tls_local_exclude_set()
    excluded = excluded - C.DispatchKeySet(C.DispatchKey.AutogradFunctionality) - C.DispatchKeySet(C.DispatchKey.ADInplaceOrView)
    with C._ForceDispatchKeyGuard(included, excluded), torch.enable_grad():
        yield


def outside_pre_dispatch() -> Any:
    """Within the block, calls skip the pre-dispatch key.  A mode below autograd that runs a
    kernel for autograd itself (the ``detach`` autograd.Function's ``apply`` asks for, outside
    any op the pre-dispatch trace is handling) would otherwise send the call back to the top,
    where the trace records it as if forward had called it."""
    return torch._C._ExcludeDispatchKeyGuard(_PRE_DISPATCH_SET)


_PRE_DISPATCH_SET = torch._C.DispatchKeySet(DispatchKey.PreDispatch)


def pre_dispatch_handler(op: OpOverload, accepts: Any) -> Any:
    """A kernel for ``op`` at the pre-dispatch key that hands each call straight to the mode
    there, or None unless one mode sits alone in the pre-dispatch slots and ``accepts(mode)``.

    torch's own kernel there (``OpOverload._get_dispatch``) does the same in the same
    order: take the mode out of its slot (turning the key off when no mode is left), call
    it, put it back.  It builds the kernel and a context manager afresh for every call and
    flattens the arguments to list the tensor types, which on a training-IR trace cost a
    sixth of the trace.  The mode must not read ``types`` (given as ``()``)."""
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


def tensors_written(op: OpOverload, args: tuple, kwargs: dict) -> list[Any]:
    """The tensors among ``op``'s arguments that its schema says it writes to (``self`` of an
    in-place op, ``out=``), in argument order."""
    written = []
    for i, argument in enumerate(op._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not argument.kwarg_only else kwargs.get(argument.name)
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, torch.Tensor):
                written.append(item)
    return written


def real_clone(t: torch.Tensor) -> torch.Tensor:
    """A copy of the real tensor ``t``, made with torch's own kernels whatever modes are on."""
    with torch._C._DisableTorchDispatch(), torch.no_grad():
        return t.detach().clone()


def real_copy_into(t: torch.Tensor, source: torch.Tensor) -> None:
    """Write ``source``'s values into the real tensor ``t`` with torch's own kernels, not
    recorded by autograd, whatever modes are on."""
    with torch._C._DisableTorchDispatch(), torch.no_grad():
        t.copy_(source)


def call_at_key(op: OpOverload, key: DispatchKey):
    """``op``'s kernel at ``key`` as a plain function."""
    return lambda *args, **kwargs: op._op_dk(key, *args, **kwargs)


def clear_dispatch_cache(op: OpOverload) -> None:
    """Forget ``op``'s cached kernel choices after its ``py_kernels`` table changed."""
    op._dispatch_cache.clear()


def op_implementation_dirs() -> tuple[str, ...]:
    """Path prefixes of the Python code implementing ATen ops for fake tensors:
    decompositions, references, prims, meta registrations and fake-tensor rules."""
    import torch._decomp
    import torch._meta_registrations
    import torch._prims
    import torch._prims_common
    import torch._refs

    def directory(module: Any) -> str:
        return os.path.dirname(os.path.abspath(module.__file__)) + os.sep

    files = (torch._meta_registrations, fake_impls)
    packages = (torch._decomp, torch._prims, torch._prims_common, torch._refs)
    return (*(directory(m) for m in packages), *(os.path.abspath(m.__file__) for m in files))


# -- process-wide flags --------------------------------------------------------------------


def compiler_flags() -> tuple[bool, bool]:
    """What ``torch.compiler.is_compiling()`` and ``is_exporting()`` report."""
    return torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag


def set_compiler_flags(compiling: bool, exporting: bool) -> None:
    torch.compiler._is_compiling_flag = compiling
    torch.compiler._is_exporting_flag = exporting


def loaded_dynamo_config() -> Any:
    """Dynamo's config module if something already imported Dynamo, else None.

    Higher-order ops such as ``torch.cond`` and ``while_loop`` compile their bodies with
    Dynamo; importing it ourselves would cost every export half a second."""
    return sys.modules.get("torch._dynamo.config")


def load_what_shape_envs_load() -> None:
    """Import what creating a ShapeEnv imports, which in torch 2.13 is all of Dynamo (through
    ``torch.fx.experimental.validator``, see tests/test_cold_start.py).  Every trace creates
    one; importing first lets a trace keep Dynamo's import out of its patches: Dynamo keeps
    references to ``max``, ``torch.tensor`` and others from import time."""
    import torch.fx.experimental.validator  # noqa: F401


def dynamo_compile_lock() -> Any:
    """The lock every Dynamo compilation in the process holds (``convert_frame.compile_lock``),
    or None while Dynamo is not loaded (then nothing can be compiling)."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    return getattr(convert_frame, "compile_lock", None)


# -- tracing internals ---------------------------------------------------------------------


def module_stack_tracer() -> type:
    """make_fx's tracer class when it records the module stack."""
    return proxy_tensor._ModuleStackTracer


def stack_trace_anchors() -> Any:
    """Code locations torch.fx keeps in stack traces besides ``forward`` frames."""
    return getattr(torch.fx.proxy, "_STACK_TRACE_ANCHORS", ())


def symbolic_tensor(data: Any, **kwargs: Any) -> torch.Tensor:
    """``torch.tensor(data)`` for data holding symbolic ints, recording the sizes instead of
    reading their example values (the Python reference implementation of ``torch.tensor``)."""
    return torch._refs.tensor(data, **kwargs)


def record_module_calls(
    fn: Any, root: torch.nn.Module, decompositions: dict, inputs: list[Any], *, pre_dispatch: bool = False
) -> torch.fx.GraphModule:
    """``make_fx`` of ``fn`` below autograd (above it with ``pre_dispatch``: composite ops
    such as ``aten.linear`` and grad-mode changes recorded as called), recording each
    node's module stack relative to ``root`` (the module ``fn`` runs) and no torch-function
    metadata."""
    fn._orig_mod = root
    return make_fx(
        fn,
        decompositions,
        record_module_stack=True,
        pre_dispatch=pre_dispatch,
        _disable_torch_fn_metadata_mode=True,
    )(*inputs)


# -- the fast recorder's pieces of make_fx ------------------------------------------------


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
    """``mode.from_tensor(t, static_shapes=True)`` for a plain tensor, about six times
    faster, or None when ``t`` is not plain (the caller converts it with ``from_tensor``).

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


def fake_like(
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


def fake_over(
    mode: FakeTensorMode, base: FakeTensor, shape: tuple[int, ...], stride: tuple[int, ...], offset: int,
    dtype: torch.dtype, device: torch.device, requires_grad: bool,
) -> FakeTensor:
    """A fake tensor of this layout over ``base``'s storage, as the fake-tensor cache makes a
    view op's result on a hit (below autograd, which makes it a view of ``base``).

    Of ``base``'s dtype it is ``as_strided`` on ``base`` as a meta tensor, as view kernels
    make their results: on symbolic sizes a twentieth of the cost of ``set_``, which checks
    the layout against the storage's size with a dozen symbolic computations."""
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


def fake_fresh(
    mode: FakeTensorMode, numel: int, shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype,
    device: torch.device,
) -> FakeTensor:
    """A fake tensor of this layout over new storage of ``numel`` elements, as kernels make
    their results with ``empty`` or ``empty_permuted``: the storage's size is the number of
    elements (on symbolic sizes another expression than ``fake_like``'s extent of the
    strides), and on symbolic sizes it costs half of ``fake_like``'s ``empty``."""
    with torch._C._DisableTorchDispatch():  # reaches no mode: meta tensors
        empty = torch.empty((numel,), dtype=dtype, device="meta").as_strided(shape, stride, 0)
    if FakeTensorConfig.debug:
        return FakeTensor(mode, empty, device)
    return _as_fake(mode, empty, device, False, None)


def fake_contiguous(mode: FakeTensorMode, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> FakeTensor:
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
    if event == "call" and frame.f_code is not _SYMINT_INIT:  # (a held answer, wrapped for Python)
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
    """``FakeTensor(mode, elem, device, real_tensor=real)`` with ``requires_grad``, made for
    about a fifth of the constructor's cost; ``device`` is a fake tensor's (normalized).
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


@contextlib.contextmanager
def fake_dispatch_through(mode: FakeTensorMode, wrapper: Any) -> Iterator[None]:
    """Within the block every op ``mode`` computes goes through ``wrapper(dispatch, func,
    types, args, kwargs)``, ``dispatch`` being the mode's own (what its
    ``__torch_dispatch__`` calls): an attribute of this one mode object, which no other mode
    sees.  Below every other mode, so the op has been recorded by any proxy mode above.
    Blocks nest: an inner block's wrapper sees each call first."""
    own = mode.dispatch
    previous = mode.__dict__.get("dispatch")  # an enclosing block's wrapper
    mode.dispatch = lambda func, types, args=(), kwargs=None: wrapper(own, func, types, args, kwargs)
    try:
        yield
    finally:
        if previous is None:
            del mode.dispatch
        else:
            mode.dispatch = previous


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


PRE_DISPATCH = DispatchKey.PreDispatch
"""The dispatch key above autograd where a pre-dispatch (training IR) trace records ops."""

PROXY_MODE_KEY = torch._C._TorchDispatchModeKey.PROXY
"""The infra-mode slot make_fx's dispatch mode occupies (``get_proxy_mode()`` reads it)."""

ProxyTorchDispatchMode = proxy_tensor.ProxyTorchDispatchMode
"""make_fx's dispatch mode.  torch accepts only its instances in the pre-dispatch slot
(``torch._ops._set_mode_pre_dispatch``), so a recorder there must be one."""

PreDispatchTorchFunctionMode = proxy_tensor.PreDispatchTorchFunctionMode
"""make_fx's function mode for pre-dispatch traces: records ``_set_grad_enabled`` and the
autocast enter/exit calls through ``self.tracer.create_node``.  ``torch.autocast`` reports
its regions only to instances of this class."""


def fx_tracing_flag(value: bool) -> bool:
    """Set torch.fx's process-wide "an fx trace is running" flag (``is_fx_tracing()``), which
    make_fx sets for the length of its trace; returns the previous value."""
    from torch.fx import _symbolic_trace

    previous = _symbolic_trace._is_fx_tracing_flag
    _symbolic_trace._is_fx_tracing_flag = value
    return previous


def is_compiled_module(module: torch.nn.Module) -> bool:
    """A ``torch.compile``-d module or a graph module, which make_fx's module stack skips."""
    if isinstance(module, torch.fx.GraphModule):
        return True
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame is not None and isinstance(module, eval_frame.OptimizedModule)


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


def raw_expr(size: torch.SymInt) -> Any:
    """The sympy expression a symbolic size was created with, before the ShapeEnv's
    replacements (``size.node.expr`` applies them)."""
    return size.node._expr


def traced_graph() -> torch.fx.Graph | None:
    """The graph the innermost active ``make_fx`` trace is recording, if one is."""
    mode = proxy_tensor.get_proxy_mode()
    return mode.tracer.graph if mode is not None else None


def traced_node(value: torch.Tensor) -> torch.fx.Node | None:
    """The node of the active ``make_fx`` trace that produced ``value`` (an unwrapped fake
    tensor), if the trace saw it."""
    mode = proxy_tensor.get_proxy_mode()
    if mode is None:
        return None
    slot = proxy_tensor.get_proxy_slot(value, mode.tracer, None)
    return slot.proxy.node if slot is not None else None


# -- functionalization ---------------------------------------------------------------------


def functional_mode() -> FunctionalTensorMode:
    """The functionalizing mode torch.export traces with (effect tokens discovered, not required)."""
    return FunctionalTensorMode(pre_dispatch=False, export=True, _allow_token_discovery=True)


def effect_tokens(mode: FunctionalTensorMode) -> list[Any]:
    """The side-effectful ops ``mode`` met, which would need effect tokens."""
    return list(mode._tokens)


def unwrap_functional(value: FunctionalTensor) -> torch.Tensor:
    """The value a functional tensor holds now, with its pending updates applied."""
    torch._sync(value)
    return torch._from_functional_tensor(value.elem)


def functional_state(value: FunctionalTensor) -> tuple[bool, bool, bool]:
    """(storage changed, metadata mutated, data mutated) of a functional tensor since wrapping.

    Pending updates are applied first."""
    torch._sync(value)
    elem = value.elem
    return (
        torch._functionalize_was_storage_changed(elem),
        torch._functionalize_has_metadata_mutation(elem),
        torch._functionalize_has_data_mutation(elem),
    )


# -- draft exports -----------------------------------------------------------------------------


def real_tensor_propagation() -> Any:
    """While active, a new FakeTensorMode carries real copies of its tensors and runs every
    op on them too: a guard on a data-dependent value is decided by the real value (and
    deferred as a runtime assert), an op without a fake kernel gets one inferred from its
    real outputs.  torch.export.draft_export sets the same two flags."""
    import torch._functorch.config as functorch_config

    return functorch_config.patch(
        fake_tensor_propagate_real_tensors=True, generate_fake_kernels_from_real_mismatches=True
    )


def on_real_value_decision(shape_env: ShapeEnv, callback: Any) -> None:
    """Call ``callback(expr, value)`` (instead of torch's logging) each time ``shape_env``
    decides a data-dependent guard by a real value; this instance only."""
    shape_env._log_real_tensor_propagation = callback


# -- the dimension-constraint solver --------------------------------------------------------


def solver_may_specialize(solver: Any) -> bool:
    """Whether ``solver.solve()`` (a ShapeEnv's ``DimConstraints``) can find a forced
    specialization or raise.

    ``solve`` fills ``forced_specializations()`` only while solving univariate equalities,
    and raises only on inconsistencies or a congruence it cannot solve; the rest of its
    work (reducing range inequalities with sympy, symbolic equivalences) writes suggested
    fixes exporter never reads.  Without any of those three, ``solve`` is skipped.
    """
    return bool(solver._symbols_with_equalities or solver._inconsistencies or any(solver._congruences.values()))


# -- graph node names (speed work, issue 10) ------------------------------------------------


def take_name(node: torch.fx.Node, name: str) -> None:
    """Name ``node`` exactly ``name``, which a node since erased from its graph held (FX
    never hands a name out twice, so the erased node's is released first)."""
    if any(other.name == name for other in node.graph.nodes if other is not node):
        raise ValueError(f"{name!r} is still held by a node of the graph")
    node.graph._graph_namespace._used_names.discard(name)
    node._rename(name)


def rename_node(node: torch.fx.Node, candidate: str) -> None:
    """Give ``node`` the name its graph would give a new node named ``candidate`` (``add`` ->
    ``add_3``), as if it had been created under that name."""
    node._rename(candidate)


# -- AOTInductor packages (command line --aoti, issue 11) ------------------------------------
# Imported when called: torch._inductor is heavy, and importing exporter or exporting a
# program must not load it.  Both consume a finished ExportedProgram; neither traces.


def aoti_compile_package(program: Any, package_path: str) -> str:
    """Compile ``program`` with AOTInductor into the package ``package_path`` (a ``.pt2``)."""
    from torch._inductor import aoti_compile_and_package

    return aoti_compile_and_package(program, package_path=package_path)


def aoti_load_package(package_path: str) -> Any:
    """The compiled model in an AOTInductor package: called like the program's module."""
    from torch._inductor import aoti_load_package as load

    return load(package_path)


# -- higher-order-op bodies -----------------------------------------------------------------


def hop_compile_module() -> Any:
    """The module whose ``_hop_compile_and_call`` compiles a higher-order op's body (cond,
    while_loop, map, scan) with Dynamo."""
    import torch._higher_order_ops.utils as hop_utils

    return hop_utils


def forget_compiled(code: Any) -> None:
    """Drop every compiled entry Dynamo cached for ``code`` (it compiles again when next called)."""
    torch._C._dynamo.eval_frame.reset_code(code)


# -- the training IR -----------------------------------------------------------------------

SET_GRAD_ENABLED = torch._C._set_grad_enabled
"""What a pre-dispatch trace records for ``torch.no_grad()``/``enable_grad()`` entry and exit."""
ENTER_AUTOCAST = torch.amp.autocast_mode._enter_autocast
EXIT_AUTOCAST = torch.amp.autocast_mode._exit_autocast
"""What a pre-dispatch trace records for entering and leaving a ``torch.autocast`` block."""


def training_dialect() -> type:
    """The verifier class an ExportedProgram of torch.export's training IR carries as its
    dialect ("TRAINING"): ``ep.run_decompositions`` functionalizes such programs, and the
    ExportedProgram validates with it (mutating ops allowed).  Looked up by dialect name,
    as ``torch.export.load`` does; exporter never calls it."""
    from torch._export.verifier import load_verifier

    return load_verifier("TRAINING")


def _predispatch_functions() -> frozenset:
    import torch._functorch.predispatch as predispatch
    from torch.fx.experimental.symbolic_shapes import cast_symbool_to_symint_guardless

    names = (
        "_add_batch_dim", "_remove_batch_dim", "_vmap_increment_nesting", "_vmap_decrement_nesting",
        "lazy_load_decompositions", "_make_dual", "_unpack_dual", "_jvp_increment_nesting",
        "_jvp_decrement_nesting", "_unwrap_for_grad", "_enter_dual_level", "_exit_dual_level",
    )
    found = {getattr(predispatch, name) for name in names if hasattr(predispatch, name)}
    return frozenset(found | {cast_symbool_to_symint_guardless})


PREDISPATCH_FUNCTIONS = _predispatch_functions()
"""What a pre-dispatch trace records as calls for ``torch.vmap``/``torch.func.jvp`` levels and
batch dims (torch.func transforms run inside the model), kept in torch.export's training IR
and allowed by its TRAINING dialect."""
