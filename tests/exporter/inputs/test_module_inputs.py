"""An nn.Module passed as an input: its parameters and buffers become user inputs."""

import torch
import torch.utils._pytree as pytree

import exporter
from exporter.inputs.module_inputs import register_module_inputs


class Scale(torch.nn.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((3,), factor))
        self.register_buffer("shift", torch.ones(3))

    def forward(self, x):
        return x * self.weight + self.shift


class UsesHelper(torch.nn.Module):
    def forward(self, x, helper):
        return helper(x) + 1


def test_the_module_class_flattens_to_its_state_and_back():
    helper = Scale(2.0)
    register_module_inputs((helper,))
    leaves, spec = pytree.tree_flatten_with_path(helper)
    assert [(pytree.keystr(path), value is getattr(helper, pytree.keystr(path)[2:-2])) for path, value in leaves] == [
        ("['weight']", True),
        ("['shift']", True),
    ]
    assert pytree.tree_unflatten([v for _, v in leaves], spec) is helper
    copy = pytree.tree_unflatten([torch.zeros(3), torch.full((3,), 5.0)], spec)
    assert copy is not helper and torch.equal(copy(torch.ones(3)), torch.full((3,), 5.0))
    assert torch.equal(helper.weight, torch.full((3,), 2.0))  # the example module is untouched
    assert pytree.tree_structure(Scale(7.0)) == spec  # any module of the class fits the spec


def test_a_program_takes_any_module_of_the_class():
    ep = exporter.export(UsesHelper(), (torch.randn(3), Scale(2.0)))
    names = [s.arg.name for s in ep.graph_signature.input_specs]
    assert names == ["x", "helper_weight", "helper_shift"]
    other, x = Scale(-1.0), torch.randn(3)
    torch.testing.assert_close(ep.module()(x, other), UsesHelper()(x, other))
