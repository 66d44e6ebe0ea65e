import dataclasses

import pytest
import torch

import exporter
from exporter import Category, InputSpecError, TraceError
from exporter.inputs import bind_inputs


class TwoInputs(torch.nn.Module):
    def forward(self, x, mask=None):
        return x if mask is None else x * mask


class Config:
    pass


@dataclasses.dataclass
class Unregistered:
    t: torch.Tensor


x = torch.randn(2, 3)


@pytest.mark.parametrize(
    "model, args, kwargs, match",
    [
        (lambda t: t, (x,), None, r"model must be a torch.nn.Module instance, got function"),
        (TwoInputs(), x, None, r"args must be a tuple of positional inputs, got Tensor"),
        (TwoInputs(), [x], None, r"args must be a tuple of positional inputs, got a list"),
        (TwoInputs(), (x,), [x], r"kwargs must be a dict"),
        (TwoInputs(), (), None, r"do not fit TwoInputs.forward\(x, mask\): missing a required argument: 'x'"),
        (TwoInputs(), (x, x, x), None, r"do not fit TwoInputs.forward\(x, mask\): too many positional arguments"),
        (TwoInputs(), (x,), {"mask2": x}, r"unexpected keyword argument 'mask2'"),
        (TwoInputs(), (x,), {"mask": Config()}, r"kwargs\['mask'\] is a .*Config; example inputs may only hold"),
        (TwoInputs(), ([x, Unregistered(x)],), None, r"args\[0\]\[1\] is a .*Unregistered"),
        (TwoInputs(), (x.to_sparse(),), None, r"args\[0\] has layout torch.sparse_coo"),
    ],
)
def test_bad_inputs_are_named_with_a_fix(model, args, kwargs, match):
    with pytest.raises(InputSpecError, match=match) as info:
        exporter.export(model, args, kwargs)
    assert info.value.hint, "every input error says what to do"
    assert info.value.category.value == "input"


def test_a_tensor_subclass_input_is_an_unsupported_subclass_not_an_input_error():
    from torch.testing._internal.two_tensor import TwoTensor

    with pytest.raises(TraceError, match=r"args\[0\] is a tensor subclass TwoTensor") as info:
        bind_inputs(TwoInputs(), (TwoTensor(x, x),), None)
    assert info.value.category is Category.UNSUPPORTED_TENSOR_SUBCLASS
    assert "plain torch.Tensor" in info.value.hint and "a, b" in info.value.hint


class Varargs(torch.nn.Module):
    def forward(self, a, *rest, scale=1.0, **extra):
        return a


def test_paths_and_forward_arg_names_follow_the_signature():
    t = torch.ones(1)
    bound = bind_inputs(Varargs(), (t, {"k": t}, t), {"scale": 2.0, "bias": t})
    names = ["_".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in p) for p in bound.paths]
    assert names == ["a", "rest_0_k", "rest_1", "scale", "bias"]
    assert bound.forward_arg_names == ["a", "rest_0", "rest_1", "scale", "bias"]
    assert len(bound.flat) == 5


def test_args_given_as_a_namedtuple_are_the_positional_inputs():
    import collections

    Point = collections.namedtuple("Point", ["x", "y"])

    class AddXY(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    bound = bind_inputs(AddXY(), Point(torch.ones(2), torch.ones(2)), None)
    assert type(bound.args) is tuple and bound.labels == ["args[0]", "args[1]"]
