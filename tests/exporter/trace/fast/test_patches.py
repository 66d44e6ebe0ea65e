"""The fast paths' patches: in place within their blocks, in the tracing thread only, and gone
afterwards; the traces they stand in for record the same graphs."""

import threading

import pytest
import torch

from exporter._torch_internals import make_fx
from exporter.trace.patches import tracing_patches


def test_fast_recording_routes_this_threads_module_calls_and_reports_higher_order_ops():
    from torch._ops import HigherOrderOperator
    from torch.fx._symbolic_trace import is_fx_tracing
    from exporter.trace.fast.patches import fast_recording

    calls, hops, other_thread = [], [], []
    lin = torch.nn.Linear(2, 2)

    def call_module(module, call, args, kwargs):
        calls.append(type(module).__name__)
        return call(module, *args, **kwargs)

    def on_hop(name):
        hops.append(name)
        raise RuntimeError("refused")

    saved = (torch.nn.Module.__call__, HigherOrderOperator.__call__, is_fx_tracing(), torch.is_autocast_cache_enabled())
    with tracing_patches(), fast_recording(call_module, on_hop):
        assert is_fx_tracing() and not torch.is_autocast_cache_enabled()
        lin(torch.randn(1, 2))
        worker = threading.Thread(target=lambda: other_thread.append(lin(torch.randn(1, 2)).shape))
        worker.start()
        worker.join()
        with pytest.raises(RuntimeError, match="refused"):
            torch.cond(torch.tensor(True), lambda x: x + 1, lambda x: x - 1, (torch.randn(2),))
    assert calls == ["Linear"]  # the other thread's call went straight to the module
    assert other_thread == [torch.Size([1, 2])]
    assert hops and "cond" in hops[0]
    assert (torch.nn.Module.__call__, HigherOrderOperator.__call__, is_fx_tracing(), torch.is_autocast_cache_enabled()) == saved


def test_direct_pre_dispatch_hands_calls_to_an_accepted_mode_only(monkeypatch):
    """A pre-dispatch trace records the same graph with calls handed straight to its mode;
    a mode not accepted gets torch's own per-call kernel.  (Other threads get torch's
    kernel as every replacement here gives them the original; their fx traces wait.)"""
    import torch._library.utils as library_utils
    from torch._ops import OpOverload
    from exporter._torch_internals.fast import is_make_fx_mode
    from exporter.trace.fast.patches import direct_pre_dispatch

    handed = []
    real = library_utils.handle_dispatch_mode
    monkeypatch.setattr(library_utils, "handle_dispatch_mode", lambda *a, **k: handed.append(a[1]) or real(*a, **k))

    def traced():
        fn = lambda t: torch.nn.functional.linear(t, t).relu()  # noqa: E731
        return make_fx(fn, pre_dispatch=True)(torch.randn(2, 2)).code

    plain = traced()
    assert torch.ops.aten.linear.default in handed
    get_dispatch = OpOverload._get_dispatch
    with tracing_patches():
        handed.clear()
        with direct_pre_dispatch(lambda mode: False):
            assert traced() == plain and torch.ops.aten.linear.default in handed
        handed.clear()
        with direct_pre_dispatch(is_make_fx_mode):
            assert traced() == plain and handed == []
    assert OpOverload._get_dispatch is get_dispatch


# -- the program's graph module ------------------------------------------------------------


def _program_module(graph_module):
    """What ExportedProgram.__init__ wraps ``graph_module``'s graph in, as it calls it."""
    import torch.export.exported_program as exported_program

    return exported_program._create_graph_module_for_export(graph_module, graph_module.graph)


def _has_code(graph_module) -> bool:
    return "_code" in graph_module.__dict__


def test_a_program_made_in_the_block_compiles_its_code_on_first_use_and_torchs_factory_returns_after():
    import torch.export.exported_program as exported_program

    from exporter.trace.fast.patches import program_code_deferred

    factory = exported_program._create_graph_module_for_export
    traced = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    with program_code_deferred():
        with program_code_deferred():  # nested: the inner block's end keeps the outer's factory
            pass
        made = _program_module(traced)
        assert not _has_code(made)
    assert exported_program._create_graph_module_for_export is factory
    x = torch.randn(3, 2)
    torch.testing.assert_close(made(x), traced(x))
    assert _has_code(made) and "linear" in made.code
    assert _has_code(_program_module(traced)), "outside the block, torch's own factory"


def test_another_threads_programs_compile_at_once_while_the_block_is_open_and_blocks_overlap():
    import torch.export.exported_program as exported_program

    from exporter.trace.fast.patches import program_code_deferred

    factory = exported_program._create_graph_module_for_export
    traced = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    inside, leave, made = threading.Event(), threading.Event(), {}

    def other():
        made["plain"] = _program_module(traced)
        with program_code_deferred():
            inside.set()
            leave.wait(30)
            made["deferred"] = _program_module(traced)

    with program_code_deferred():
        worker = threading.Thread(target=other)
        worker.start()
        assert inside.wait(30)
    # this thread's block ended first: the other thread's is still open
    assert exported_program._create_graph_module_for_export is not factory
    assert _has_code(_program_module(traced)), "a thread outside every block"
    leave.set()
    worker.join(30)
    assert _has_code(made["plain"]) and not _has_code(made["deferred"])
    assert exported_program._create_graph_module_for_export is factory
