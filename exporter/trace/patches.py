"""Every process-wide change a trace makes, entered through one context manager.

``tracing_patches`` applies them together, for static and dynamic traces alike, under
``EXPORT_LOCK`` (exports in one process run one at a time), and undoes them in reverse order
on every path out, also after an error.  Each replacement acts in the tracing thread only and
does the old job in any other.  The design page's "Process-wide patches" lists each patch, the
torch function it mirrors, and what another thread sees while a trace runs."""

from __future__ import annotations

import builtins
import contextlib
import gc
import math
import sys
import threading
from collections.abc import Callable, Iterator

import torch
import torch.utils._pytree as pytree

from .._torch_internals import (
    AUTOCAST_DEVICES,
    FunctionalTensor,
    HigherOrderOperator,
    OpOverload,
    autocast_keys_excluded,
    clear_dispatch_cache,
    ops_with_cached_kernels,
    on_dispatch_miss,
    compare_tensor_meta,
    compiler_flags,
    dynamo_compile_lock,
    enable_python_dispatcher,
    fake_impls,
    FAKE_REAL_CHECK,
    FakeImplCtx,
    fake_utils,
    forget_compiled,
    free_unbacked_symbols,
    hop_compile_entry,
    import_shape_env_modules,
    loaded_dynamo_config,
    module_stack_tracer,
    plain_alias,
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
    kept_whole,
)
from .fast import FastPaths
from .python_ops import (
    SymbolicInt,
    SymbolicRange,
    builtin_len,
    builtin_max,
    builtin_min,
    list_cat,
    list_stack,
    power,
    tensor_factory,
    tensor_getitem,
    tensor_setitem,
    tensor_iter,
)
from .stacks import user_calls_recorded, user_stack_trace
from .tracing_checks import exporting_answer
from .values import size_hash, tensor_numpy
from .view_sizes import sized_as_asked

__all__ = [
    "EXPORT_LOCK",
    "BufferWrite",
    "NodeHook",
    "buffer_writes",
    "compiler_flags_as_traced",
    "gc_paused",
    "in_tracing_thread",
    "replaced",
    "tracing_here",
    "tracing_patches",
]

EXPORT_LOCK = threading.RLock()
"""Held for the whole of every trace: the patches below are process-wide."""

_GC_LOCK = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Within the block, Python's cyclic garbage collector does not run on its own (see the
    module doc).  Blocks may overlap across threads: the first in pauses it, the last out
    resumes it if it was running when the first came in."""
    global _gc_pausers, _gc_was_enabled
    with _GC_LOCK:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


_THIS_THREAD = threading.local()
"""``tracing`` is True in the thread whose trace installed the patches."""


def tracing_here() -> bool:
    return getattr(_THIS_THREAD, "tracing", False)

NodeHook = Callable[[torch.fx.Node], None]
"""Called with every node the tracer creates, after its metadata is set."""


@contextlib.contextmanager
def tracing_patches(
    on_node: NodeHook | None = None, *, draft: bool = False, training: bool = False, fast: FastPaths = FastPaths(),
    data_sized_len: bool = False, int_modules: frozenset[str] = frozenset(), range_modules: frozenset[str] = frozenset(),
) -> Iterator[None]:
    """Within the block, torch and Python behave as a torch.export trace needs (see module doc).

    ``on_node`` sees each node as the tracer creates it, and may raise to stop the trace.
    ``draft``: fake tensors carry real ones (``draft=True`` exports).
    ``fast``: the fast paths whose patches are entered too (``memory_formats``).
    ``training``: a pre-dispatch trace (the training IR), which records composites and
    conversions where they are called, before any kernel runs: their kernels stay torch's,
    so the values it computes see autograd (``requires_grad``) as torch.export's do.
    ``data_sized_len``: ``len()`` of a tensor whose first size only the data decides gives
    that size, symbolic (``python_ops.builtin_len``).
    ``int_modules``: the modules (by name) whose ``int()`` gives a value only the data
    decides symbolic (``python_ops.SymbolicInt``).
    ``range_modules``: the modules whose ``range()`` of a number only the data decides is a
    loop branch capture goes round (``python_ops.SymbolicRange``).
    """
    import_shape_env_modules()
    with _locks_held(), _tracing_thread(), contextlib.ExitStack() as stack:
        if draft:
            stack.enter_context(real_tensor_propagation())
            stack.enter_context(_offset_checks_without_guards())
        stack.enter_context(_compiler_flags())
        stack.enter_context(_portable_kernels())
        stack.enter_context(_grad_mode_restored())
        stack.enter_context(enable_python_dispatcher())
        if not training:
            stack.enter_context(_composites_kept_whole())
            stack.enter_context(_conversions_checked())
            stack.enter_context(_hop_parameters_as_tensors())
        stack.enter_context(_views_sized_as_asked())
        stack.enter_context(_node_recording(on_node))
        stack.enter_context(_fx_traces_elsewhere_wait())
        stack.enter_context(use_lazy_graph_module(True))
        stack.enter_context(_dynamo_config_for_bodies())
        stack.enter_context(_hop_bodies_forgotten())
        stack.enter_context(_python_semantics(data_sized_len, int_modules, range_modules))
        stack.enter_context(_values_asked_for(draft))
        stack.enter_context(_data_sized_outputs_from_zero())
        stack.enter_context(fast.memory_formats_remembered())
        yield


@contextlib.contextmanager
def _locks_held() -> Iterator[None]:
    """``EXPORT_LOCK``, and Dynamo's compile lock when Dynamo is loaded.

    Dynamo reads ``is_exporting()`` while it compiles (a graph compiled in another thread
    during a trace would keep the exporting branch), and saves and restores the compiler
    and lazy-graph-module flags around each compilation (one ending after the trace would
    restore the trace's values for good).  Holding its lock makes compilations elsewhere
    wait for the trace; code they already compiled runs on.  Neither lock is waited for
    while the other is held: a torch.compile backend may export while Dynamo holds its
    lock, and a trace compiles higher-order-op bodies with Dynamo.
    """
    while True:
        EXPORT_LOCK.acquire()
        compile_lock = dynamo_compile_lock()
        if compile_lock is None or compile_lock.acquire(blocking=False):
            break
        EXPORT_LOCK.release()
        with compile_lock:  # wait for the compilation to end, then try again
            pass
    try:
        yield
    finally:
        if compile_lock is not None:
            compile_lock.release()
        EXPORT_LOCK.release()


@contextlib.contextmanager
def _tracing_thread() -> Iterator[None]:
    was_tracing = tracing_here()
    _THIS_THREAD.tracing = True
    try:
        yield
    finally:
        _THIS_THREAD.tracing = was_tracing


def in_tracing_thread(replacement, real):
    """``replacement`` in the tracing thread, ``real`` in every other."""

    def guarded(*args, **kwargs):
        if tracing_here():
            return replacement(*args, **kwargs)
        return real(*args, **kwargs)

    return guarded


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
    owner, name = FAKE_REAL_CHECK
    original = getattr(owner, name)

    def check(real_out, fake_out, context="", sizes=True, strides=False, storage_offset=True, requires_grad=True):
        offset = fake_out.storage_offset()
        if not (isinstance(offset, torch.SymInt) and free_unbacked_symbols(offset)):
            return original(real_out, fake_out, context, sizes, strides, storage_offset, requires_grad)
        if requires_grad and real_out.requires_grad != fake_out.requires_grad:
            raise fake_utils.MetadataMismatchError(f"{context} mismatched requires_grad-ness of outputs")
        compare_tensor_meta(real_out, fake_out, check_sizes=sizes, check_strides=strides, allow_rhs_unbacked=True)
        return None

    with replaced(owner, name, in_tracing_thread(check, original)):
        yield


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
    owner, name = hop_compile_entry()
    original = getattr(owner, name)
    compiled = set()

    def compile_and_call(fn, args, kwargs=None):
        code = getattr(fn, "__code__", None)
        if code is not None:
            compiled.add(code)
        with _replacements_lifted():
            return original(fn, args, kwargs)

    try:
        with replaced(owner, name, in_tracing_thread(compile_and_call, original)):
            yield
    finally:
        for code in compiled:
            forget_compiled(code)


@contextlib.contextmanager
def compiler_flags_as_traced(*, compiling: bool = True, exporting: bool = True) -> Iterator[None]:
    """Within the block ``torch.compiler.is_compiling()`` reports ``compiling`` and
    ``is_exporting()`` reports ``exporting`` (to this thread), as both report True while a
    trace runs the model: for running the model eagerly down the path its trace took.  Set
    as a trace sets them, under the same locks."""
    with _locks_held(), _tracing_thread(), _compiler_flags(compiling, exporting):
        yield


@contextlib.contextmanager
def _compiler_flags(compiling: bool = True, exporting: bool = True) -> Iterator[None]:
    # The flags are module globals, read as globals by the query functions and by Dynamo:
    # set for every reader in the tracing thread.  Other threads asking
    # ``torch.compiler.is_exporting()`` get the value from before the trace (torch.compile
    # returns the model uncompiled when called while it is True).  ``is_compiling()`` stays
    # process-wide, as torch 2.13 keeps it during every torch.compile compilation: while
    # make_fx traces, torch.fx's process-wide "fx tracing" flag is set, and a compiled
    # function called while that flag is set and ``is_compiling()`` is False raises.
    saved = compiler_flags()
    exporting = exporting and exporting_answer()
    set_compiler_flags(compiling, exporting)
    try:
        before = saved[1]
        is_exporting = in_tracing_thread(torch.compiler.is_exporting, lambda: before)
        with replaced(torch.compiler, "is_exporting", is_exporting):
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
    # Each op's table goes in as the dispatcher first meets the op in the trace (before it
    # chooses a kernel), and in at once for the ops it has a cached choice for: the trace
    # then pays only for the ops the model calls, not for making every composite op's
    # Python object up front.
    installed: dict[OpOverload, tuple[dict, dict, int, bool]] = {}
    fake_rules = fake_impls.op_implementations_dict

    def keep(op: OpOverload) -> None:
        if op in installed or not tracing_here() or not kept_whole(op):
            return
        saved = op.py_kernels
        table, rule = composite_kernels(op, tracing_here)
        added_rule = op not in fake_rules
        if added_rule:
            fake_rules[op] = rule
        installed[op] = (saved, table, len(table), added_rule)
        op.py_kernels = table
        clear_dispatch_cache(op)

    try:
        for op in ops_with_cached_kernels():
            keep(op)
        with on_dispatch_miss(keep):
            yield
    finally:
        for op, (saved, table, size, added_rule) in installed.items():
            if len(table) != size:
                # Something registered a kernel while ours was installed: keep it.
                for key, kernel in list(table.items()):
                    if key not in KERNEL_KEYS and key not in saved:
                        saved[key] = kernel
                forget_composite_kernels(op)
            op.py_kernels = saved
            clear_dispatch_cache(op)
            if added_rule:
                fake_rules.pop(op, None)


_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)
"""The view ops whose fake kernel gives the sizes asked for (``view_sizes``)."""


@contextlib.contextmanager
def _views_sized_as_asked() -> Iterator[None]:
    fake_rules = fake_impls.op_implementations_dict
    saved = {op: fake_rules[op] for op in _VIEWS}
    try:
        for op, rule in saved.items():
            fake_rules[op] = sized_as_asked(rule, tracing_here)
        yield
    finally:
        fake_rules.update(saved)


def _to_unchecked(self, *args, **kwargs):
    return torch.Tensor.to(self, *args, **kwargs)


@contextlib.contextmanager
def _conversions_checked() -> Iterator[None]:
    saved = {op: dict(op.py_kernels) for op in CONVERSIONS}
    saved_to = FunctionalTensor.to
    # Which devices' autocast the model has on, as it set it: inside an autocast kernel
    # torch reads it as off, and that kernel's casts are not the model's conversions.
    autocast_on = {device: torch.is_autocast_enabled(device) for device in AUTOCAST_DEVICES}
    set_autocast = torch.set_autocast_enabled

    def autocast_set(*args, **kwargs):
        set_autocast(*args, **kwargs)
        autocast_on.update((device, torch.is_autocast_enabled(device)) for device in AUTOCAST_DEVICES)

    def autocast_casting() -> bool:
        return any(autocast_on[device] for device in autocast_keys_excluded())

    try:
        for op in CONVERSIONS:
            kernel = checked_conversion(op, tracing_here, autocast_casting)
            for key in AUTOGRAD_KEYS:
                op.py_kernels[key] = kernel
            clear_dispatch_cache(op)
        FunctionalTensor.to = in_tracing_thread(_to_unchecked, saved_to)
        with replaced(torch, "set_autocast_enabled", in_tracing_thread(autocast_set, set_autocast)):
            yield
    finally:
        FunctionalTensor.to = saved_to
        for op, kernels in saved.items():
            op.py_kernels.clear()
            op.py_kernels.update(kernels)
            clear_dispatch_cache(op)


def _is_real_parameter(value: object) -> bool:
    return type(value) is torch.nn.Parameter  # a fake parameter is a FakeTensor


@contextlib.contextmanager
def _hop_parameters_as_tensors() -> Iterator[None]:
    # A parameter of no module being exported (a closure holds it) reaches a higher-order op
    # as a real nn.Parameter.  Under functionalization torch's rule for the op steps aside
    # for any tensor subclass, and no other rule takes the op (NotImplementedError).  A
    # Parameter dispatches as the plain tensor it holds, and torch.export records it as a
    # constant tensor (its training-IR trace meets it before anything is functionalized):
    # the op is given that tensor.  Not a ``replaced`` function: the op is called from the
    # body Dynamo compiled, after compiling, which runs with those lifted.
    call = HigherOrderOperator.__dict__["__call__"]

    def with_tensors(self, *args, **kwargs):
        if any(_is_real_parameter(leaf) for leaf in pytree.tree_leaves((args, kwargs))):
            args, kwargs = pytree.tree_map_only(torch.nn.Parameter, _plain_if_real, (args, kwargs))
        return call(self, *args, **kwargs)

    HigherOrderOperator.__call__ = in_tracing_thread(with_tensors, call)
    try:
        yield
    finally:
        HigherOrderOperator.__call__ = call


def _plain_if_real(value: torch.Tensor) -> torch.Tensor:
    return plain_alias(value) if _is_real_parameter(value) else value


@contextlib.contextmanager
def _node_recording(on_node: NodeHook | None) -> Iterator[None]:
    """Every node gets a cheap stack trace (make_fx's own capture, far costlier, is off),
    then goes to ``on_node``; only this thread's module calls enter the module stack."""
    tracer_cls = module_stack_tracer()
    original = tracer_cls.create_node

    def create_node(self, *args, **kwargs):
        if not tracing_here():
            return original(self, *args, **kwargs)
        # What ``do_not_emit_stack_traces`` would have made the tracer read when created;
        # set here, on our tracer only, since fx's config is one module for all threads.
        self.record_stack_traces = False
        node = original(self, *args, **kwargs)
        if node.op not in ("placeholder", "output") and not node.stack_trace:
            trace = user_stack_trace(sys._getframe(1))
            if trace:
                node.stack_trace = trace
        calls = user_calls_recorded()
        if calls is not None:
            calls.note(node, sys._getframe(1))
        if on_node is not None:
            on_node(node)
        return node

    original_call_module = tracer_cls.call_module
    tracer_cls.create_node = create_node
    tracer_cls.call_module = _module_calls_of_this_thread(original_call_module)
    try:
        yield
    finally:
        tracer_cls.call_module = original_call_module
        tracer_cls.create_node = original


@contextlib.contextmanager
def _fx_traces_elsewhere_wait() -> Iterator[None]:
    """make_fx keeps its state in module globals, so an fx trace or a higher-order op in
    another thread waits for the export and runs holding ``EXPORT_LOCK``.

    torch.fx's ``Tracer.trace`` swaps ``nn.Module.__call__``/``__getattr__`` for the process
    through one global patcher (two traces at once undo each other's patches: "CURRENT_PATCHER
    is None"), and make_fx publishes its tracer in ``_CURRENT_MAKE_FX_TRACER``: an eager
    ``torch.cond`` (or a program holding one) elsewhere would trace its branches into ours
    ("Mixing fake modes").  Eager higher-order ops call make_fx on every call.
    """
    saved = [(owner, name, owner.__dict__[name]) for owner, name in _MAKE_FX_ENTRIES]
    for owner, name, original in saved:
        setattr(owner, name, in_tracing_thread(original, _holding_export_lock(original)))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


_MAKE_FX_ENTRIES = ((torch.fx.Tracer, "trace"), (HigherOrderOperator, "__call__"))
"""Where another thread enters make_fx: an fx trace, and an eager higher-order op."""


def _holding_export_lock(function):
    def locked(*args, **kwargs):
        with EXPORT_LOCK:
            return function(*args, **kwargs)

    return locked


def _module_calls_of_this_thread(call_module):
    # While make_fx traces, torch.fx's Tracer.trace routes every ``nn.Module.__call__`` in
    # the process through the tracer's ``call_module``: another thread calling a submodule
    # of the traced model would push it onto the module stack our nodes are recorded with.
    def guarded(self, module, forward, args, kwargs):
        if tracing_here():
            return call_module(self, module, forward, args, kwargs)
        return forward(*args, **kwargs)

    return guarded


# (owner, attribute, replacement factory): each replacement is made from the original.
_PYTHON_REPLACEMENTS = (
    (builtins, "max", builtin_max),
    (builtins, "min", builtin_min),
    (math, "pow", power),
    (torch.Tensor, "__getitem__", tensor_getitem),
    (torch.Tensor, "__setitem__", tensor_setitem),
    (torch.Tensor, "__iter__", tensor_iter),
    (torch, "tensor", tensor_factory),
    (torch, "stack", list_stack),
    (torch, "cat", list_cat),
    (torch, "concat", list_cat),
    (torch, "concatenate", list_cat),
)


@contextlib.contextmanager
def _python_semantics(
    data_sized_len: bool = False, int_modules: frozenset[str] = frozenset(), range_modules: frozenset[str] = frozenset()
) -> Iterator[None]:
    replacements = _PYTHON_REPLACEMENTS + ((builtins, "len", builtin_len),) if data_sized_len else _PYTHON_REPLACEMENTS
    with contextlib.ExitStack() as stack:
        for owner, name, make in replacements:
            real = getattr(owner, name)
            stack.enter_context(replaced(owner, name, in_tracing_thread(make(real), real)))
        for module in sorted(int_modules):
            # the module's global name only: it is Python's int for plain values, in any thread
            stack.enter_context(replaced(sys.modules[module], "int", SymbolicInt))
        for module in sorted(range_modules):
            # the module's global name only: a range of plain numbers is Python's, in any thread
            stack.enter_context(replaced(sys.modules[module], "range", SymbolicRange))
        yield


@contextlib.contextmanager
def _values_asked_for(draft: bool) -> Iterator[None]:
    # Hashing a data-dependent size and ``Tensor.numpy()`` need a value the trace does not
    # have: refused with the user's line, or in a draft trace given the example's (values.py).
    with contextlib.ExitStack() as stack:
        for owner, name, make in ((torch.SymInt, "__hash__", size_hash), (torch.Tensor, "numpy", tensor_numpy)):
            real = getattr(owner, name)
            stack.enter_context(replaced(owner, name, in_tracing_thread(make(real, draft=draft), real)))
        yield


def _size_from_zero(self, *, min=0, max=None):
    return self.new_dynamic_size(min=min, max=max)


@contextlib.contextmanager
def _data_sized_outputs_from_zero() -> Iterator[None]:
    # A custom op's fake kernel written with the deprecated ``ctx.create_unbacked_symint()``
    # (torchvision's ``nms`` and ``qnms``) gets a size of at least 2 by
    # that method's default, a bound nothing checks: the program would then assert it, and
    # refuse an input where NMS keeps one box or none.  Called without ``min``, it gives what
    # ``new_dynamic_size`` gives: any size from 0.
    real = FakeImplCtx.create_unbacked_symint
    with replaced(FakeImplCtx, "create_unbacked_symint", in_tracing_thread(_size_from_zero, real)):
        yield


_INSTALLED: list[tuple[object, str, object, object]] = []
"""(owner, name, its own attribute before, replacement) of each Python-level replacement in place."""


def _put_back(owner, name: str, own) -> None:
    if own is not None:
        setattr(owner, name, own)
    elif name in owner.__dict__:
        delattr(owner, name)  # it was inherited (Tensor.__getitem__ comes from TensorBase)


@contextlib.contextmanager
def replaced(owner, name: str, replacement) -> Iterator[None]:
    entry = (owner, name, owner.__dict__.get(name), replacement)
    setattr(owner, name, replacement)
    _INSTALLED.append(entry)
    try:
        yield
    finally:
        _INSTALLED.remove(entry)
        _put_back(owner, name, entry[2])


@contextlib.contextmanager
def _replacements_lifted() -> Iterator[None]:
    """The replaced Python functions are torch's and Python's own again within the block.

    For Dynamo compiling a higher-order op's body in the tracing thread: it knows builtins
    and ``torch.compiler``'s queries by identity (and caches what it learns about them for
    the process); a replacement it would have to trace into instead (``max``) fails the
    body's full-graph compile.  Dynamo handles symbolic sizes there itself."""
    installed = list(_INSTALLED)
    for owner, name, own, _ in reversed(installed):
        _put_back(owner, name, own)
    try:
        yield
    finally:
        for owner, name, _, replacement in installed:
            setattr(owner, name, replacement)


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
