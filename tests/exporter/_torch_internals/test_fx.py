"""make_fx helpers: module-call recording and the active trace's graph and nodes."""


import torch

from exporter import _torch_internals as internals


def test_tracing_helpers():
    holder = torch.nn.Module()
    gm = internals.record_module_calls(lambda x: x.relu(), holder, {}, [torch.randn(2)])
    assert [str(n.target) for n in gm.graph.nodes if n.op == "call_function"] == ["aten.relu.default"]
    assert isinstance(internals.module_stack_tracer(), type)
    assert isinstance(internals.uninteresting_files(), set)
    internals.stack_trace_anchors()  # exists in this torch (empty or not)


def test_the_active_trace_and_its_nodes():
    seen = {}

    def relu(x):
        y = x.relu()
        seen["graph"], seen["node"] = internals.traced_graph(), internals.traced_node(y)
        return y

    gm = internals.record_module_calls(relu, torch.nn.Module(), {}, [torch.randn(2)])
    assert seen["node"].target is torch.ops.aten.relu.default and seen["node"].graph is seen["graph"]
    assert seen["graph"] is gm.graph
    assert internals.traced_graph() is None and internals.traced_node(torch.randn(2)) is None


def test_torch_finds_the_traced_module_under_the_export_root():
    from torch._functorch._aot_autograd.utils import root_module_when_exporting_non_strict
    from torch.export._trace import _strip_root

    module, holder = torch.nn.Linear(2, 2), torch.nn.Module()
    setattr(holder, internals.EXPORT_ROOT, module)

    def traced(x):
        return x

    traced._orig_mod = holder
    assert root_module_when_exporting_non_strict(traced) is module
    assert _strip_root(f"{internals.EXPORT_ROOT}.encoder.0") == "encoder.0"
