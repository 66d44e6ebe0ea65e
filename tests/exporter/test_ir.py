"""The IR names shared by tracer, passes, verifier and reports, and the user's line of a node."""

import os

import pytest
import torch
from torch.export.graph_signature import InputKind, OutputKind

import exporter
from exporter._ir import (
    PLACEHOLDER_PREFIXES,
    ROOT_MODULE_KEY,
    STATE_MUTATIONS,
    graph_modules,
    graph_symbols,
    has_side_effects,
    is_library_frame,
    module_stack_key,
    node_frame,
    node_location,
)

HERE = os.path.abspath(__file__)


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


class ChecksOnOneSide(torch.nn.Module):
    def forward(self, x):
        def checked(t):
            torch._assert_async((t > 0).all(), "negative")
            return t.sin()

        return torch.cond(x.sum() > 0, checked, lambda t: t.cos(), (x,))


@pytest.mark.parametrize("model, effects", [(Branchy, False), (ChecksOnOneSide, True)], ids=["pure sides", "an assert on one side"])
def test_a_higher_order_call_has_side_effects_where_a_subgraph_does(model, effects):
    gm = torch.export.export(model(), (torch.randn(3),)).graph_module
    (cond,) = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert has_side_effects(cond, gm) is effects
    assert has_side_effects(cond, gm, lambda n: True)  # what counts as impure is the caller's


def test_graph_symbols_are_read_from_every_value():
    from torch.export import Dim

    class Nonzero(torch.nn.Module):
        def forward(self, x):
            return x.nonzero(), x.shape[0] * 2

    ep = exporter.export(Nonzero(), (torch.randn(4),), dynamic_shapes={"x": {0: Dim("n")}})
    names = sorted(str(s)[0] for s in graph_symbols(ep.graph_module))
    assert names == ["s", "u"]  # the input size, and the nonzero count


def test_library_frames_are_torch_exporter_and_the_standard_library():
    assert is_library_frame(torch.__file__)
    assert is_library_frame(exporter.__file__)
    assert is_library_frame(exporter.passes.__file__) and is_library_frame(exporter.verifier.__file__)
    assert is_library_frame(os.__file__) and is_library_frame("<string>")
    assert not is_library_frame(HERE)


def _node_with(stack_trace):
    node = torch.fx.Graph().call_function(torch.relu, ())
    node.meta["stack_trace"] = stack_trace
    return node


LINEAR = os.path.abspath(torch.nn.modules.linear.__file__)


@pytest.mark.parametrize(
    "stack_trace, location, code",
    [
        # the user's forward calls nn.Linear: the innermost frame is torch's, the user's is wanted
        (f'File "{HERE}", line 7, in forward\n    y = self.proj(x)\n  File "{LINEAR}", line 134, in forward\n'
         "    return F.linear(input, self.weight, self.bias)", f"{HERE}:7", "y = self.proj(x)"),
        (f'File "{HERE}", line 3, in forward\n    h = self.block(x)\n  File "{HERE}", line 9, in forward\n'
         "    return h * 2", f"{HERE}:9", "return h * 2"),
        (f'File "{LINEAR}", line 134, in forward\n    return F.linear(input, self.weight, self.bias)', None, None),
        (None, None, None),
    ],
)
def test_a_nodes_location_is_the_innermost_user_frame_of_its_stack_trace(stack_trace, location, code):
    node = _node_with(stack_trace)
    assert node_location(node) == location
    frame = node_frame(node)
    assert (frame.line if frame else None) == code


class Projects(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.proj(x) * 2


def test_a_traced_node_is_located_at_the_users_call_not_inside_torch():
    ep = exporter.export(Projects(), (torch.randn(1, 2),))
    linear = next(n for n in ep.graph.nodes if n.target is torch.ops.aten.linear.default)
    assert LINEAR in linear.meta["stack_trace"]
    assert node_location(linear) == f"{HERE}:{Projects.forward.__code__.co_firstlineno + 1}"
