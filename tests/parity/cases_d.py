# Derived from PyTorch's test/export/test_export.py, Copyright (c) 2016- Facebook, Inc. and
# the PyTorch contributors, under the BSD 3-Clause License: see NOTICE at the repository root.
"""Parity cases, part D: models rebuilt from the last part of ``test/export/test_export.py``
in pytorch/pytorch (from ``test_non_persistent_buffer`` through ``TestExportCustomClass``).

Each class (or builder function) is a self-contained re-creation of the model a torch test
exports; the case name is the torch test's name, with ``[variant]`` when one test gives
several models.  Custom ops live in the ``parity_d`` namespace.
"""

import collections
import warnings

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch.export import Dim

from tests.parity.harness import case

AUTO, STATIC, DYNAMIC = Dim.AUTO, Dim.STATIC, Dim.DYNAMIC


# --------------------------------------------------------------------------------------
# Custom ops (stand-ins for the ``testlib`` ops defined at the top of the torch test file)
# --------------------------------------------------------------------------------------

torch.library.define("parity_d::tensor_and_len", "(Tensor x) -> (Tensor, SymInt)")
torch.library.define(
    "parity_d::bump_both",
    "(Tensor(a!) x, Tensor(b!) z) -> (Tensor, Tensor, Tensor)",
    tags=torch.Tag.pt2_compliant_tag,
)
torch.library.define("parity_d::bump_then_cos", "(Tensor(a!) x) -> (Tensor, Tensor)", tags=torch.Tag.pt2_compliant_tag)
torch.library.define("parity_d::bump_copies", "(Tensor x) -> (Tensor)", tags=torch.Tag.pt2_compliant_tag)
torch.library.define("parity_d::ones_from_scalar", "(Scalar n) -> (Tensor)", tags=torch.Tag.pt2_compliant_tag)


@torch.library.impl("parity_d::tensor_and_len", "cpu")
@torch.library.register_fake("parity_d::tensor_and_len")
def _tensor_and_len(x):
    return x, x.shape[0]


@torch.library.impl("parity_d::bump_both", "cpu")
def _bump_both(x, z):
    # mutates both arguments in place, then returns them and their sum
    x.add_(5)
    z.add_(5)
    return x, z, x + z


@torch.library.register_fake("parity_d::bump_both")
def _bump_both_fake(x, z):
    return x, z, x + z


@torch.library.impl("parity_d::bump_then_cos", "CompositeImplicitAutograd")
def _bump_then_cos(x):
    first, _, _ = torch.ops.parity_d.bump_both(x, x.cos())
    return first, first.cos()


@torch.library.impl("parity_d::bump_copies", "CompositeImplicitAutograd")
def _bump_copies(x):
    first, _, _ = torch.ops.parity_d.bump_both(x.cos(), x.cos())
    return first.cos()


@torch.library.impl("parity_d::ones_from_scalar", "CompositeImplicitAutograd")
def _ones_from_scalar(n):
    # branches on the (possibly unbacked) scalar; every branch gives the same result
    if n > 2:
        return torch.ones(4, 4)
    if n < 6:
        return torch.ones(4, 4)
    return torch.ones(4, 4)


@torch.library.custom_op("parity_d::plain_add", mutates_args=())
def _plain_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


@torch.library.register_fake("parity_d::plain_add")
def _plain_add_fake(x, y):
    return torch.empty_like(x)


# --------------------------------------------------------------------------------------
# Buffers, parameters, constants
# --------------------------------------------------------------------------------------


class _BufferPlusInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.foo = torch.nn.Buffer(torch.rand(2, 3), persistent=False)

    def forward(self, x):
        return self.foo + x


@case("test_non_persistent_buffer[inner]", lambda: (torch.rand(2, 3),), more_inputs=lambda: [(torch.rand(2, 3),)])
def _non_persistent_inner():
    return _BufferPlusInput()


@case("test_non_persistent_buffer[outer]", lambda: (torch.rand(2, 3),), more_inputs=lambda: [(torch.rand(2, 3),)])
class WrapsNonPersistentBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _BufferPlusInput()

    def forward(self, x):
        return self.inner(x)


@case("test_export_with_set_grad_enabled", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
class LinearUnderNoGrad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            return self.proj(x)


@case("test_export_with_autocast", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
class NestedAutocastRegions(torch.nn.Module):
    # one autocast region for a device that is not in use, one for cpu
    def forward(self, x):
        with torch.autocast(device_type="cuda", dtype=torch.int16, enabled=True):
            s = x.sin().sum()
        with torch.autocast(device_type="cpu", dtype=torch.float16, enabled=True):
            t = s.sin().sum()
        return t


class _SingleLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


@case("test_nonstrict_retrace_preserves_metadata", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
def _retraced_linear():
    # the model is itself the unlifted module of an earlier non-strict export
    return torch.export.export(_SingleLinear(), (torch.randn(4, 4),), strict=False).module()


@case("test_double_lifted_constants", lambda: (), more_inputs=lambda: [()])
class ReturnsTwoFreshConstants(torch.nn.Module):
    def forward(self):
        return torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])


_MODULE_LEVEL_ONES = torch.ones(4, 4)


class _HoldsConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.ones(4, 4)

    def forward(self, x):
        return x.sin()


@case("test_constant_no_user_inp", lambda: (), more_inputs=lambda: [()])
class NoUserInputs(torch.nn.Module):
    # no inputs at all: a submodule's tensor attribute, a global tensor and a buffer
    def __init__(self):
        super().__init__()
        self.sub = _HoldsConstant()
        self.register_buffer("buf", torch.ones(4, 4))

    def forward(self):
        return self.sub(self.sub.a) + _MODULE_LEVEL_ONES + self.sub.a + self.buf


@case("test_user_input_and_buffer_mutation", lambda: (torch.rand(4, 4),), more_inputs=lambda: [(torch.ones(4, 4),)])
class BumpsBufferAndInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.foo = torch.nn.Buffer(torch.randn(4, 4))

    def forward(self, x):
        self.foo.add_(1)
        x.add_(1)
        return self.foo + x


@case("test_constant_output_dup", lambda: (torch.ones(4, 4),), more_inputs=lambda: [(torch.zeros(4, 4),)])
class ConstantReturnedTwice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.constant = torch.ones(4, 4)

    def forward(self, x):
        return x + self.constant, self.constant


@case("test_constant_tensor_mutation", lambda: (torch.ones(2, 2),), more_inputs=lambda: [(torch.randn(2, 2),)])
class MutatesPlainTensorAttr(torch.nn.Module):
    # export refuses in-place mutation of a plain tensor attribute (not a buffer)
    def __init__(self):
        super().__init__()
        self.foo = torch.randn(2, 2)

    def forward(self, x):
        self.foo.add_(5)
        return self.foo + x


@case("test_constant_return", lambda: (torch.ones(2, 2),), more_inputs=lambda: [(torch.randn(2, 2),)])
class ReturnsConstantFirst(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.foo = torch.randn(2, 2)

    def forward(self, x):
        return self.foo, self.foo + x


@case("test_constant_requires_grad_const", lambda: (torch.ones(2, 2),), more_inputs=lambda: [(torch.randn(2, 2),)])
class RequiresGradConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.foo = torch.randn(2, 2, requires_grad=True)

    def forward(self, x):
        return x.cos() + self.foo.sum()


class _AddsOwnConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.foo = torch.ones(3, 3, requires_grad=True)

    def forward(self, x):
        return x + self.foo


class _SharesChildConstant(torch.nn.Module):
    def __init__(self, child, shared):
        super().__init__()
        self.m2 = child
        self.foo = shared

    def forward(self, x):
        return x + self.foo + self.m2(x)


@case("test_constant_aliasing", lambda: (torch.ones(3, 3),), more_inputs=lambda: [(torch.randn(3, 3),)])
def _aliased_constants():
    # the same tensor constant is reachable as ``foo`` and ``m2.foo``
    child = _AddsOwnConstant()
    return _SharesChildConstant(child, child.foo)


@case("test_unused_aliases", lambda: (torch.randn(4),), more_inputs=lambda: [(torch.randn(4),)])
class ParameterUnderThreeNames(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.randn(4))
        self.beta = self.alpha
        self.gamma = self.alpha

    def forward(self, x):
        return x + self.gamma


@case("test_split_const_gm_with_lifted_constants", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
class FoldableConstantWeights(torch.nn.Module):
    # a chain of ops only on tensor constants, then mixed with the input
    def __init__(self):
        super().__init__()
        self.w_pre = torch.randn(4, 4)
        self.b = torch.randn(4)

    def forward(self, x):
        w = F.relu(torch.transpose(self.w_pre, 0, 1)) + self.b
        return torch.matmul(x, w) + self.b + torch.arange(4, dtype=torch.float16)


@case("test_run_decompositions_keep_tensor_constant_metadata", lambda: (torch.ones(3, 3),),
      more_inputs=lambda: [(torch.randn(3, 3),)])
class ConstantPlusLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.b = torch.ones(3, 3)
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.b + self.linear(x)


class _ConstantAndParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.constant = torch.rand(2, 3)
        self.parameter = torch.nn.Parameter(torch.rand(2, 3))

    def forward(self, x):
        return x + self.constant


@case("test_constant_name", lambda: (torch.rand(2, 3),), more_inputs=lambda: [(torch.ones(2, 3),)])
class TwoInstancesSameConstantName(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.nested_1 = _ConstantAndParam()
        self.nested_2 = _ConstantAndParam()

    def forward(self, x):
        total = self.nested_1(x) + self.nested_2(x)
        total = total + self.nested_1.constant + self.nested_2.constant
        return total + self.nested_1.parameter + self.nested_2.parameter


class _ParamAdder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return x + self.param


class _OuterParamAdder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.nested = _ParamAdder()

    def forward(self, x):
        return x + self.nested(x)


@case("test_nested_retrace", lambda: (torch.ones(3),), more_inputs=lambda: [(torch.randn(3),)])
def _nested_retrace():
    # re-export the unlifted module of a first export (on cpu rather than meta)
    return torch.export.export(_OuterParamAdder(), (torch.ones(3),), strict=False).module()


@case("test_item", lambda: (torch.ones(3),), more_inputs=lambda: [(torch.randn(3),)])
class ItemOfConstructedTensors(torch.nn.Module):
    # .item() of tensors built from python numbers (an int and a float)
    def __init__(self):
        super().__init__()
        self.a = 5
        self.b = 5.0

    def forward(self, y):
        a = torch.tensor(self.a).item()
        b = torch.tensor(self.b).item()
        return a * b * y


@case("test_attr_assignment_extra", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
class CreatesAttributeInForward(torch.nn.Module):
    # forward sets a new tensor attribute; the torch test expects non-strict export to reject
    # it (torch 2.13 only warns)
    def forward(self, x):
        self.bar = x.sum()
        return x + 2


def _rename_layer_keys(mod, state_dict, prefix, *args, **kwargs):
    for key in list(state_dict.keys()):
        local = key[len(prefix):]
        if local.startswith("layer"):
            renamed = prefix + local.replace("layer.", "")
            state_dict[renamed] = state_dict[key]
            if renamed != key:
                del state_dict[key]


def _add_test_buffer(mod, prefix, keep_vars):
    mod._buffers["test"] = torch.Tensor([1])


class _TwoLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(2, 2)
        self.linear2 = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


@case("test_export_for_training_with_state_dict_hooks", lambda: (torch.randn(2, 2),), more_inputs=lambda: [(torch.randn(2, 2),)])
class WithStateDictHooks(torch.nn.Module):
    # state_dict hooks rename keys and add a buffer; a None buffer is registered too
    def __init__(self):
        super().__init__()
        self._register_state_dict_hook(_rename_layer_keys)
        self.register_state_dict_pre_hook(_add_test_buffer)
        self.foo = torch.nn.Buffer(torch.rand(2, 3), persistent=False)
        self.register_buffer("buf", None, persistent=False)
        self.layer = _TwoLinears()

    def forward(self, x):
        return self.layer(x)


# --------------------------------------------------------------------------------------
# .item(), unbacked sizes, torch._check
# --------------------------------------------------------------------------------------


@case("test_unbacked_scalar_constructor",
                lambda: (torch.tensor([3]), torch.tensor([3.14]), torch.tensor([True])),
                more_inputs=lambda: [(torch.tensor([5]), torch.tensor([-1.2]), torch.tensor([False]))])
class TensorsFromItems(torch.nn.Module):
    def forward(self, i, f, b):
        return torch.tensor([i.item()]), torch.tensor([f.item()]), torch.tensor([b.item()])


@case("test_sym_float_operators", lambda: (torch.ones(4),), more_inputs=lambda: [(torch.randn(4),)])
class NegatedHalfMax(torch.nn.Module):
    def forward(self, x):
        return -(x.max().item() / 2) + x


@case("test_unbacked_deferred_runtime_retrace", lambda: (torch.tensor(4), torch.randn(5, 5)),
      more_inputs=lambda: [(torch.tensor(3), torch.randn(5, 5)), (torch.tensor(5), torch.randn(5, 5))])
class CustomOpOnCheckedItem(torch.nn.Module):
    def forward(self, x, y):
        total = y.sin().sum()
        with torch.no_grad():
            n = x.item()
            torch._check_is_size(n)
            torch._check(n > 2)
            torch._check(n < 6)
            made = torch.ops.parity_d.ones_from_scalar(n)
        return y + total + made.sum()


@case("test_unbacked_expand[3d]", lambda: (torch.tensor([1, 2, 3]),),
      more_inputs=lambda: [(torch.tensor([3, 4, 5]),), (torch.tensor([0, 1, 0]),)])
class ExpandUnbacked3d(torch.nn.Module):
    # zeros instead of empty so that values are comparable; the shapes are what matter
    def forward(self, xs):
        a, b, c = xs.tolist()
        base = torch.zeros(a, b, 1)
        return base.expand(-1, b, c)


@case("test_unbacked_expand[1d]", lambda: (torch.tensor([2, 2]),),
      more_inputs=lambda: [(torch.tensor([5, 5]),), (torch.tensor([1, 1]),)])
class ExpandUnbacked1d(torch.nn.Module):
    def forward(self, xs):
        a, b = xs.tolist()
        return torch.zeros(a).expand(b)


@case("test_full_on_scalar_tensor", lambda: (torch.tensor(1),), more_inputs=lambda: [(torch.tensor(7),)])
class FullFromScalarTensor(torch.nn.Module):
    def forward(self, val):
        return torch.full((80, 2), val, dtype=torch.float32)


@case("test_unbacked_kth_value", lambda: (torch.arange(64), torch.tensor([32])),
      more_inputs=lambda: [(torch.randperm(64), torch.tensor([5])), (torch.arange(64), torch.tensor([64]))])
class KthValueFromItem(torch.nn.Module):
    def forward(self, x, y):
        k = min(y.item(), 128)
        return x.kthvalue(k, dim=0, keepdim=True).values


@case("test_checks_to_constrain_range", lambda: (torch.randn(10), torch.tensor(6)),
      more_inputs=lambda: [(torch.randn(10), torch.tensor(5)), (torch.randn(10), torch.tensor(3))])
class SliceByCheckedItem(torch.nn.Module):
    # two .item() calls on the same tensor, each constrained by different checks
    def forward(self, x, y):
        n = y.item()
        m = y.item()
        torch._check_is_size(n)
        torch._check(m >= 0)
        torch._check(n >= 3)
        torch._check(-m >= -9)
        torch._check(n <= 6)
        return x[:n]


@case("test_unbacked_sdpa", lambda: (torch.randn(1, 1, 4, 16, dtype=torch.float16),
                                     torch.randn(1, 32, 4, 16, dtype=torch.float16), torch.tensor([0])),
      more_inputs=lambda: [(torch.randn(1, 1, 4, 16, dtype=torch.float16), torch.randn(1, 32, 4, 16, dtype=torch.float16),
                            torch.tensor([3])),
                           (torch.randn(1, 1, 4, 16, dtype=torch.float16), torch.randn(1, 32, 4, 16, dtype=torch.float16),
                            torch.tensor([30]))],
      rtol=1e-2, atol=1e-2)
class AttentionOverUnbackedPrefix(torch.nn.Module):
    # keys/values are a data-dependent prefix of a cache (smaller sizes than the torch test)
    def forward(self, query, cache, start_pos):
        pos = start_pos.item()
        torch._check(pos >= 0)
        torch._check(pos <= 30)
        k = cache[:, : pos + 1, :, :].transpose(1, 2)
        v = cache[:, : pos + 1, :, :].transpose(1, 2)
        return F.scaled_dot_product_attention(query.transpose(1, 2), k, v)


@case("test_export_unbacked_lt", lambda: (torch.randn(8, 16), torch.arange(8, dtype=torch.int8)),
      dynamic_shapes=lambda: {"x": (AUTO, AUTO), "ranks": (AUTO,)},
      more_inputs=lambda: [(torch.randn(6, 12), torch.arange(6, dtype=torch.int8)),
                           (torch.randn(5, 10), torch.tensor([3, 9, 1, 0, 2], dtype=torch.int8))])
class NarrowByMaxRank(torch.nn.Module):
    def forward(self, x, ranks):
        k = ranks.max().item()
        piece = x.narrow(dim=1, start=0, length=k)
        return piece < piece.size(1)


@case("test_unbacked_contiguous",
      lambda: (torch.randn(16, 24, dtype=torch.bfloat16), torch.randint(low=0, high=1, size=(16, 1), dtype=torch.bool)),
      more_inputs=lambda: [(torch.randn(16, 24, dtype=torch.bfloat16), torch.arange(16).reshape(16, 1) % 3 == 0)])
class MaskedSelectThenView(torch.nn.Module):
    # masked_select gives an unbacked length that must divide into rows of 24
    def forward(self, x, mask):
        picked = x.masked_select(mask).view(-1, 24)
        return picked.contiguous() + 1


@case("test_unbacked_select_index", lambda: (torch.randn(3, 3, dtype=torch.bfloat16), torch.tensor([0])),
      more_inputs=lambda: [(torch.randn(3, 3, dtype=torch.bfloat16), torch.tensor([2])),
                           (torch.randn(3, 3, dtype=torch.bfloat16), torch.tensor([1]))])
class SelectByItem(torch.nn.Module):
    def forward(self, x, y):
        return x.select(0, y.item())


# --------------------------------------------------------------------------------------
# Custom ops
# --------------------------------------------------------------------------------------


@case("test_symint_tensor_return", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
class OpReturningSymInt(torch.nn.Module):
    def forward(self, x):
        t, n = torch.ops.parity_d.tensor_and_len(x)
        return t, n


@case("test_custom_op_auto_functionalize", lambda: (torch.ones(5), torch.ones(5)),
      more_inputs=lambda: [(torch.randn(5), torch.randn(5))])
class CallsMutatingOp(torch.nn.Module):
    def forward(self, x, z):
        return torch.ops.parity_d.bump_both(x, z)


@case("test_custom_op_auto_functionalize_pre_dispatch", lambda: (torch.ones(5),), more_inputs=lambda: [(torch.randn(5),)])
class CallsCompositeMutatingOp(torch.nn.Module):
    def forward(self, x):
        return torch.ops.parity_d.bump_then_cos(x)


@case("test_custom_op_auto_warn_pre_dispatch", lambda: (torch.ones(5),), more_inputs=lambda: [(torch.randn(5),)])
class CallsFunctionalCompositeOp(torch.nn.Module):
    def forward(self, x):
        return torch.ops.parity_d.bump_copies(x)


@case("test_custom_op_preserve", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
class ChainsCompositeOps(torch.nn.Module):
    def forward(self, x):
        y = torch.ops.parity_d.bump_copies.default(x)
        return torch.ops.parity_d.bump_then_cos.default(y)


@case("test_run_decompositions_keep_metadata", lambda: (torch.randn(2, 3), torch.randn(2, 3)),
      more_inputs=lambda: [(torch.randn(2, 3), torch.randn(2, 3))])
class CallsCustomOpAdd(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.parity_d.plain_add(x, y)


# --------------------------------------------------------------------------------------
# Inputs and outputs: kwargs, pytrees, constants, None
# --------------------------------------------------------------------------------------


@case("test_placeholder_naming_order", lambda: ((torch.rand(1, 3),), {"flag": False, "x2": torch.rand(1, 3)}),
      more_inputs=lambda: [((torch.rand(1, 3),), {"flag": False, "x2": torch.rand(1, 3)})])
class TwoBranchesConcat(torch.nn.Module):
    # kwargs given out of signature order, including an unused bool
    def __init__(self):
        super().__init__()
        self.layer1 = torch.nn.Linear(3, 16)
        self.layer2 = torch.nn.Linear(3, 32)

    def forward(self, x1, x2, flag=True):
        return torch.cat([self.layer1(x1), self.layer2(x2)], dim=1)


@case("test_kwarg_dynamic_shapes_diff_order",
      lambda: ((torch.randn(4, 4),), {"end": torch.randn(4, 4, 4), "start": torch.randn(4, 4)}),
      dynamic_shapes=lambda: {
          "baba": {0: Dim("end_dim")},
          "end": {0: Dim("end_dim")},
          "start": {0: Dim("end_dim"), 1: Dim("end_dim")},
      },
      more_inputs=lambda: [((torch.randn(5, 4),), {"end": torch.randn(5, 4, 4), "start": torch.randn(5, 5)}),
                           ((torch.randn(7, 4),), {"end": torch.randn(7, 4, 4), "start": torch.randn(7, 7)})])
class KeywordOnlySums(torch.nn.Module):
    # dynamic_shapes keys listed in a different order than the kwargs
    def __init__(self):
        super().__init__()
        self.a = torch.ones(4, 4)

    def forward(self, baba, *, start, end):
        return baba.sum() + start.sum() + end.sum()


@case("test_placeholder_naming_order_variadic",
      lambda: ((torch.randn(3),), {"c": torch.randn(3), "b": torch.randn(3), "d": torch.randn(3)}),
      more_inputs=lambda: [((torch.randn(3),), {"c": torch.randn(3), "b": torch.randn(3), "d": torch.randn(3)})])
class ExtraKwargsVariadic(torch.nn.Module):
    def forward(self, a, b, c, **kwargs):
        return a - b + c * kwargs["d"]


def _collision_inputs_nested():
    return ({"foo": [torch.randn(4, 4)]}, (torch.randn(4, 4),), torch.randn(4, 4))


@case("test_placeholder_naming_collisions[nested]", _collision_inputs_nested,
      more_inputs=lambda: [_collision_inputs_nested()])
class NestedInputNameClash(torch.nn.Module):
    def forward(self, x, x_foo, x_foo_0):
        return x["foo"][0] + x_foo[0] + x_foo_0


def _collision_inputs_state():
    return ({"param": torch.randn(4)}, torch.randn(4), {"beta": torch.randn(4)}, torch.randn(4))


@case("test_placeholder_naming_collisions[state]", _collision_inputs_state, more_inputs=lambda: [_collision_inputs_state()])
class InputNamesLikeLiftedState(torch.nn.Module):
    # user inputs named like the lifted parameter/buffer/constant placeholders
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.randn(4))
        self.alpha = torch.nn.Buffer(torch.randn(4), persistent=True)
        self.beta = torch.nn.Buffer(torch.randn(4), persistent=False)
        self.gamma = torch.randn(4)

    def forward(self, p, b_alpha, b, c_gamma):
        p_out = p["param"] + self.param
        b_out = self.alpha + self.beta + b_alpha + b["beta"]
        c_out = self.gamma + c_gamma
        return p_out, b_out, c_out


@case("test_placeholder_naming_collisions[ops]", lambda: (torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)),
      more_inputs=lambda: [(torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4))])
class InputNamesLikeOps(torch.nn.Module):
    def forward(self, mul, add, add_1):
        return mul * mul + add * add_1


@case("test_constant_input_naming", lambda: (torch.randn(4), torch.randn(4), "floor"),
      more_inputs=lambda: [(torch.randn(4), torch.randn(4), "floor")])
class DivWithStringMode(torch.nn.Module):
    def forward(self, x, y, div="floor"):
        return torch.div(x, y, rounding_mode=div)


@case("test_nested_dynamic_shapes_spec",
      lambda: (((1, 2), (torch.randn(4, 4), torch.randn(4, 4)), (torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4))),),
      dynamic_shapes=lambda: {"x": ((None, None), (None, None), (None, None, None))},
      more_inputs=lambda: [(((1, 2), (torch.randn(4, 4), torch.randn(4, 4)),
                             (torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4))),)])
class SumsNestedTuple(torch.nn.Module):
    # a spec mirroring nested tuples of ints and tensors, all static
    def forward(self, x):
        (a0, a1), (b0, b1), (c0, c1, c2) = x
        return a0 + a1 + b0 + b1 + c0 + c1 + c2


class AttrPair:
    """A user class flattened through a registered pytree node."""

    def __init__(self, attr1, attr2):
        if attr1 is None:
            raise ValueError("attr1 must be given")
        self.attr1 = attr1
        self.attr2 = attr2


def _attr_pair_flatten(obj):
    return pytree._list_flatten([obj.attr1, obj.attr2])


def _attr_pair_flatten_with_keys(obj):
    return pytree._list_flatten_with_keys([obj.attr1, obj.attr2])


def _attr_pair_unflatten(values, context):
    first, second = pytree._list_unflatten(values, context)
    return AttrPair(first, second)


pytree.register_pytree_node(
    AttrPair,
    _attr_pair_flatten,
    _attr_pair_unflatten,
    flatten_with_keys_fn=_attr_pair_flatten_with_keys,
    serialized_type_name=f"{AttrPair.__module__}.AttrPair",
)


@case("test_custom_pytree", lambda: (AttrPair(torch.ones(4, 4), torch.ones(4, 4)),),
      more_inputs=lambda: [(AttrPair(torch.randn(4, 4), torch.randn(4, 4)),)])
class TakesCustomPytree(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.foo_attr = AttrPair(torch.ones(4, 4), torch.ones(4, 4))

    def forward(self, foo):
        return foo.attr1.sum() + foo.attr2.sum() + self.foo_attr.attr1.sum()


@case("test_int_list_output", lambda: (torch.ones(2, 3),), more_inputs=lambda: [(torch.randn(2, 3),)])
class NestedListWithInts(torch.nn.Module):
    def forward(self, x):
        return [((1, 3), [x + x, x * x])]


@case("test_primitive_constant_output[string]", lambda: (torch.tensor(3), 5), more_inputs=lambda: [(torch.tensor(4), 5)])
class ReturnsString(torch.nn.Module):
    def forward(self, x, y):
        with torch.no_grad():
            return y * x, "moo"


@case("test_primitive_constant_output[int_input]", lambda: (torch.tensor(3), 5), more_inputs=lambda: [(torch.tensor(4), 5)])
class ReturnsIntInput(torch.nn.Module):
    def forward(self, x, y):
        return y * x, y


@case("test_primitive_constant_output[int_local]", lambda: (torch.tensor(3),), more_inputs=lambda: [(torch.tensor(4),)])
class ReturnsLocalInt(torch.nn.Module):
    def forward(self, x):
        five = 5
        return five * x, five


@case("test_primitive_constant_output[int_arith]", lambda: (torch.tensor(3), 5), more_inputs=lambda: [(torch.tensor(4), 5)])
class ReturnsIntArithmetic(torch.nn.Module):
    def forward(self, x, y):
        return y * x, y - 1


@case("test_none_input_output[none_in]", lambda: (torch.tensor(3), None), more_inputs=lambda: [(torch.tensor(4), None)])
class IgnoresNoneInput(torch.nn.Module):
    def forward(self, x, y):
        return x * x


@case("test_none_input_output[none_out]", lambda: (torch.tensor(3), None), more_inputs=lambda: [(torch.tensor(4), None)])
class PassesNoneThrough(torch.nn.Module):
    def forward(self, x, y):
        return x * x, y


@case("test_export_with_dict_input_nested_in_args", lambda: ({"a1": torch.randn(10), "a2": torch.randn(10)},),
      more_inputs=lambda: [({"a2": torch.randn(10), "a1": torch.randn(10)},)])
class SharedLinearOverDict(torch.nn.Module):
    # the extra input gives the dict keys in the other order
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(10, 1)

    def forward(self, data_batch):
        return self.linear(data_batch["a1"]) + self.linear(data_batch["a2"])


PointPair = collections.namedtuple("PointPair", ["x", "y"])


@case("test_namedtuple_input_export", lambda: PointPair(torch.ones(3), torch.ones(3)),
      more_inputs=lambda: [PointPair(torch.randn(3), torch.randn(3))])
class AddsTwo(torch.nn.Module):
    # the args tuple itself is a namedtuple
    def forward(self, x, y):
        return x + y


@case("test_int_lift_constant", lambda: (1, torch.ones(3)),
      dynamic_shapes=lambda: (DYNAMIC, {0: DYNAMIC}),
      more_inputs=lambda: [(3, torch.randn(4)), (2, torch.randn(6))])
class IntPlusNewTensor(torch.nn.Module):
    def forward(self, a, x):
        return a + torch.tensor(1) + x


# --------------------------------------------------------------------------------------
# Control flow, higher-order ops, functorch
# --------------------------------------------------------------------------------------


@case("test_placeholder_naming_collisions_hoo_subgraphs[cond_grad]", lambda: (torch.randn(4), torch.randn(4), torch.randn(4)),
      more_inputs=lambda: [(torch.randn(4), torch.randn(4), torch.randn(4)), (-torch.ones(4), torch.randn(4), torch.randn(4))])
class CondThenEnableGrad(torch.nn.Module):
    # operand names clash with the names given to the cond subgraph nodes
    def forward(self, x, mul, mul_1):
        sq = x * x
        y = torch.cond(sq.sum() > 0, lambda a, b, c: a * b * c, lambda a, b, c: a + b + c, [sq, mul, mul_1])
        with torch.enable_grad():
            y = y * y
        return y


@case("test_placeholder_naming_collisions_hoo_subgraphs[graph_names]",
      lambda: (torch.randn(10, 4), (torch.randn(4), torch.randn(4)), (torch.randn(4),)),
      more_inputs=lambda: [(torch.randn(10, 4), (torch.randn(4), torch.randn(4)), (torch.randn(4),)),
                           (-torch.ones(10, 4), (torch.zeros(4), torch.zeros(4)), (torch.randn(4),))])
class InputsNamedLikeSubgraphs(torch.nn.Module):
    # inputs named like the attributes that hold the cond branches
    def forward(self, input, true_graph, body_graph):
        x = input + true_graph[0] + true_graph[1]
        x = torch.cond(x.sum() > 0, lambda t: t * 2.0, lambda t: t + 2.0, [x])
        x = torch.cond(x.sum() > 0, lambda t: t * 2.0, lambda t: t + 2.0, [x])
        return x


@case("test_vmap_custom_autograd_function", lambda: (torch.tensor([0, 3, 7, 9]),),
      more_inputs=lambda: [(torch.tensor([1, 2, 5, 8]),)])
class VmappedBufferIndexing(torch.nn.Module):
    # indexing a buffer with batched scalar tensors under vmap
    def __init__(self, size: int = 10):
        super().__init__()
        self.register_buffer("base", torch.arange(size))

    def forward(self, indices):
        from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

        with TransformGetItemToIndex():
            return torch.vmap(lambda i: self.base[i])(indices)


class _FnSchemaHop(torch._ops.HigherOrderOperator):
    """A test HOP taking a ``torch.FunctionSchema`` as a (pytree constant) argument."""

    def __init__(self):
        super().__init__("parity_d_fn_schema_hop")

    def __call__(self, fn, x, schema):
        if isinstance(schema, torch.FunctionSchema):
            _, schema = pytree.tree_flatten(schema)
        return super().__call__(fn, x, schema)


def _build_fn_schema_hop():
    from torch._higher_order_ops.utils import (
        _maybe_run_with_interpreter,
        autograd_not_implemented,
        reenter_make_fx,
        unique_graph_id,
    )
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, track_tensor_tree

    hop = _FnSchemaHop()

    def on_proxy(mode, fn, x, schema):
        sub = reenter_make_fx(fn)(x)
        _, name = unique_graph_id(mode, prefix="_sub_gm")
        mode.tracer.root.register_module(name, sub)
        proxy = mode.tracer.create_proxy(
            "call_function", hop, tuple(mode.tracer.unwrap_proxy(a) for a in (sub, x, schema)), {}
        )
        return track_tensor_tree(hop(sub, x, schema), proxy, constant=None, tracer=mode.tracer)

    def on_dense(fn, x, schema):
        assert isinstance(schema, pytree.TreeSpec)
        restored = pytree.tree_unflatten([], schema)
        assert isinstance(restored, torch.FunctionSchema) and restored == torch.ops.aten.sin.default._schema
        return fn(x)

    def on_fake(mode, fn, x, schema):
        with mode:
            return on_dense(fn, x, schema)

    def on_functionalize(ctx, fn, x, schema):
        inner = ctx.unwrap_tensors(x)
        functional = ctx.functionalize(_maybe_run_with_interpreter(fn))
        return ctx.wrap_tensors(hop(functional, inner, schema))

    hop.py_impl(ProxyTorchDispatchMode)(on_proxy)
    hop.py_impl(torch._C.DispatchKey.CompositeExplicitAutograd)(on_dense)
    hop.py_impl(FakeTensorMode)(on_fake)
    hop.py_autograd_impl(autograd_not_implemented(hop, deferred_error=True))
    hop.py_functionalize_impl(on_functionalize)
    return hop


_FN_SCHEMA_HOP = None


class _CallsSchemaHop(torch.nn.Module):
    def forward(self, x):
        return _FN_SCHEMA_HOP(lambda t: t.sin(), x, torch.ops.aten.sin.default._schema)


@case("test_export_function_schema", lambda: (torch.randn(3, 4),), more_inputs=lambda: [(torch.randn(3, 4),)])
def _function_schema_model():
    global _FN_SCHEMA_HOP
    if torch.FunctionSchema not in pytree.SUPPORTED_NODES:
        pytree.register_constant(torch.FunctionSchema)
    if _FN_SCHEMA_HOP is None:
        _FN_SCHEMA_HOP = _build_fn_schema_hop()
    return _CallsSchemaHop()


@case("test_preserve_annotation", lambda: (torch.randn(10),), more_inputs=lambda: [(torch.randn(10),)])
class AnnotatedRegions(torch.nn.Module):
    # nested fx_traceback.annotate regions around simple arithmetic
    def forward(self, x):
        import torch.fx.traceback as fx_traceback

        with fx_traceback.annotate({"pp_stage": 0}):
            with fx_traceback.annotate({"fdsp_bucket": 0}):
                x = x + 1
            x = x - 2
            with fx_traceback.annotate({"cuda_stream": 2, "fsdp_bucket": 1}):
                x = x * 2
        return x / 3


# --------------------------------------------------------------------------------------
# Dynamic shapes
# --------------------------------------------------------------------------------------


@case("test_disable_forced_specializations_ok[mod_reshape]", lambda: (torch.randn(10, 72),),
      dynamic_shapes=lambda: {"x": (DYNAMIC, DYNAMIC)},
      more_inputs=lambda: [(torch.randn(8, 7),), (torch.randn(12, 11),)])
class ReshapeNeedsModulo(torch.nn.Module):
    # needs (s0 * s1) % (4 * (s0 - 1)) == 0.  The torch test keeps this guard as a runtime
    # assert (prefer_deferred_runtime_asserts_over_guards, which the harness cannot pass);
    # Dim.DYNAMIC is the plain-export way to accept such a guard, so it replaces named dims.
    def forward(self, x):
        return x.reshape(x.shape[0] - 1, 4, -1)


@case("test_disable_forced_specializations_ok[flat_reshape]",
      lambda: (torch.randn(6, 8), torch.randn(3, 16), torch.randn(48)),
      dynamic_shapes=lambda: {
          "x": [Dim(f"dx{i}", min=2) for i in range(2)],
          "y": [Dim(f"dy{i}", min=2) for i in range(2)],
          "z": [Dim(f"dz{i}", min=4) for i in range(1)],
      },
      more_inputs=lambda: [(torch.randn(5, 8), torch.randn(4, 10), torch.randn(40)),
                           (torch.randn(4, 6), torch.randn(2, 12), torch.randn(24))])
class FlattenedProductsMatch(torch.nn.Module):
    # s0*s1 == s2*s3 == s4
    def forward(self, x, y, z):
        return x.reshape([-1]) + y.reshape([-1]) + z


@case("test_disable_forced_specializations_ok[reshape_3d]", lambda: (torch.randn(4, 3, 2), torch.randn(24)),
      dynamic_shapes=lambda: {"x": (Dim("dx0", min=2), Dim("dx1", min=2), Dim("dx2", min=2)), "y": (Dim("dy", min=8),)},
      more_inputs=lambda: [(torch.randn(9, 7, 2), torch.randn(126)), (torch.randn(2, 2, 3), torch.randn(12))])
class Flatten3dPlusVector(torch.nn.Module):
    def forward(self, x, y):
        return x.reshape([-1]) + y


@case("test_disable_forced_specializations_errors",
      lambda: (torch.randn(3, 4), torch.randn(12), torch.randn(4), torch.randn(4)),
      dynamic_shapes=lambda: {
          "w": [Dim(f"dw{i}") for i in range(2)],
          "x": [Dim(f"dx{i}") for i in range(1)],
          "y": [Dim("dy")],
          "z": [Dim("dz")],
      },
      more_inputs=lambda: [(torch.randn(2, 5), torch.randn(10), torch.randn(6), torch.randn(6))])
class TwoUnrelatedDimsMustMatch(torch.nn.Module):
    # dy and dz are declared separately but y + z needs them equal: a constraint violation
    def forward(self, w, x, y, z):
        return w.reshape([-1]) + x, y + z


@case("test_reshape_view_helper", lambda: (torch.rand(64, 20, 16),),
      dynamic_shapes=lambda: {"x": {0: DYNAMIC}},
      more_inputs=lambda: [(torch.randn(42, 20, 16),), (torch.randn(7, 20, 16),)])
class ViewBySecondDimThenSoftmax(torch.nn.Module):
    # the view from [s0, 20, 16] to [20, -1] needs guards on s0 (Ne(s0, 20), s0 % 20 != 0);
    # the torch test defers them to runtime asserts, here Dim.DYNAMIC stands in for that
    def forward(self, x):
        x = x.view(x.size(1), -1)
        return F.softmax(x, dim=0)


@case("test_allow_explicit_guards_as_runtime_asserts", lambda: (torch.randn(6), torch.randn(12)),
      dynamic_shapes=lambda: {"x": [Dim("dx", min=4)], "y": [Dim("dy", min=4)]},
      more_inputs=lambda: [(torch.randn(9), torch.randn(27)), (torch.randn(12), torch.randn(48))])
class BranchesOnShapeRelations(torch.nn.Module):
    # explicit shape branching; only the third condition holds for the example
    def forward(self, x, y):
        if x.shape[0] == y.shape[0]:
            return x + y
        elif x.shape[0] == y.shape[0] ** 3:
            return x + 2, y + 3
        elif x.shape[0] ** 2 == y.shape[0] * 3:
            return x * 2.0, y * 3.0


@case("test_cse_for_symint", lambda: (torch.randn(5), torch.randn(3)),
      dynamic_shapes=lambda: {"x": (Dim("dx"),), "y": (Dim("dy"),)},
      more_inputs=lambda: [(torch.randn(4), torch.randn(2)), (torch.randn(6), torch.randn(5))])
class RepeatedSymExpression(torch.nn.Module):
    # the same symbolic expression appears in three conditions
    def forward(self, x, y):
        if (
            x.shape[0] ** 2 - y.shape[0] ** 2 >= 4
            and x.shape[0] ** 2 - y.shape[0] ** 2 <= 20
            and x.shape[0] ** 2 - y.shape[0] ** 2 != 15
        ):
            return x * 2, y * 2


@case("test_intermediate_shape_comp", lambda: (torch.randn(6), torch.randn(4)),
      dynamic_shapes=lambda: {"x": (Dim("dx0"),), "y": (Dim("dy"),)},
      more_inputs=lambda: [(torch.randn(3), torch.randn(5)), (torch.randn(8), torch.randn(2))])
class ReturnsComputedSize(torch.nn.Module):
    # returns a SymInt computed from intermediate shapes
    def forward(self, x, y):
        doubled = torch.cat([x, x], dim=0)
        tiled = doubled.repeat(y.shape[0])
        return tiled.shape[0] + x.shape[0]


@case("test_baddbmm", lambda: (torch.randn(8, 4, 8, dtype=torch.float16),),
      dynamic_shapes=lambda: ({1: Dim("batch")},),
      more_inputs=lambda: [(torch.randn(8, 5, 8, dtype=torch.float16),), (torch.randn(8, 3, 8, dtype=torch.float16),)],
      rtol=1e-2, atol=1e-2)
class HalfPrecisionBaddbmm(torch.nn.Module):
    # the torch test traces a size-1 example under backed_size_oblivious; without that config
    # a size-1 example specializes, so the example here has 4 rows (sizes also scaled down)
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 8, 16, dtype=torch.float16))
        self.bias = torch.nn.Parameter(torch.randn(8, 1, 16, dtype=torch.float16))

    def forward(self, x):
        return torch.ops.aten.baddbmm.default(self.bias, x, self.weight)


@case("test_export_linear_preserve_dynamic_shape", lambda: (torch.randn(8, 4),),
      dynamic_shapes=lambda: {"x": {0: Dim("x")}},
      more_inputs=lambda: [(torch.randn(3, 4),), (torch.randn(7, 4),)])
def _linear_dynamic_batch():
    return _SingleLinear()


@case("test_repeat_interleave", lambda: (torch.randint(0, 10, (3, 3)), torch.randint(0, 10, (3,))),
      dynamic_shapes=lambda: ({0: Dim("dim")}, {0: Dim("dim")}),
      more_inputs=lambda: [(torch.randint(0, 10, (2, 3)), torch.randint(0, 10, (2,))),
                           (torch.randint(0, 10, (4, 3)), torch.randint(0, 10, (4,)))])
class RepeatInterleaveArange(torch.nn.Module):
    # as for test_baddbmm, the example avoids size 1 (the torch test relies on backed_size_oblivious)
    def forward(self, values, batch_sizes):
        return torch.repeat_interleave(torch.arange(values.shape[0]), batch_sizes)


def _three(shape):
    return tuple(torch.randn(*shape) for _ in range(3))


class _SumOfThree(torch.nn.Module):
    # every input must have the same [s0, s1]
    def forward(self, x, y, z):
        return x + y + z


@case("test_automatic_dynamic_shapes_simple_equality[auto]", lambda: _three((6, 3)),
      dynamic_shapes=lambda: ((AUTO, AUTO), (AUTO, AUTO), (AUTO, AUTO)),
      more_inputs=lambda: [_three((4, 4)), _three((1, 1)), _three((0, 9))])
def _simple_equality_auto():
    return _SumOfThree()


@case("test_automatic_dynamic_shapes_simple_equality[static_s1]", lambda: _three((6, 3)),
      dynamic_shapes=lambda: {"x": (AUTO, AUTO), "y": (AUTO, AUTO), "z": (AUTO, None)},
      more_inputs=lambda: [_three((4, 3)), _three((1, 3)), _three((0, 3))])
def _simple_equality_static_s1():
    return _SumOfThree()


@case("test_automatic_dynamic_shapes_simple_equality[static]", lambda: _three((6, 3)),
      dynamic_shapes=lambda: {"x": (None, AUTO), "y": (AUTO, AUTO), "z": (AUTO, None)},
      more_inputs=lambda: [_three((6, 3))])
def _simple_equality_static():
    return _SumOfThree()


class _OffsetByFour(torch.nn.Module):
    # s0 + 4 == s1
    def forward(self, x, y):
        return x + y[4:]


@case("test_automatic_dynamic_shapes_constant_relation[auto]", lambda: (torch.randn(6), torch.randn(10)),
      dynamic_shapes=lambda: ((AUTO,), (AUTO,)),
      more_inputs=lambda: [(torch.randn(10), torch.randn(14)), (torch.randn(3), torch.randn(7)), (torch.randn(2), torch.randn(6))])
def _constant_relation_auto():
    return _OffsetByFour()


@case("test_automatic_dynamic_shapes_constant_relation[static_y]", lambda: (torch.randn(6), torch.randn(10)),
      dynamic_shapes=lambda: {"x": (AUTO,), "y": (None,)},
      more_inputs=lambda: [(torch.randn(6), torch.randn(10))])
def _constant_relation_static_y():
    return _OffsetByFour()


class _StridedPlusVector(torch.nn.Module):
    # (s0 + 2) // 4 == s1
    def forward(self, x, y):
        return x[1::4] + y


@case("test_automatic_dynamic_shapes_linear_relation[auto]", lambda: (torch.randn(21), torch.randn(5)),
      dynamic_shapes=lambda: ((AUTO,), (AUTO,)),
      more_inputs=lambda: [(torch.randn(n), torch.randn(8)) for n in (33, 32, 31, 30)])
def _linear_relation_auto():
    return _StridedPlusVector()


@case("test_automatic_dynamic_shapes_linear_relation[static_y]", lambda: (torch.randn(21), torch.randn(5)),
      dynamic_shapes=lambda: {"x": (AUTO,), "y": None},
      more_inputs=lambda: [(torch.randn(n), torch.randn(5)) for n in (20, 19, 18)])
def _linear_relation_static_y():
    return _StridedPlusVector()


@case("test_automatic_dynamic_shapes_linear_relation[static_x]", lambda: (torch.randn(21), torch.randn(5)),
      dynamic_shapes=lambda: (None, (AUTO,)),
      more_inputs=lambda: [(torch.randn(21), torch.randn(5))])
def _linear_relation_static_x():
    return _StridedPlusVector()


def _derived_dims_spec():
    dz = Dim("dz", min=4, max=16)
    dx = 2 * dz
    dy = dx + 1
    return {"a": [(dx, 4), (dy, 4)], "b": (dz,), "c": None, "d": None}


@case("test_dynamic_shapes_serdes_generic",
      lambda: ([torch.randn(8, 4), torch.randn(9, 4)], torch.randn(4), torch.randn(4, 4), "hello"),
      dynamic_shapes=_derived_dims_spec,
      more_inputs=lambda: [([torch.randn(16, 4), torch.randn(17, 4)], torch.randn(8), torch.randn(4, 4), "hello"),
                           ([torch.randn(24, 4), torch.randn(25, 4)], torch.randn(12), torch.randn(4, 4), "hello")])
class DerivedDimsWithStringArg(torch.nn.Module):
    # a[0]: [2*dz, 4], a[1]: [2*dz + 1, 4], b: [dz]
    def forward(self, a, b, c, d):
        if d == "hello":
            x = a[0] + a[1][1:]
            b = torch.cat([b, b], dim=0).reshape([-1, 1])
            return x + b, c * 2


@case("test_dim_dynamic[relations]",
      lambda: (torch.randn(5), torch.randn(4), torch.randn(4), torch.randn(4, 4), torch.randn(16)),
      dynamic_shapes=lambda: {"u": (DYNAMIC,), "w": (DYNAMIC,), "x": (DYNAMIC,), "y": (DYNAMIC, DYNAMIC), "z": (DYNAMIC,)},
      more_inputs=lambda: [(torch.randn(6), torch.randn(5), torch.randn(5), torch.randn(7, 8), torch.randn(56)),
                           (torch.randn(3), torch.randn(2), torch.randn(2), torch.randn(2, 3), torch.randn(6))])
class InferredRelations(torch.nn.Module):
    # Dim.DYNAMIC infers s0 == s1 + 1 == s2 + 1 and s3 * s4 == s5
    def forward(self, u, w, x, y, z):
        return u[1:] + w + x, y.flatten() + z


@case("test_dim_dynamic[specialize]", lambda: (torch.randn(4, 8),),
      dynamic_shapes=lambda: {"x": (DYNAMIC, DYNAMIC)},
      more_inputs=lambda: [(torch.randn(4, 3),)])
class ChecksFirstDimIsFour(torch.nn.Module):
    # the code pins a Dim.DYNAMIC dim to a constant: export must complain
    def forward(self, x):
        torch._check(x.shape[0] == 4)
        return x + 2


@case("test_dim_dynamic[mod_constraint]", lambda: (torch.randn(3, 4),),
      dynamic_shapes=lambda: {"x": (DYNAMIC, DYNAMIC)},
      more_inputs=lambda: [(torch.randn(5, 8),), (torch.randn(3, 6),)])
class ViewByFirstDimMinusOne(torch.nn.Module):
    def forward(self, x):
        return x.view(x.shape[0] - 1, -1)


@case("test_dynamic_sym_round", lambda: (torch.randn(8),),
      dynamic_shapes=lambda: {"x": {0: Dim("n", min=5, max=10)}},
      more_inputs=lambda: [(torch.randn(5),), (torch.randn(7),), (torch.randn(10),)])
class SliceToRoundedHalf(torch.nn.Module):
    def forward(self, x):
        return x[: round(x.shape[0] / 2.0)]


@case("test_dynamic_lr_shift", lambda: (torch.randn(8),),
      dynamic_shapes=lambda: {"x": {0: Dim("N", min=5, max=10)}},
      more_inputs=lambda: [(torch.randn(5),), (torch.randn(9),)])
class SliceByShiftedSize(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return x[: n >> 1], x[: n << 1]


# --------------------------------------------------------------------------------------
# Module structure
# --------------------------------------------------------------------------------------


@case("test_shared_submodule_nn_module_stack", lambda: (torch.rand(10),), more_inputs=lambda: [(torch.rand(10),)])
class ReusedLayerNorm(torch.nn.Module):
    # one LayerNorm instance sits at two positions of a Sequential
    def __init__(self):
        super().__init__()
        norm = torch.nn.LayerNorm(10)
        self.sub_net = torch.nn.Sequential(norm, torch.nn.ReLU(), norm, torch.nn.ReLU())

    def forward(self, x):
        return self.sub_net(x)


class _Adder(torch.nn.Module):
    def forward(self, x, y):
        return x + y


@case("test_slice_nn_module_stack", lambda: (torch.randn(8), torch.randn(8)),
      more_inputs=lambda: [(torch.randn(8), torch.randn(8))])
class SlicedContainers(torch.nn.Module):
    # iterating slices of a Sequential and a ModuleList that repeat one module
    def __init__(self):
        super().__init__()
        self.n = _Adder()
        self.mod_list_1 = torch.nn.Sequential(*tuple(self.n for _ in range(5)))
        self.mod_list_2 = torch.nn.ModuleList(self.n for _ in range(5))

    def forward(self, x, y):
        for m in self.mod_list_1[2:3]:
            x = m(x, y)
        for m in self.mod_list_2[4:5]:
            x = m(x, y)
        return x


@case("test_wrapper_module", lambda: (torch.randn(8),), more_inputs=lambda: [(torch.randn(8),)])
def _wrapped_abs():
    from torch.export import _wrapper_utils

    return _wrapper_utils._WrapperModule(lambda x: torch.abs(x))


def _rnn_case(name, rnn_cls):
    @case(f"test_export_rnn_variants_with_warning[{name}]", lambda: (torch.randn(1, 2, 2),),
          more_inputs=lambda: [(torch.randn(1, 2, 2),)])
    def build():
        return rnn_cls(input_size=2, hidden_size=4, num_layers=1, batch_first=True)

    return build


for _name, _cls in (("RNN", torch.nn.RNN), ("LSTM", torch.nn.LSTM), ("GRU", torch.nn.GRU)):
    _rnn_case(_name, _cls)


# --------------------------------------------------------------------------------------
# Tensor subclasses
# --------------------------------------------------------------------------------------


@case("test_capture_subclass_constructor", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
class BuildsTwoTensorInForward(torch.nn.Module):
    # a subclass buffer, and subclass instances constructed inside forward
    def __init__(self):
        super().__init__()
        from torch.testing._internal.two_tensor import TwoTensor

        self.buffer = torch.nn.Buffer(TwoTensor(torch.randn(4, 4), torch.randn(4, 4)))

    def forward(self, x):
        from torch.testing._internal.two_tensor import TwoTensor

        pair = TwoTensor(x, TwoTensor(x, x)) + self.buffer
        return (x + pair).b.a


class _CosWithMarkedInit(torch.nn.Module):
    def forward(self, x):
        return x.cos()


@case("test_capture_subclass_wrong", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
def _cos_with_marked_init():
    # an nn.Module whose __init__ carries the subclass-constructor marker
    from torch._export.wrappers import mark_subclass_constructor_exportable_experimental

    class Marked(_CosWithMarkedInit):
        @torch._disable_dynamo
        @mark_subclass_constructor_exportable_experimental
        def __init__(self):
            super().__init__()

    return Marked()


# --------------------------------------------------------------------------------------
# Assorted ops
# --------------------------------------------------------------------------------------


@case("test_expand_copy_export_handles_implicit_true[False]", lambda: (torch.ones(3), False),
      more_inputs=lambda: [(torch.randn(3), False)])
class ExpandCopyFalse(torch.nn.Module):
    def forward(self, x, implicit):
        return torch.expand_copy(x, [3, 3], implicit=implicit)


@case("test_expand_copy_export_handles_implicit_true[True]", lambda: (torch.ones(3), True),
      more_inputs=lambda: [(torch.randn(3), True)])
class ExpandCopyTrue(torch.nn.Module):
    def forward(self, x, implicit):
        return torch.expand_copy(x, [3, 3], implicit=implicit)


def _complex_spec(frames):
    return torch.complex(torch.randn(1, 33, frames), torch.randn(1, 33, frames))


@case("test_istft_op", lambda: (_complex_spec(20),), more_inputs=lambda: [(_complex_spec(20),)], atol=1e-4)
class InverseStft(torch.nn.Module):
    # smaller than the torch test (n_fft 64 instead of 1024); length exceeds the natural one
    def forward(self, spec):
        window = torch.hann_window(64).type(torch.FloatTensor)
        return torch.istft(spec, n_fft=64, hop_length=32, window=window, length=640)


@case("test_attention", lambda: (torch.randn(1, 16, 64),), more_inputs=lambda: [(torch.randn(1, 16, 64),)])
class SelfAttentionBlock(torch.nn.Module):
    # MultiheadAttention without weights (smaller than the torch test's 768/12/224)
    def __init__(self):
        super().__init__()
        self.self_attention = torch.nn.MultiheadAttention(64, 4, dropout=0.0, batch_first=True)

    def forward(self, input1):
        out, _ = self.self_attention(input1, input1, input1, need_weights=False)
        return out


@case("test_sdpa_gqa", lambda: (torch.randn(1, 8, 16, 8), torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8)),
      more_inputs=lambda: [(torch.randn(1, 8, 16, 8), torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8))])
class GroupedQueryAttention(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


@case("test_scaled_dot_product_attention_cpu", lambda: (torch.randn(1, 1, 8, 8), torch.randn(1, 1, 8, 8), torch.randn(1, 1, 8, 8)),
      more_inputs=lambda: [(torch.randn(1, 1, 8, 8), torch.randn(1, 1, 8, 8), torch.randn(1, 1, 8, 8))])
class CausalAttention(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, None, dropout_p=0.0, is_causal=True)


def _upsample_case(name, op, kwargs):
    @case(f"test_default_decomposition_core_cia_ops[{name}]", lambda: (torch.randn(2, 3, 4, 5),),
          more_inputs=lambda: [(torch.randn(2, 3, 4, 5),)])
    def build():
        class Upsample(torch.nn.Module):
            def forward(self, x):
                return op(x, **kwargs)

        return Upsample()

    return build


_upsample_case("bilinear", torch.ops.aten.upsample_bilinear2d.vec,
               {"align_corners": False, "scale_factors": [2, 2], "output_size": None})
_upsample_case("nearest", torch.ops.aten.upsample_nearest2d.vec, {"scale_factors": [2, 2], "output_size": None})


@case("test_preserve_non_cia_op", lambda: (torch.randn(2, 3, 4, 5),), more_inputs=lambda: [(torch.randn(2, 3, 4, 5),)])
class Elu(torch.nn.Module):
    def forward(self, x):
        return F.elu(x)


@case("test_preserve_cia_op", lambda: (torch.randn(2, 3, 4, 5, 6),), more_inputs=lambda: [(torch.randn(2, 3, 4, 5, 6),)])
class TrilinearResize(torch.nn.Module):
    def forward(self, x):
        size = (x.shape[2] * 2, x.shape[3] * 3, x.shape[4] * 4)
        return F.interpolate(x, size=size, mode="trilinear", align_corners=False, antialias=False)


@case("test_duplicated_getitem", lambda: (torch.randn(3),), more_inputs=lambda: [(torch.randn(3),)])
class TopTwo(torch.nn.Module):
    def forward(self, x):
        return torch.topk(x, 2)


@case("test_print", lambda: (torch.randn(3, 3),), more_inputs=lambda: [(torch.randn(3, 3),)])
class PrintsWhileComputing(torch.nn.Module):
    # print calls in forward leave no trace in the graph
    def forward(self, x):
        print("parity_d: start")
        doubled = x + x
        print("parity_d:", doubled.shape)
        squared = doubled * doubled
        print(1, 2, 3)
        return doubled, squared + squared


@case("test_print_graph_signature", lambda: (torch.ones(3),), more_inputs=lambda: [(torch.randn(3),)])
class MutatesInputAndBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = torch.nn.Buffer(torch.ones(3))

    def forward(self, x):
        x.add_(1)
        self.buf.add_(2)
        return self.buf + x


@case("test_warning", lambda: (torch.randn(3, 3),), more_inputs=lambda: [(torch.randn(3, 3),)])
class WarnsWhileComputing(torch.nn.Module):
    def forward(self, x):
        warnings.warn("parity_d: moo")
        out = x + x
        warnings.warn(f"parity_d: {out.shape}")
        return out


@case("test_input_output_no_stacktrace", lambda: (torch.ones(3, 3),), more_inputs=lambda: [(torch.randn(3, 3),)])
class DoubleInput(torch.nn.Module):
    def forward(self, x):
        return x + x


@case("test_is_fx_tracing[symbolic]", lambda: (torch.randn(3), torch.randn(3)),
      more_inputs=lambda: [(torch.randn(3), torch.randn(3))])
class BranchOnFxSymbolicTracing(torch.nn.Module):
    # export is not fx symbolic tracing, so the multiply branch is taken (as in eager)
    def forward(self, x, y):
        if torch.fx._symbolic_trace.is_fx_symbolic_tracing():
            return x + y
        return x * y
