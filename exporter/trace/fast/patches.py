"""The fast paths' process-wide patches, entered only while their fast path is on, each in
the tracing thread only: ``fast_recording`` and ``direct_pre_dispatch`` for the recorder and
the training IR, ``memory_formats_remembered`` for make_fx's ``tensor_meta`` on symbolic
sizes, ``program_code_deferred`` for the program's graph code.  Each names the torch function
it mirrors; the design page lists them with the other patches."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import torch

from ..._torch_internals import PRE_DISPATCH, HigherOrderOperator, hop_compile_entry
from ..._torch_internals.fast import (
    MAKE_FX_TENSOR_METADATA,
    PRE_DISPATCH_LOOKUP,
    fx_tracing_flag,
    lazy_graph_module,
    pre_dispatch_handler,
    program_module_factory,
)
from ..patches import in_tracing_thread, replaced
from .symbolic_memo import memory_formats_remembered as remembering

__all__ = ["ModuleCall", "direct_pre_dispatch", "fast_recording", "memory_formats_remembered", "program_code_deferred"]


ModuleCall = Callable[..., object]
"""``call(module, call_impl, args, kwargs)``: runs ``call_impl(module, *args, **kwargs)``."""




@contextlib.contextmanager
def direct_pre_dispatch(accepts: Callable[[object], bool]) -> Iterator[None]:
    """Within the block, in the tracing thread, a call reaching the pre-dispatch key while a
    mode that ``accepts(mode)`` sits alone there goes straight to that mode
    (``pre_dispatch_handler``), without the kernel, context manager and argument flattening
    torch makes for it per call; any other mode there gets torch's own kernel."""
    owner, name = PRE_DISPATCH_LOOKUP
    get_dispatch = getattr(owner, name)

    def direct_dispatch(op, key):
        if key == PRE_DISPATCH and (handler := pre_dispatch_handler(op, accepts)) is not None:
            return handler
        return get_dispatch(op, key)

    with replaced(owner, name, in_tracing_thread(direct_dispatch, get_dispatch)):
        yield


@contextlib.contextmanager
def fast_recording(call_module: ModuleCall, on_hop: Callable[[str], None]) -> Iterator[None]:
    """Within the block, in the tracing thread, what make_fx's ``Tracer.trace`` changes for
    its trace, for the recorder that stands in for it: every ``nn.Module.__call__`` goes
    through ``call_module`` (which keeps the module stack), ``on_hop(name)`` sees each
    higher-order op before it runs or has its body compiled (it may raise), torch.fx's "fx
    tracing" flag is set and the autocast cache is off (each autocast cast is recorded
    where it happens)."""
    module_call = torch.nn.Module.__call__
    hop_call = HigherOrderOperator.__call__
    hop_owner, hop_name = hop_compile_entry()
    compile_and_call = getattr(hop_owner, hop_name)

    def recorded_call(module, *args, **kwargs):
        return call_module(module, module_call, args, kwargs)

    def reported_hop(op, *args, **kwargs):
        on_hop(op.name())
        return hop_call(op, *args, **kwargs)

    def reported_compile(fn, *args, **kwargs):
        on_hop(getattr(fn, "__name__", "a higher-order op"))
        return compile_and_call(fn, *args, **kwargs)

    was_tracing = fx_tracing_flag(True)
    autocast_cache = torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(False)
    torch.nn.Module.__call__ = in_tracing_thread(recorded_call, module_call)
    HigherOrderOperator.__call__ = in_tracing_thread(reported_hop, hop_call)
    setattr(hop_owner, hop_name, in_tracing_thread(reported_compile, compile_and_call))
    try:
        yield
    finally:
        setattr(hop_owner, hop_name, compile_and_call)
        HigherOrderOperator.__call__ = hop_call
        torch.nn.Module.__call__ = module_call
        torch.set_autocast_cache_enabled(autocast_cache)
        fx_tracing_flag(was_tracing)


@contextlib.contextmanager
def memory_formats_remembered() -> Iterator[None]:
    """Within the block, in the tracing thread, make_fx's ``tensor_meta`` maker answers a
    memory format on symbolic sizes from an earlier tensor of the same layout
    (``symbolic_memo.memory_formats_remembered``)."""
    owner, name = MAKE_FX_TENSOR_METADATA
    real = getattr(owner, name)
    with replaced(owner, name, in_tracing_thread(remembering(real), real)):
        yield


_DEFER_LOCK = threading.Lock()
_deferring: dict[int, int] = {}
"""Thread id -> how many ``program_code_deferred`` blocks it is in."""
_eager_program_module: Callable | None = None
"""torch's graph-module factory for programs, while ours is installed."""


def _program_module(root, graph):
    if threading.get_ident() in _deferring:
        return lazy_graph_module(root, graph)
    return _eager_program_module(root, graph)


@contextlib.contextmanager
def program_code_deferred() -> Iterator[None]:
    """Within the block, an ``ExportedProgram`` made in this thread holds a graph module that
    generates and compiles its Python code when first called or read ;
    in other threads programs are made as torch makes them.  Blocks may overlap across
    threads: the first in installs the factory, the last out puts torch's back."""
    global _eager_program_module
    owner, name = program_module_factory()
    thread = threading.get_ident()
    with _DEFER_LOCK:
        if not _deferring:
            _eager_program_module = getattr(owner, name)
            setattr(owner, name, _program_module)
        _deferring[thread] = _deferring.get(thread, 0) + 1
    try:
        yield
    finally:
        with _DEFER_LOCK:
            _deferring[thread] -= 1
            if not _deferring[thread]:
                del _deferring[thread]
            if not _deferring:
                setattr(owner, name, _eager_program_module)
                _eager_program_module = None
