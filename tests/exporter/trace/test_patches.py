"""Every process-wide patch is in place during a trace and gone afterwards, also after an error."""

import builtins
import math
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses import fake_impls

import exporter
from exporter._torch_internals import FunctionalTensor, compiler_flags, module_stack_tracer, record_module_calls
from exporter.trace.kernels import CONVERSIONS
from exporter.trace.patches import EXPORT_LOCK, tracing_patches


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
    }


def test_patches_are_active_inside_and_undone_on_exit():
    before = _global_state()
    with tracing_patches():
        inside = _global_state()
        torch.set_grad_enabled(False)
    changed = {key for key in before if inside[key] != before[key]}
    assert changed == set(before) - {"grad"}
    assert _global_state() == before


def test_patches_are_undone_after_an_error():
    before = _global_state()
    with pytest.raises(RuntimeError, match="inside"):
        with tracing_patches():
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


def test_python_replacements_act_only_in_the_tracing_thread():
    seen = {}

    def other_thread():
        seen["max"] = max(torch.tensor([0.2]), 0.5)  # eager Python: the larger of the two, a float
        seen["pow"] = math.pow(2, 3)

    with tracing_patches():
        assert torch.equal(max(torch.tensor([0.2]), 0.5), torch.tensor([0.5]))  # here: clamp
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert seen == {"max": 0.5, "pow": 8.0}


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
