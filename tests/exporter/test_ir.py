"""The IR names shared by tracer, passes, verifier and reports."""

import torch
from torch.export.graph_signature import InputKind, OutputKind

import exporter
from exporter._ir import PLACEHOLDER_PREFIXES, ROOT_MODULE_KEY, STATE_MUTATIONS, graph_modules, graph_symbols, module_stack_key


class Branchy(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))


def test_prefixes_cover_every_input_kind():
    assert set(PLACEHOLDER_PREFIXES) == set(InputKind)
    assert PLACEHOLDER_PREFIXES[InputKind.USER_INPUT] == ""


def test_state_mutations_name_the_input_kind_they_update():
    assert STATE_MUTATIONS == {OutputKind.BUFFER_MUTATION: InputKind.BUFFER, OutputKind.PARAMETER_MUTATION: InputKind.PARAMETER}


def test_module_stack_keys_are_torch_exports():
    ep = torch.export.export(torch.nn.Sequential(torch.nn.Linear(2, 2)), (torch.randn(1, 2),))
    linear = next(n for n in ep.graph.nodes if n.op == "call_function")
    assert list(linear.meta["nn_module_stack"]) == [ROOT_MODULE_KEY, module_stack_key("0")]


def test_graph_modules_include_higher_order_op_subgraphs():
    ep = exporter.export(Branchy(), (torch.randn(3),))
    modules = graph_modules(ep.graph_module)
    assert modules[0] is ep.graph_module and len(modules) == 3


def test_graph_symbols_are_read_from_every_value():
    from torch.export import Dim

    class Nonzero(torch.nn.Module):
        def forward(self, x):
            return x.nonzero(), x.shape[0] * 2

    ep = exporter.export(Nonzero(), (torch.randn(4),), dynamic_shapes={"x": {0: Dim("n")}})
    names = sorted(str(s)[0] for s in graph_symbols(ep.graph_module))
    assert names == ["s", "u"]  # the input size, and the nonzero count
