"""Every process-wide change a trace makes, entered through one context manager.

Tracing needs torch and Python to behave differently in a few global places.  All of
them are listed here, each naming what it changes and the torch function whose
behaviour it mirrors, and ``tracing_patches`` applies them together, for static and
dynamic traces alike, under ``EXPORT_LOCK`` (exports in one process run one at a time),
undoing them in reverse order on every path out, also after an error.

=====================================  ================================================
patch                                  mirrors
=====================================  ================================================
``torch.compiler`` compiling and       ``torch.export``'s ``_compiling_state_context``:
exporting flags set                    libraries take their export-friendly code paths
mkldnn and nnpack off                  torch.export's tracing, which routes convolutions
                                       to portable kernels
grad mode restored on exit             ``torch.no_grad``/``enable_grad`` left by forward
the Python dispatcher on               ``torch._dispatch.python.enable_python_dispatcher``
functional composites kept whole       torch.export's ``_override_composite_implicit_decomp``
(``py_kernels`` and fake rules)
``aten.to`` checked, and               torch.export's ``_assert_tensor_metadata`` nodes;
``FunctionalTensor.to`` unchecked      ``FunctionalTensor.to`` emits them for some spellings
                                       only, so ours emits them for all
stack traces recorded cheaply          ``_ModuleStackTracer.create_node`` and
(``create_node``, fx config flag)      ``torch.fx.config.do_not_emit_stack_traces``
lazy graph modules                     ``torch.fx._lazy_graph_module._use_lazy_graph_module``
Dynamo's config, for higher-order ops  the Dynamo config torch.export's non-strict mode
that compile their bodies (cond,       patches (``ExportDynamoConfig``): no automatic
while_loop), when Dynamo is loaded     dynamic shapes on re-compiles, scalar outputs captured
``builtins.max``/``min``,              ``torch._export.non_strict_utils._override_builtin_ops``
``math.pow``
``Tensor.__getitem__`` with sizes,     the ``__getitem__`` and ``torch.tensor`` rewrites of
``torch.tensor`` of sizes              ``_NonStrictTorchFunctionHandler``
higher-order-op bodies Dynamo          (none: torch.export's traces leave no entry a later
compiled during the trace forgotten    trace would match) a cached body's size guards, looked
afterwards                             up in the next trace, would be evaluated on its
                                       symbolic sizes and recorded as its guards
draft traces only: real tensors        ``torch.export.draft_export``'s functorch config;
propagated, and the fake/real          its fake/real check compares a data-dependent
storage-offset check without guards    storage offset with ``!=``, which pins the size to
                                       its example value (``nonzero(as_tuple=True)``)
training IR only: a module-buffer      the buffer-assignment hook torch.export's training
registration hook (``buffer_writes``)  IR trace registers: ``self.buf = v`` on the root
                                       module is written back with ``copy_``
cudnn off                              torch.export's tracing, which turns cudnn off with
                                       mkldnn and nnpack (``batch_norm``'s flag records it)
=====================================  ================================================

The Python-level replacements (the last two rows) act only in the thread that traces;
other threads calling ``max`` or indexing a tensor meanwhile get the originals.  (They
replace the functions themselves rather than entering a TorchFunctionMode, as torch does:
a mode sees every torch call of the trace, which cost 4-8% of a static export.)
"""

from __future__ import annotations

import builtins
import contextlib
import math
import sys
import threading
from collections.abc import Callable, Iterator

import torch

from .._torch_internals import (
    FunctionalTensor,
    OpOverload,
    clear_dispatch_cache,
    compare_tensor_meta,
    compiler_flags,
    enable_python_dispatcher,
    fake_impls,
    fake_utils,
    forget_compiled,
    free_unbacked_symbols,
    hop_compile_module,
    loaded_dynamo_config,
    module_stack_tracer,
    real_tensor_propagation,
    set_compiler_flags,
    use_lazy_graph_module,
)
from .kernels import (
    AUTOGRAD_KEYS,
    CONVERSIONS,
    KERNEL_KEYS,
    checked_conversion,
    composite_kernels,
    forget_composite_kernels,
    functional_composite_ops,
)
from .python_ops import builtin_max, builtin_min, power, tensor_factory, tensor_getitem
from .stacks import user_stack_trace

__all__ = ["EXPORT_LOCK", "BufferWrite", "NodeHook", "buffer_writes", "tracing_patches"]

EXPORT_LOCK = threading.RLock()
"""Held for the whole of every trace: the patches below are process-wide."""

NodeHook = Callable[[torch.fx.Node], None]
"""Called with every node the tracer creates, after its metadata is set."""


@contextlib.contextmanager
def tracing_patches(on_node: NodeHook | None = None, *, draft: bool = False) -> Iterator[None]:
    """Within the block, torch and Python behave as a torch.export trace needs (see module doc).

    ``on_node`` sees each node as the tracer creates it, and may raise to stop the trace.
    ``draft``: fake tensors carry real ones (``draft=True`` exports).
    """
    with EXPORT_LOCK, contextlib.ExitStack() as stack:
        if draft:
            stack.enter_context(real_tensor_propagation())
            stack.enter_context(_offset_checks_without_guards())
        stack.enter_context(_compiler_flags())
        stack.enter_context(_portable_kernels())
        stack.enter_context(_grad_mode_restored())
        stack.enter_context(enable_python_dispatcher())
        stack.enter_context(_composites_kept_whole())
        stack.enter_context(_conversions_checked())
        stack.enter_context(_node_recording(on_node))
        stack.enter_context(use_lazy_graph_module(True))
        stack.enter_context(_dynamo_config_for_bodies())
        stack.enter_context(_hop_bodies_forgotten())
        stack.enter_context(_python_semantics())
        yield


# What torch.export sets for the bodies of higher-order ops that Dynamo compiles: without
# it, a second export in one process re-compiles a cached body with automatic dynamic
# shapes, adding size inputs the traced subgraph knows nothing about.
_DYNAMO_CONFIG_FOR_BODIES = {
    "allow_rnn": True,
    "specialize_int": True,
    "specialize_float": True,
    "assume_static_by_default": False,
    "automatic_dynamic_shapes": False,
    "capture_dynamic_output_shape_ops": True,
    "capture_scalar_outputs": True,
    "prefer_deferred_runtime_asserts_over_guards": False,
    "do_not_emit_runtime_asserts": False,
    "replay_side_effects": False,
}


@contextlib.contextmanager
def _offset_checks_without_guards() -> Iterator[None]:
    # With real tensors propagated, every fake output is checked against the real one,
    # storage offset included.  An offset that is a data-dependent size (the second
    # column of nonzero's result) compared with ``!=`` is a guard, which real-value
    # propagation answers by pinning the size to its example value: the op's output
    # loses its symbol and the trace stops.  For such outputs the rest of torch's check
    # runs without the offset comparison (torch's ``storage_offset=False`` is ignored).
    original = fake_utils._check_fake_real_tensors

    def check(real_out, fake_out, context="", sizes=True, strides=False, storage_offset=True, requires_grad=True):
        offset = fake_out.storage_offset()
        if not (isinstance(offset, torch.SymInt) and free_unbacked_symbols(offset)):
            return original(real_out, fake_out, context, sizes, strides, storage_offset, requires_grad)
        if requires_grad and real_out.requires_grad != fake_out.requires_grad:
            raise fake_utils.MetadataMismatchError(f"{context} mismatched requires_grad-ness of outputs")
        compare_tensor_meta(real_out, fake_out, check_sizes=sizes, check_strides=strides, allow_rhs_unbacked=True)
        return None

    fake_utils._check_fake_real_tensors = check
    try:
        yield
    finally:
        fake_utils._check_fake_real_tensors = original


@contextlib.contextmanager
def _dynamo_config_for_bodies() -> Iterator[None]:
    config = loaded_dynamo_config()
    if config is None:
        yield  # no body was compiled in this process yet: nothing cached to re-compile
        return
    with config.patch({k: v for k, v in _DYNAMO_CONFIG_FOR_BODIES.items() if hasattr(config, k)}):
        yield


@contextlib.contextmanager
def _hop_bodies_forgotten() -> Iterator[None]:
    # torch.cond (and while_loop, map, scan) compile a wrapper of their body with Dynamo,
    # and Dynamo caches the result on the wrapper's code object, guarded on the operands'
    # sizes.  A later export looking that entry up evaluates those guards on its own
    # symbolic sizes, which records them (`s0 != 4`) as if the model had needed them: the
    # same cond model exported static, then dynamic, failed with a ConstraintError.  What
    # this trace compiled is forgotten when it ends (an eager call recompiles it).
    hop_utils = hop_compile_module()
    original = hop_utils._hop_compile_and_call
    compiled = set()

    def compile_and_call(fn, args, kwargs=None):
        code = getattr(fn, "__code__", None)
        if code is not None:
            compiled.add(code)
        return original(fn, args, kwargs)

    hop_utils._hop_compile_and_call = compile_and_call
    try:
        yield
    finally:
        hop_utils._hop_compile_and_call = original
        for code in compiled:
            forget_compiled(code)


@contextlib.contextmanager
def _compiler_flags() -> Iterator[None]:
    saved = compiler_flags()
    set_compiler_flags(True, True)
    try:
        yield
    finally:
        set_compiler_flags(*saved)


@contextlib.contextmanager
def _portable_kernels() -> Iterator[None]:
    saved_mkldnn = torch.backends.mkldnn.set_flags(False)
    saved_nnpack = torch.backends.nnpack.set_flags(False)
    saved_cudnn = torch.backends.cudnn.set_flags(False)
    try:
        yield
    finally:
        torch.backends.mkldnn.set_flags(*saved_mkldnn)
        torch.backends.nnpack.set_flags(*saved_nnpack)
        torch.backends.cudnn.set_flags(*saved_cudnn)


@contextlib.contextmanager
def _grad_mode_restored() -> Iterator[None]:
    enabled = torch.is_grad_enabled()
    try:
        yield
    finally:
        torch.set_grad_enabled(enabled)


@contextlib.contextmanager
def _composites_kept_whole() -> Iterator[None]:
    undo: list[tuple[OpOverload, dict, dict, int]] = []
    fake_rules = fake_impls.op_implementations_dict
    added_rules: list[OpOverload] = []
    try:
        for op in functional_composite_ops():
            saved = op.py_kernels
            table, rule = composite_kernels(op)
            undo.append((op, saved, table, len(table)))
            op.py_kernels = table
            if op not in fake_rules:
                fake_rules[op] = rule
                added_rules.append(op)
            clear_dispatch_cache(op)
        yield
    finally:
        for op, saved, table, size in undo:
            if len(table) != size:
                # Something registered a kernel while ours was installed: keep it.
                for key, kernel in list(table.items()):
                    if key not in KERNEL_KEYS and key not in saved:
                        saved[key] = kernel
                forget_composite_kernels(op)
            op.py_kernels = saved
            clear_dispatch_cache(op)
        for op in added_rules:
            fake_rules.pop(op, None)


def _to_unchecked(self, *args, **kwargs):
    return torch.Tensor.to(self, *args, **kwargs)


@contextlib.contextmanager
def _conversions_checked() -> Iterator[None]:
    saved = {op: dict(op.py_kernels) for op in CONVERSIONS}
    saved_to = FunctionalTensor.to
    try:
        for op in CONVERSIONS:
            kernel = checked_conversion(op)
            for key in AUTOGRAD_KEYS:
                op.py_kernels[key] = kernel
            clear_dispatch_cache(op)
        FunctionalTensor.to = _to_unchecked
        yield
    finally:
        FunctionalTensor.to = saved_to
        for op, kernels in saved.items():
            op.py_kernels.clear()
            op.py_kernels.update(kernels)
            clear_dispatch_cache(op)


@contextlib.contextmanager
def _node_recording(on_node: NodeHook | None) -> Iterator[None]:
    """Every node gets a cheap stack trace (make_fx's own capture, far costlier, is off),
    then goes to ``on_node``."""
    tracer_cls = module_stack_tracer()
    original = tracer_cls.create_node
    saved_flag = torch.fx.config.do_not_emit_stack_traces

    def create_node(self, *args, **kwargs):
        node = original(self, *args, **kwargs)
        if node.op not in ("placeholder", "output") and not node.stack_trace:
            trace = user_stack_trace(sys._getframe(1))
            if trace:
                node.stack_trace = trace
        if on_node is not None:
            on_node(node)
        return node

    # Tracers read the flag when they are created.
    torch.fx.config.do_not_emit_stack_traces = True
    tracer_cls.create_node = create_node
    try:
        yield
    finally:
        tracer_cls.create_node = original
        torch.fx.config.do_not_emit_stack_traces = saved_flag


_THIS_THREAD = threading.local()
"""``tracing`` is True in the thread whose trace installed the Python-level replacements."""


def _in_tracing_thread(replacement, real):
    def guarded(*args, **kwargs):
        if getattr(_THIS_THREAD, "tracing", False):
            return replacement(*args, **kwargs)
        return real(*args, **kwargs)

    return guarded


# (owner, attribute, replacement factory): each replacement is made from the original.
_PYTHON_REPLACEMENTS = (
    (builtins, "max", builtin_max),
    (builtins, "min", builtin_min),
    (math, "pow", power),
    (torch.Tensor, "__getitem__", tensor_getitem),
    (torch, "tensor", tensor_factory),
)


@contextlib.contextmanager
def _python_semantics() -> Iterator[None]:
    saved = [(owner, name, owner.__dict__.get(name), getattr(owner, name)) for owner, name, _ in _PYTHON_REPLACEMENTS]
    was_tracing = getattr(_THIS_THREAD, "tracing", False)
    try:
        for (owner, name, make), (_, _, _, real) in zip(_PYTHON_REPLACEMENTS, saved):
            setattr(owner, name, _in_tracing_thread(make(real), real))
        _THIS_THREAD.tracing = True
        yield
    finally:
        _THIS_THREAD.tracing = was_tracing
        for owner, name, own, _ in saved:
            if own is not None:
                setattr(owner, name, own)
            elif name in owner.__dict__:
                delattr(owner, name)  # it was inherited (Tensor.__getitem__ comes from TensorBase)


BufferWrite = Callable[[torch.nn.Module, str, object], None]


@contextlib.contextmanager
def buffer_writes(on_write: BufferWrite) -> Iterator[None]:
    """Within the block, ``on_write(module, name, value)`` sees every assignment of a module
    buffer (``self.buf = value``, also ``self.buf += x``, which assigns the same tensor)
    made in this thread; other threads' assignments are not reported."""
    thread = threading.get_ident()

    def hook(module, name, value):
        if threading.get_ident() == thread:
            on_write(module, name, value)

    handle = torch.nn.modules.module.register_module_buffer_registration_hook(hook)
    try:
        yield
    finally:
        handle.remove()
