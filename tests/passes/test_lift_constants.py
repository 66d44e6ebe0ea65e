import os

import pytest
import torch
from torch.export.graph_signature import InputKind

import exporter
from exporter import Category, TraceError
from exporter.passes import lift_constants
from tests.support import call_targets, specs_by_name, traced_state


class WithConstants(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = torch.nn.Module()
        self.sub.scale = torch.full((3,), 2.0)
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.sub.scale + torch.tensor([1.0, 2.0, 3.0])


def test_attribute_and_forward_constants_become_constant_inputs():
    model = WithConstants()
    state = traced_state(model, (torch.randn(2, 3),), until=lift_constants)
    assert any(n.op == "get_attr" for n in state.gm.graph.nodes)

    assert lift_constants(state) is True

    constants = [s for s in state.input_specs if s.kind == InputKind.CONSTANT_TENSOR]
    assert [s.target for s in constants] == ["sub.scale", "lifted_tensor_0"]
    assert state.constants["sub.scale"] is model.sub.scale
    assert torch.equal(state.constants["lifted_tensor_0"], torch.tensor([1.0, 2.0, 3.0]))
    assert not any(n.op == "get_attr" for n in state.gm.graph.nodes)
    assert not [k for k, v in vars(state.gm).items() if isinstance(v, torch.Tensor)]
    assert not state.gm._buffers
    # a tensor made in forward is copied out of its constant with clone, as torch.export does
    assert torch.ops.aten.clone.default in call_targets(state.gm)


def test_constants_go_after_state_and_before_user_inputs():
    state = traced_state(WithConstants(), (torch.randn(2, 3),), until=lift_constants)
    lift_constants(state)
    kinds = [s.kind for s in state.input_specs]
    assert kinds == [InputKind.PARAMETER] * 2 + [InputKind.CONSTANT_TENSOR] * 2 + [InputKind.USER_INPUT]
    placeholders = [n.name for n in state.gm.graph.nodes if n.op == "placeholder"]
    assert placeholders == [s.arg.name for s in state.input_specs]


class SharedConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        table = torch.arange(3.0)
        self.a = table
        self.inner = torch.nn.Module()
        self.inner.b = table

    def forward(self, x):
        return x + self.a + self.inner.b


def test_constant_reached_twice_is_lifted_once_under_its_first_name():
    model = SharedConstant()
    state = traced_state(model, (torch.randn(3),), until=lift_constants)
    lift_constants(state)
    constants = [s for s in state.input_specs if s.kind == InputKind.CONSTANT_TENSOR]
    assert [s.target for s in constants] == ["a"]
    placeholder = constants[0].arg.name
    add_inputs = [a.name for n in state.gm.graph.nodes if n.op == "call_function" for a in n.args if isinstance(a, torch.fx.Node)]
    assert add_inputs.count(placeholder) == 2


class NameClash(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lifted_tensor_0 = torch.ones(2)

    def forward(self, x):
        return x + self.lifted_tensor_0 + torch.tensor([5.0, 6.0])


def test_fresh_constant_names_skip_taken_fqns():
    state = traced_state(NameClash(), (torch.randn(2),), until=lift_constants)
    lift_constants(state)
    targets = sorted(s.target for s in state.input_specs if s.kind == InputKind.CONSTANT_TENSOR)
    assert targets == ["lifted_tensor_0", "lifted_tensor_1"]


class AliasesParameter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.weight_t = self.lin.weight.detach().t()

    def forward(self, x):
        return x @ self.weight_t


def test_constant_sharing_memory_with_a_parameter_is_an_error_at_the_line_reading_it():
    state = traced_state(AliasesParameter(), (torch.randn(2, 3),), until=lift_constants)
    with pytest.raises(TraceError, match=r"'weight_t' shares memory with 'lin.weight'") as info:
        lift_constants(state)
    line = AliasesParameter.forward.__code__.co_firstlineno + 1
    assert info.value.location == f"{os.path.abspath(__file__)}:{line}"


def test_no_constants_means_no_change():
    state = traced_state(torch.nn.Linear(3, 3), (torch.randn(2, 3),), until=lift_constants)
    before = [s.arg.name for s in state.input_specs]
    assert lift_constants(state) is False
    assert [s.arg.name for s in state.input_specs] == before
    assert not specs_by_name(state.input_specs).keys() & {"c_"}


class FoldsAndLifts(torch.nn.Module):
    def forward(self, y):
        a = torch.tensor(5).item()  # a constant made in forward: its value folds away
        return a * y + torch.tensor([1.0, 2.0, 3.0])


def test_constants_made_in_forward_fold_and_are_read_through_clone():
    ep = exporter.export(FoldsAndLifts(), (torch.ones(3),))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.item.default not in targets
    assert torch.ops.aten.clone.default in targets and torch.ops.aten.lift_fresh_copy.default not in targets
    assert [s.target for s in ep.graph_signature.input_specs if s.kind == InputKind.CONSTANT_TENSOR] == ["lifted_tensor_0"]
    y = torch.randn(3)
    torch.testing.assert_close(ep.module()(y), FoldsAndLifts()(y))


class ParameterInADict(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stash = {"w": torch.nn.Parameter(torch.ones(2, 2))}

    def forward(self, x):
        return x + self.stash["w"]


def test_a_parameter_held_outside_the_module_is_a_plain_constant():
    model = ParameterInADict()
    ep = exporter.export(model, (torch.randn(1, 2),))
    constant = ep.constants["lifted_tensor_0"]
    assert type(constant) is torch.Tensor and constant.data_ptr() == model.stash["w"].data_ptr()
    x = torch.randn(1, 2)
    torch.testing.assert_close(ep.module()(x), model(x))
    # its placeholder's value is the plain tensor the program holds, as in torch.export's
    placeholder = next(n for n in ep.graph.nodes if n.name == "c_lifted_tensor_0")
    assert not placeholder.meta["val"].requires_grad and not constant.requires_grad


def test_a_fake_tensor_left_in_the_graph_is_refused():
    # A value computed during the trace that the tracer did not see being computed would
    # otherwise be saved in the program as a fake tensor (it has no data).
    state = traced_state(torch.nn.ReLU(), (torch.randn(3),), until=lift_constants)
    state.gm.escaped = state.fake_mode.from_tensor(torch.ones(3))
    graph = state.gm.graph
    output = graph.output_node()
    with graph.inserting_before(output):
        read = graph.get_attr("escaped")
        total = graph.call_function(torch.ops.aten.add.Tensor, (output.args[0][0], read))
    output.args = ((total,),)
    with pytest.raises(TraceError, match="a tensor the trace did not see being made") as info:
        lift_constants(state)
    assert info.value.category is Category.CONSTANT


class ReadsParameterData(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return x * self.w.data  # line-marker: data


def test_reading_data_in_the_training_ir_names_the_line_and_says_what_to_do():
    """``.data`` is made without an op, so a pre-dispatch trace meets it as a tensor it did
    not make (torch.export fails here in both IRs); the error used to blame a tensor subclass."""
    model, x = ReadsParameterData(), torch.randn(2, 3)
    with pytest.raises(TraceError, match=r"self\.w\.data") as info:
        exporter.export(model, (x,), ir="training")
    assert ".detach() instead of .data" in info.value.hint
    with open(__file__) as source:
        line = next(i for i, text in enumerate(source, 1) if "line-marker: data" in text)
    assert info.value.location == f"{__file__}:{line}"
    ep = exporter.export(model, (x,))  # the default IR records it as a detach of the parameter
    torch.testing.assert_close(ep.module()(x), model(x))
