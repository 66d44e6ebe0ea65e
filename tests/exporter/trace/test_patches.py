"""Every process-wide patch is in place during a trace and gone afterwards, also after an error."""

import builtins
import math
import subprocess
import sys
import textwrap
import threading
import types

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses import fake_impls

import exporter
from torch._subclasses import fake_utils

from exporter._torch_internals.fast import MAKE_FX_TENSOR_METADATA
from exporter._torch_internals import (
    DimDynamic,
    FakeTensorMode,
    FakeImplCtx,
    FunctionalTensor,
    FunctionalTensorMode,
    HigherOrderOperator,
    ShapeEnv,
    StatelessSymbolicContext,
    compiler_flags,
    constant_source,
    dynamo_compile_lock,
    enable_python_dispatcher,
    make_fx,
    module_stack_tracer,
    record_module_calls,
)
from exporter.trace.fast import FastPaths
from exporter.trace.kernels import CONVERSIONS
from exporter.trace.patches import EXPORT_LOCK, tracing_patches
from tests.support import OpsSeen


def _global_state():
    """Everything tracing_patches may change, as comparable values."""
    linear = torch.ops.aten.linear.default
    return {
        "max": builtins.max,
        "min": builtins.min,
        "pow": math.pow,
        "functional to": FunctionalTensor.to,
        "create_node": module_stack_tracer().create_node,
        "stack trace flag": torch.fx.config.do_not_emit_stack_traces,
        "linear kernels": dict(linear.py_kernels),
        "conversion kernels": [dict(op.py_kernels) for op in CONVERSIONS],
        "fake rules": dict(fake_impls.op_implementations_dict),
        "compiler flags": compiler_flags(),
        "mkldnn": torch.backends.mkldnn.enabled,
        "grad": torch.is_grad_enabled(),
        "getitem": torch.Tensor.__dict__.get("__getitem__"),
        "tensor": torch.tensor,
        "tensor metadata": getattr(*MAKE_FX_TENSOR_METADATA),
        "higher-order op call": HigherOrderOperator.__dict__["__call__"],
        "dispatch miss": torch._ops.OpOverload.__dict__["_get_dispatch"],
        "deprecated data-sized size": FakeImplCtx.__dict__["create_unbacked_symint"],
    }


def test_patches_are_active_inside_and_undone_on_exit():
    before = _global_state()
    with tracing_patches(fast=FastPaths.resolve(True)):
        F.linear(torch.ones(1, 2), torch.ones(3, 2))  # a composite's table goes in as it is first met
        inside = _global_state()
        torch.set_grad_enabled(False)
    changed = {key for key in before if inside[key] != before[key]}
    # fx's stack-trace flag is set on our tracer instead (the config is shared by all threads)
    assert changed == set(before) - {"grad", "stack trace flag"}
    assert _global_state() == before


def test_patches_are_undone_after_an_error():
    before = _global_state()
    with pytest.raises(RuntimeError, match="inside"):
        with tracing_patches(fast=FastPaths.resolve(True)):
            torch.set_grad_enabled(False)
            raise RuntimeError("inside")
    assert _global_state() == before


def test_a_node_hook_that_raises_stops_the_trace_and_the_patches_are_undone():
    before = _global_state()

    def hook(node):
        if node.op == "call_function":
            raise LookupError(f"saw {node.target}")

    with pytest.raises(LookupError, match="saw aten.relu"):
        with tracing_patches(hook):
            record_module_calls(lambda x: torch.relu(x), torch.nn.Module(), {}, [torch.ones(2)])
    assert _global_state() == before


def test_eager_execution_inside_the_patches_is_unchanged():
    x, w, b = torch.randn(2, 3), torch.randn(4, 3), torch.randn(4)
    expected = F.linear(x, w, b), x.to(torch.float64), max(3, 4), math.pow(2, 3)
    with tracing_patches():
        got = F.linear(x, w, b), x.to(torch.float64), max(3, 4), math.pow(2, 3)
    torch.testing.assert_close(got[:2], expected[:2])
    assert got[2:] == expected[2:] and isinstance(got[3], float)


def test_a_kernel_registered_during_the_patches_survives_them():
    op = torch.ops.aten.linear.default
    before = dict(op.py_kernels)
    marker = lambda *a, **k: NotImplemented  # noqa: E731
    key = torch._C.DispatchKey.AutocastCPU
    assert key not in before
    try:
        with tracing_patches():
            op.py_kernels[key] = marker
        assert op.py_kernels[key] is marker
        assert {k: v for k, v in op.py_kernels.items() if k != key} == before
    finally:
        op.py_kernels.pop(key, None)
        op._dispatch_cache.clear()


def _outcome(probe):
    """What ``probe()`` returns, or the name of what it raised."""
    try:
        return probe()
    except Exception as e:  # noqa: BLE001 - the outcome is what the tests compare
        return f"raised {type(e).__name__}"


def _in_another_thread(probe):
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("outcome", _outcome(probe)))
    worker.start()
    worker.join()
    return box["outcome"]


def _python_semantics_probe():
    t = torch.arange(6.0).view(2, 3)
    return repr((max(torch.tensor([0.2]), 0.5), min(3, 4), math.pow(2, 3), t[1], torch.tensor([2])))


def _linear_with_autograd_probe():
    # A user's own Python-dispatcher code (as torch.compile's AOTAutograd runs it): linear
    # expands at the autograd key and records autograd through its parts (a trace keeps it
    # whole, with a backward of its own).
    x, w = torch.randn(2, 3), torch.randn(4, 3, requires_grad=True)
    with enable_python_dispatcher():
        y = F.linear(x, w)
    return type(y.grad_fn).__name__


def _linear_ops_probe():
    with enable_python_dispatcher(), OpsSeen() as seen:
        F.linear(torch.randn(2, 3), torch.randn(4, 3))
    return seen.ops


def _conversion_ops_probe():
    with enable_python_dispatcher(), OpsSeen() as seen:
        torch.randn(2).to(torch.float64)
    return seen.ops


def _symbolic_fake_probe():
    # A FakeTensorMode computation with a symbolic size: composites expand, and max on the
    # size is Python's (a guard), not our sym_max.
    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    x = mode.from_tensor(torch.randn(5, 3), source=constant_source("x"), symbolic_context=dynamic)
    w = mode.from_tensor(torch.randn(4, 3), static_shapes=True)
    with mode, enable_python_dispatcher(), OpsSeen() as seen:
        out = F.linear(x, w)[: max(x.shape[0], 4)]
    return seen.ops, [str(guard.expr) for guard in shape_env.guards], str(out.shape)


def _symbolic_view_probe():
    # A symbolic batch split in two: torch's fake kernel makes the 3 asked for as an expression.
    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    x = mode.from_tensor(torch.randn(6, 4), source=constant_source("x"), symbolic_context=dynamic)
    with mode:
        return str(x[None].view(x.shape[0] // 3, 3, 4).shape)


def _functional_to_probe():
    t = torch.randn(2)
    with OpsSeen() as seen, FunctionalTensorMode(export=True), torch._C._DisablePythonDispatcher():
        FunctionalTensor.to_functional(t).to(torch.float64)
    return seen.ops


def _draft_offset_check_probe():
    # A data-dependent storage offset (the second column of nonzero): torch's check guards on it.
    real = torch.tensor([[1, 0], [0, 1], [1, 1]])
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        column = torch.nonzero(mode.from_tensor(real), as_tuple=True)[1]
    fake_utils._check_fake_real_tensors(torch.nonzero(real, as_tuple=True)[1], column, "", sizes=False)
    return "checked"


@pytest.mark.parametrize(
    "probe",
    [
        _python_semantics_probe,
        _linear_with_autograd_probe,
        _linear_ops_probe,
        _conversion_ops_probe,
        _symbolic_fake_probe,
        _symbolic_view_probe,
        _functional_to_probe,
        _draft_offset_check_probe,
    ],
    ids=lambda probe: probe.__name__.strip("_").removesuffix("_probe"),
)
def test_another_thread_sees_torch_and_python_unpatched_during_a_trace(probe):
    expected = _in_another_thread(probe)
    with tracing_patches(draft=True):
        here = _outcome(probe)
        elsewhere = _in_another_thread(probe)
    assert here != expected  # the patch acts in the tracing thread (so the probe can see it) ...
    assert elsewhere == expected  # ... and nowhere else


def test_another_threads_module_stack_tracer_keeps_torch_stack_traces_and_skips_the_node_hook():
    def build_a_node():
        tracer = module_stack_tracer()(torch.nn.Module())
        tracer.graph = torch.fx.Graph()
        node = tracer.create_node("call_function", torch.relu, (), {})
        return node.op, tracer.record_stack_traces

    expected = _in_another_thread(build_a_node)
    hooked = []
    with tracing_patches(hooked.append):
        here = _outcome(build_a_node)
        elsewhere = _in_another_thread(build_a_node)
    assert expected == ("call_function", True)  # torch.fx's default: record stack traces
    assert here == ("call_function", False) and len(hooked) == 1  # ours, cheaply, and hooked
    assert elsewhere == expected and len(hooked) == 1


def test_exports_in_two_threads_take_turns():
    inside = threading.Event()
    finished = []

    def export_in_thread():
        exporter.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
        finished.append(True)

    with EXPORT_LOCK:
        worker = threading.Thread(target=export_in_thread)
        worker.start()
        inside.wait(0.5)
        assert not finished  # held off while this thread holds the lock
    worker.join(60)
    assert finished == [True]


@pytest.mark.slow
def test_exporting_leaves_no_trace_in_later_torch_exports():
    """Running exporter first must not change what torch.export itself produces afterwards."""
    script = textwrap.dedent(
        """
        import sys, torch, exporter
        from collections import Counter
        from tests.exporter.trace.test_kernels import TransposedAttention
        model, x = TransposedAttention(), torch.randn(2, 8, 32)
        if sys.argv[1] == "ours-first":
            exporter.export(model, (x,))
        ep = torch.export.export(model, (x,), strict=False).run_decompositions({})
        print(sorted(Counter(str(n.target) for n in ep.graph.nodes if n.op == "call_function").items()))
        """
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", script, order], capture_output=True, text=True, check=True
        ).stdout.strip().splitlines()[-1]
        for order in ("oracle-alone", "ours-first")
    ]
    assert outputs[0] == outputs[1]


def test_dynamo_config_for_compiled_bodies_is_set_only_while_tracing():
    import torch._dynamo.config as dynamo_config  # loaded: as once a torch.cond has run

    before = (dynamo_config.automatic_dynamic_shapes, dynamo_config.capture_scalar_outputs)
    with tracing_patches():
        assert dynamo_config.automatic_dynamic_shapes is False
        assert dynamo_config.capture_scalar_outputs is True
    assert (dynamo_config.automatic_dynamic_shapes, dynamo_config.capture_scalar_outputs) == before


def test_cond_bodies_compiled_during_an_export_are_forgotten_after_it():
    import sys
    import types

    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    import exporter

    def on_true(a):
        return a.cos()

    def on_false(a):
        return a.sin()

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, on_true, on_false, (x,))

    cond_module = sys.modules["torch._higher_order_ops.cond"]
    (wrapper,) = [
        c for c in cond_module.cond.__code__.co_consts
        if isinstance(c, types.CodeType) and c.co_name == "_cond_op_wrapper"
    ]
    exporter.export(Branchy(), (torch.randn(4, 3),))
    assert _debug_get_cache_entry_list(wrapper) == []  # nothing left for a later export to look up
    Branchy()(torch.randn(4, 3))  # eager cond still compiles and runs
    assert len(_debug_get_cache_entry_list(wrapper)) == 1


def test_a_cond_run_in_another_thread_keeps_its_compiled_body():
    # Only what the trace itself compiled is forgotten: another thread's eager cond, a cache
    # hit during the trace, must not lose its entry.
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    def on_true(a):
        return a + 1

    def on_false(a):
        return a - 1

    def branchy(x):
        return torch.cond(x.sum() > 0, on_true, on_false, (x,))

    cond_module = sys.modules["torch._higher_order_ops.cond"]
    (wrapper,) = [
        c for c in cond_module.cond.__code__.co_consts
        if isinstance(c, types.CodeType) and c.co_name == "_cond_op_wrapper"
    ]
    x = torch.ones(3)
    branchy(x)
    entries = len(_debug_get_cache_entry_list(wrapper))
    results = []
    with tracing_patches():
        worker = threading.Thread(target=lambda: results.append(branchy(x)))
        worker.start()
        worker.join(0.5)  # it found the compiled body, then waits for the trace to run it
    worker.join(120)
    assert len(results) == 1 and torch.equal(results[0], x + 1)
    assert len(_debug_get_cache_entry_list(wrapper)) == entries


def test_a_compilation_in_another_thread_waits_for_the_trace():
    def exporting_or_not(x):
        return x + 1 if torch.compiler.is_exporting() else x - 1

    compiled = torch.compile(exporting_or_not, backend="eager")  # imports Dynamo: its lock exists
    results = []
    with tracing_patches():
        assert _in_another_thread(lambda: dynamo_compile_lock().acquire(blocking=False)) is False
        worker = threading.Thread(target=lambda: results.append(compiled(torch.zeros(1))))
        worker.start()
        worker.join(0.5)
        assert results == []  # it cannot compile while the trace holds Dynamo's lock
    worker.join(120)
    assert results == [torch.full((1,), -1.0)]  # compiled after the trace: not exporting


def test_an_export_from_a_compile_backend_does_not_deadlock_with_another_export():
    # Dynamo holds its compile lock while the backend runs; an export waiting for that lock
    # must not hold EXPORT_LOCK meanwhile, or the backend's export could never start.
    backend_running = threading.Event()
    outcomes = {}

    def exporting_backend(gm, example_inputs):
        backend_running.set()
        threading.Event().wait(0.3)  # let the other export start and find the lock taken
        outcomes["backend export"] = exporter.export(torch.nn.ReLU(), (torch.randn(2),)) is not None
        return gm

    def compile_and_run():
        torch.compile(lambda x: x * 2, backend=exporting_backend)(torch.randn(2))

    def export_meanwhile():
        backend_running.wait(60)
        outcomes["export"] = exporter.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),)) is not None

    workers = [threading.Thread(target=f, daemon=True) for f in (compile_and_run, export_meanwhile)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert outcomes == {"backend export": True, "export": True}


def test_another_threads_call_of_a_shared_submodule_stays_out_of_the_module_stack():
    # make_fx routes every thread's module calls through the tracer; a serving thread
    # calling a submodule of the model being exported must not appear in its node metadata.
    inside, release, started = threading.Event(), threading.Event(), []

    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            if threading.current_thread().name == "serving":
                inside.set()
                release.wait(60)  # stays inside the call while the trace goes on
            return self.lin(x)

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.shared, self.tail = Inner(), torch.nn.Linear(4, 4)

        def forward(self, x):
            if type(x) is not torch.Tensor and not started:
                started.append(True)
                serving = threading.Thread(target=lambda: self.shared(torch.ones(1, 4)), name="serving")
                serving.start()
                inside.wait(60)
                y = self.tail(x).relu()  # recorded while the other thread is inside `shared`
                release.set()
                serving.join(60)
                return self.shared(y)
            return self.shared(self.tail(x).relu())

    program = exporter.export(Outer(), (torch.randn(2, 4),))
    stacks = {n.name: [path for path, _ in n.meta["nn_module_stack"].values()] for n in program.graph.nodes if n.op == "call_function"}
    assert stacks == {"linear": ["", "tail"], "relu": [""], "linear_1": ["", "shared", "shared.lin"]}


def test_fx_traces_and_higher_order_ops_in_another_thread_wait_for_the_trace():
    # make_fx keeps its state in module globals: another thread's trace must not run inside ours.
    def on_true(a):
        return a + 1

    def on_false(a):
        return a - 1

    x = torch.ones(3)
    torch.cond(x.sum() > 0, on_true, on_false, (x,))  # compiled before: the call below is a cache hit
    results = {}
    work = {
        "make_fx": lambda: [str(n.target) for n in make_fx(lambda t: t * 2)(x).graph.nodes if n.op == "call_function"],
        "cond": lambda: torch.cond(x.sum() > 0, on_true, on_false, (x,)).tolist(),
    }
    with tracing_patches():
        workers = [threading.Thread(target=lambda k=k, f=f: results.setdefault(k, f())) for k, f in work.items()]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(0.5)
        assert results == {}  # both wait while the trace runs
    for worker in workers:
        worker.join(120)
    assert results == {"make_fx": ["aten.mul.Tensor"], "cond": [2.0, 2.0, 2.0]}


def test_is_exporting_is_answered_per_thread_and_torch_compile_elsewhere_compiles():
    def double(t):
        return t * 2

    with tracing_patches():
        here = (torch.compiler.is_exporting(), torch.compiler.is_compiling())
        elsewhere = _in_another_thread(
            lambda: (torch.compiler.is_exporting(), torch.compiler.is_compiling(), torch.compile(double) is double)
        )
    assert here == (True, True)
    # is_compiling() stays process-wide (documented): it keeps torch.fx's process-wide
    # "fx tracing" flag from failing compiled functions called elsewhere during the trace
    assert elsewhere == (False, True, False)


def test_a_cond_body_using_builtins_exports():
    # Dynamo compiles cond bodies itself and knows max by identity: it must see Python's own.
    def on_true(a):
        return a[: max(a.shape[0], 2)] * 2

    def on_false(a):
        return a - min(a.shape[0], 1)

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, on_true, on_false, (x,))

    x = torch.rand(4, 3)
    program = exporter.export(Branchy(), (x,))
    torch.testing.assert_close(program.module()(x), Branchy()(x))
    torch.testing.assert_close(program.module()(-x), Branchy()(-x))


_HELD_ELSEWHERE = torch.nn.Parameter(torch.tensor([0.5, -1.0]))
"""A parameter of no module exported: the bodies below reach it through their closure."""


def _map_over_rows(xs):
    from torch._higher_order_ops.map import map as hop_map

    return hop_map(lambda row: row * _HELD_ELSEWHERE, xs)


def _cond_on_sum(xs):
    return torch.cond(xs.sum() > 0, lambda a: a + _HELD_ELSEWHERE, lambda a: a - _HELD_ELSEWHERE, (xs,))


@pytest.mark.parametrize("body", [_map_over_rows, _cond_on_sum], ids=["map", "cond"])
def test_a_higher_order_op_gets_a_parameter_held_elsewhere_in_a_functionalized_trace(body):
    # The in-place write makes the trace functionalized, where torch's rule for the op would
    # refuse the real nn.Parameter (a tensor subclass) it is called with.
    class WritesThenCalls(torch.nn.Module):
        def forward(self, xs, count):
            count.add_(1)
            return body(xs) * count

    xs = torch.randn(3, 2)
    program = exporter.export(WritesThenCalls(), (xs, torch.tensor(1.0)))
    kinds = [spec.kind.name for spec in program.graph_signature.input_specs]
    assert kinds == ["CONSTANT_TENSOR", "USER_INPUT", "USER_INPUT"]
    for sample in (xs, -xs.abs()):
        count = torch.tensor(2.0)
        torch.testing.assert_close(program.module()(sample, count), WritesThenCalls()(sample, torch.tensor(2.0)))
        assert count.item() == 3.0
    assert type(_HELD_ELSEWHERE) is torch.nn.Parameter and _HELD_ELSEWHERE.requires_grad


def test_torch_compile_knows_builtins_after_the_first_export_of_a_process():
    # The first trace of a process imports Dynamo (torch's ShapeEnv does); Dynamo keeps
    # references to builtins from import time, so it must not see our replacements then.
    script = textwrap.dedent(
        """
        import torch, exporter
        exporter.export(torch.nn.Linear(3, 3), (torch.randn(2, 3),))
        compiled = torch.compile(lambda x: x * max(x.shape[0], 2), fullgraph=True, backend="eager")
        print(compiled(torch.ones(3)).tolist())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1:] == ["[3.0, 3.0, 3.0]"], done.stderr[-2000:]


# -- the garbage collector ----------------------------------------------------------------


class SeesCollector(torch.nn.Module):
    """Tells ``note`` whether the cyclic collector runs on its own during forward (a list
    on the model would be put back as it was: an export leaves the model unchanged); may
    raise."""

    def __init__(self, note, fail: bool = False):
        super().__init__()
        self.note = note
        self.fail = fail

    def forward(self, x):
        import gc

        self.note(gc.isenabled())
        if self.fail:
            raise RuntimeError("forward failed")
        return x + 1


@pytest.mark.parametrize("fail", [False, True], ids=["exported", "failed"])
def test_the_collector_is_paused_during_an_export_and_resumed_after(fail):
    import gc

    seen = []
    model = SeesCollector(seen.append, fail)
    assert gc.isenabled()
    if fail:
        with pytest.raises(exporter.ExportError):
            exporter.export(model, (torch.randn(2),))
    else:
        exporter.export(model, (torch.randn(2),))
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled():
    import gc

    gc.disable()
    try:
        exporter.export(SeesCollector(lambda enabled: None), (torch.randn(2),))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_resume_the_collector_when_the_last_one_ends():
    """Two threads' exports overlap: the collector resumes only after both, whichever
    ends first."""
    import gc

    from exporter.trace.patches import gc_paused

    inside, leave = threading.Event(), threading.Event()
    states = []

    def other():
        with gc_paused():
            inside.set()
            leave.wait(30)
        states.append(("other out", gc.isenabled()))

    with gc_paused():
        worker = threading.Thread(target=other)
        worker.start()
        assert inside.wait(30)
    states.append(("main out", gc.isenabled()))
    leave.set()
    worker.join(30)
    assert states == [("main out", False), ("other out", True)]
    assert gc.isenabled()


@pytest.mark.parametrize("compiling, exporting", [(False, True), (True, False), (True, True)])
def test_compiler_flags_as_traced_set_the_queries_for_an_eager_run_and_put_them_back(compiling, exporting):
    from exporter.trace.patches import compiler_flags_as_traced

    before, query = compiler_flags(), torch.compiler.is_exporting
    with compiler_flags_as_traced(compiling=compiling, exporting=exporting):
        here = (torch.compiler.is_compiling(), torch.compiler.is_exporting())
        elsewhere = _in_another_thread(torch.compiler.is_exporting)
        locked_out = not _in_another_thread(lambda: EXPORT_LOCK.acquire(blocking=False) and not EXPORT_LOCK.release())
    assert here == (compiling, exporting) and elsewhere == before[1] and locked_out
    assert compiler_flags() == before and torch.compiler.is_exporting is query
