# Derived from PyTorch's test/export/test_export.py, Copyright (c) 2016- Facebook, Inc. and
# the PyTorch contributors, under the BSD 3-Clause License: see NOTICE at the repository root.
"""Parity cases ported from the opening part of test/export/test_export.py (pytorch/pytorch).

This covers ``TestDynamismExpression`` and the first stretch of ``TestExport``: pytree
inputs, parameters/buffers/lifted constants, dynamic shapes (Dim, AUTO/DYNAMIC/STATIC hints,
derived dims), unbacked values from ``.item()``/``nonzero``, ``torch.cond``/``while_loop``,
state mutation, tensor-subclass parameters, and exports that are expected to fail for a
user-facing reason (constraint violations, specialization).

Two tests of this range (``test_export_inline_constraints``, ``test_export_slice_maxsize``)
already live in ``cases_example.py`` and are not repeated here.
"""

from types import MethodType

import torch
import torch.nn.functional as F
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim
from torch.testing._internal.custom_tensor import (
    ConstantExtraMetadataTensor,
    CustomTensorPlainOut,
)
from torch.testing._internal.two_tensor import TwoTensor

from tests.parity.harness import case

# A CompositeImplicitAutograd op for the decomposition-table test (namespace private to this file).
_LIB = torch.library.Library("parity_a", "FRAGMENT")
_LIB.define("sin_composite(Tensor x) -> Tensor")
_LIB.impl("sin_composite", lambda t: t.sin(), "CompositeImplicitAutograd")


# ---------------------------------------------------------------------------------------------
# TestDynamismExpression
# ---------------------------------------------------------------------------------------------


# The example size (3) is below the declared minimum of the dim: export must refuse.
@case("test_export_constraints_error_not_in_range", lambda: (torch.zeros(3),),
      dynamic_shapes=lambda: {"x": {0: Dim("dim_x", min=6)}},
      more_inputs=lambda: [(torch.zeros(7),), (torch.rand(9),)])
class IncrementWithMinSize(torch.nn.Module):
    def forward(self, x):
        return x + 1


# In-place update of a parameter under no_grad: shows up as a parameter mutation.
@case("test_no_grad_param_inplace", lambda: (torch.rand(4, 4),), more_inputs=lambda: [(torch.rand(4, 4),)])
class HalveWeightInPlace(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        with torch.no_grad():
            self.weight.div_(2)
        return x + self.weight


# narrow() with an unbacked length bounded by a size.
@case("test_export_slice_unbacked_dim1", lambda: (torch.randn(10, 7), torch.tensor(5)),
      more_inputs=lambda: [(torch.randn(10, 7), torch.tensor(3)), (torch.randn(10, 7), torch.tensor(7))])
class NarrowByScalar(torch.nn.Module):
    def forward(self, x, length):
        n = length.item()
        torch._check_is_size(n, max=x.size(1))
        return x.narrow(1, 0, n)


# stack + reshape of a slice whose size is (s0 - 1); first dim AUTO, second STATIC.
@case("test_reshape_view_backed_size_oblivious", lambda: (torch.randn(10, 32),),
      dynamic_shapes=lambda: {"x": (Dim.AUTO, Dim.STATIC)},
      more_inputs=lambda: [(torch.randn(6, 32),), (torch.randn(3, 32),)])
class StackThenReshape(torch.nn.Module):
    def forward(self, x):
        head = x[:-1, :]
        tripled = torch.stack([head, head, head], dim=0)
        return tripled.reshape(-1, 3, 32)


# Several torch._check calls on an unbacked value (export keeps them as runtime asserts).
# The torch test exports with 3 (which only fails at runtime); eager itself rejects 3, so the
# example here uses in-range values.
@case("test_export_constraints_error", lambda: (torch.tensor([4]),), more_inputs=lambda: [(torch.tensor([5]),)])
class CheckedFull(torch.nn.Module):
    def forward(self, x):
        n = x.item()
        torch._check_is_size(n)
        torch._check(n >= 4)
        torch._check(n <= 5)
        torch._check(n <= 5)
        torch._check(True)
        return torch.full((n, 1), 1)


# Branching on a shape is fine when shapes are static (the default).
@case("test_export_assume_static_by_default", lambda: (torch.rand(4, 5),), more_inputs=lambda: [(torch.rand(4, 5),)])
class BranchOnStaticShape(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        if x.shape[0] == 4:
            return x + 1
        return x


# ---------------------------------------------------------------------------------------------
# TestExport
# ---------------------------------------------------------------------------------------------


@case("test_basic", lambda: ([torch.randn(1, 3)], torch.randn(1, 3)),
      more_inputs=lambda: [([torch.randn(1, 3)], torch.randn(1, 3))])
class FirstOfListPlus(torch.nn.Module):
    def forward(self, xs, y):
        return xs[0] + y


# vmap over a function that converts memory format with .to().
@case("test_vmap_to_assert", lambda: (torch.randn(4, 4, 4, 4), torch.randn(4, 4, 4, 4)),
      more_inputs=lambda: [(torch.ones(4, 4, 4, 4), torch.ones(4, 4, 4, 4))])
class VmapChannelsLast(torch.nn.Module):
    def forward(self, a, b):
        def per_sample(p, q):
            return ((p * q).to("cpu", memory_format=torch.channels_last) + 1).sum(dim=0)

        return torch.vmap(per_sample)(a, b).sum(dim=0)


@case("test_from_node_metadata_export", lambda: (torch.randn(1, 3, 5, 5),), more_inputs=lambda: [(torch.randn(1, 3, 5, 5),)])
class Conv2dThenConv1d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c2 = torch.nn.Conv2d(3, 3, 3)
        self.c1 = torch.nn.Conv1d(3, 3, 3)

    def forward(self, x):
        return self.c1(self.c2(x).squeeze(0))


# bincount with weights: data-dependent output length.
@case("test_bincount", lambda: (torch.randint(0, 8, (5,), dtype=torch.int64),),
      more_inputs=lambda: [(torch.randint(0, 8, (5,), dtype=torch.int64),), (torch.tensor([0, 1, 1, 2, 3]),)])
class WeightedBincount(torch.nn.Module):
    def forward(self, x):
        w = torch.linspace(0, 1, steps=5)
        return x.bincount(w)


# A SymInt returned as an output next to a tensor.
@case("test_symint_output", lambda: (torch.ones(2, 3),),
      dynamic_shapes=lambda: {"x": (Dim("dim0_x"), Dim("dim1_x"))},
      more_inputs=lambda: [(torch.randn(3, 4),), (torch.randn(5, 2),)])
class SizesAsOutputs(torch.nn.Module):
    def forward(self, x):
        rows, cols = x.size()
        return rows + cols + x[0], rows


@case("test_no_tensor_computation", lambda: ([torch.ones(1, 3)], 1), more_inputs=lambda: [([torch.randn(1, 3)], 1)])
class ReturnIntArg(torch.nn.Module):
    def forward(self, xs, n):
        return n


# Scripted helpers are traced through as Python. (The torch tests make the scripted and the
# Python paths differ through torch.jit.is_scripting(); here both paths agree so the program
# can be compared with eager.)
@torch.jit.script
def _scripted_sin(x: torch.Tensor):
    return x.sin()


@case("test_inline_script_function", lambda: (torch.randn(3, 4),), more_inputs=lambda: [(torch.randn(3, 4),)])
class CallsScriptedFunction(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        return _scripted_sin(x)


@case("test_inline_script_class_method", lambda: (torch.randn(3, 4),), more_inputs=lambda: [(torch.randn(3, 4),)])
class CallsScriptedStaticMethod(torch.nn.Module):
    @staticmethod
    @torch.jit.script
    def _impl(x: torch.Tensor):
        return x.sin()

    def forward(self, x: torch.Tensor):
        return CallsScriptedStaticMethod._impl(x)


@torch.jit.script
def _scripted_product(a: torch.Tensor, b: torch.Tensor, scale: float, times: int, length: int):
    return a * b * scale * times * length


_SCALE, _TIMES, _WORD = 0.4, 2, "foo"


@case("test_inline_script_class_method_recursive", lambda: (torch.randn(3, 4),), more_inputs=lambda: [(torch.randn(3, 4),)])
class CallsNestedScripted(torch.nn.Module):
    @staticmethod
    @torch.jit.script
    def _impl(x: torch.Tensor, y: torch.Tensor, f: float, i: int, s: str):
        return _scripted_product(x.sin(), y.sin(), f, i, len(s))

    def forward(self, x: torch.Tensor):
        return CallsNestedScripted._impl(x, y=x, f=_SCALE, i=_TIMES, s=_WORD)


class _ScriptedSinModule(torch.jit.ScriptModule):
    @torch.jit.script_method
    def _impl(self, x: torch.Tensor):
        return x.sin()

    def forward(self, x):
        return self._impl(x)


@case("test_inline_script_method", lambda: (torch.randn(3, 4),), more_inputs=lambda: [(torch.randn(3, 4),)])
class WrapsScriptModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _ScriptedSinModule()

    def forward(self, x):
        return self.inner(x)

    def __deepcopy__(self, memo):
        # A deep-copied ScriptModule loses its Python forward; the wrapper holds no state,
        # so a copy is simply a new instance.
        return type(self)()


@case("test_no_tensor_computation_2", lambda: (torch.randn(3), 1), more_inputs=lambda: [(torch.randn(3), 1)])
class ReturnTensorArg(torch.nn.Module):
    def forward(self, x, n):
        return x


@case("test_no_tensor_computation_3", lambda: (2, 1), more_inputs=lambda: [(2, 1)])
class ReturnConstantFive(torch.nn.Module):
    def forward(self, a, b):
        return 5


@case("test_no_tensor_computation_4", lambda: ([torch.randn(3)], 1), more_inputs=lambda: [([torch.randn(3)], 1)])
class ReturnListArg(torch.nn.Module):
    def forward(self, xs, n):
        return xs


# A Parameter kept in a plain dict is not registered: it becomes a lifted constant.
class ParamInPlainDict(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stash = {"w": torch.nn.Parameter(torch.ones(3, 3))}

    def forward(self, x):
        return x + self.stash["w"]


case("test_not_registered_parameter", lambda: (torch.randn(1, 3),),
     more_inputs=lambda: [(torch.randn(1, 3),)])(ParamInPlainDict)


# int() of a size specializes it: marking those dims DYNAMIC must fail.
@case("test_int_shape_specialization", lambda: (torch.rand(1, 3, 28, 28),),
      dynamic_shapes=lambda: {"x": {2: Dim.DYNAMIC, 3: Dim.DYNAMIC}},
      more_inputs=lambda: [(torch.rand(1, 3, 56, 56),), (torch.rand(1, 3, 20, 30),)])
class InterpolateToOwnSize(torch.nn.Module):
    def forward(self, x):
        target = (int(x.shape[-2] / 1), int(x.shape[-1] / 1))
        return F.interpolate(x, size=target, mode="bilinear")


class _Doubler:
    def twice(self, t):
        return t + t


# The module holds a bound method of an unrelated Python object.
@case("test_external_call_non_strict_real_tensor", lambda: (torch.randn(1, 3),), more_inputs=lambda: [(torch.randn(1, 3),)])
class CallsForeignMethod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.helper = _Doubler().twice

    def forward(self, x):
        return self.helper(x)


# Slice end computed from a polynomial in a dynamic size. (torch's program guards that the end
# equals x's width, as it does for the example, so the other inputs keep that relation.)
@case("test_export_statically_known_true", lambda: (torch.randn(4, 4), torch.randn(4, 4)),
      dynamic_shapes=lambda: ((Dim.DYNAMIC, Dim.DYNAMIC), (Dim.DYNAMIC, Dim.DYNAMIC)),
      more_inputs=lambda: [(torch.randn(3, 10), torch.randn(5, 2)), (torch.randn(2, 18), torch.randn(6, 3))])
class SliceToPolynomialEnd(torch.nn.Module):
    def forward(self, x, y):
        n = y.shape[0]
        stop = n**2 - 3 * n
        return x[:, :stop]


@case("test_colon_parameter", lambda: (torch.randn(3, 3),), more_inputs=lambda: [(torch.randn(3, 3),)])
class ColonNamedParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_parameter("w:v", torch.nn.Parameter(torch.ones(3, 3)))

    def forward(self, x):
        return x + getattr(self, "w:v")


# conv -> in-place add of a second input -> relu -> maxpool, dynamic batch shared by both.
@case("test_conv_dynamic", lambda: (torch.randn(2, 3, 24, 24), torch.ones(2, 32, 24, 24)),
      dynamic_shapes=lambda: {"x": {0: Dim("batch")}, "y": {0: Dim("batch")}},
      more_inputs=lambda: [(torch.randn(5, 3, 24, 24), torch.ones(5, 32, 24, 24)),
                           (torch.randn(3, 3, 24, 24), torch.randn(3, 32, 24, 24))])
class ConvAddPool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels=3, out_channels=32, kernel_size=3, padding=1)
        self.act = torch.nn.ReLU()
        self.pool = torch.nn.MaxPool2d(kernel_size=3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)
        h.add_(y)
        return self.pool(self.act(h))


_MHA_EMBED, _MHA_HEADS = 16, 4


def _mha_inputs(batch, distinct=False):
    q = 6 * torch.rand(batch, 8, _MHA_EMBED) - 3
    if distinct:
        return (q, q.clone(), q.clone(), None)
    return (q, q, q, None)


def _mha_spec():
    return {"q": {0: Dim("dim0_q", max=1024)}, "k": {0: Dim("dim0_k", max=1024)},
            "v": {0: Dim("dim0_v", max=1024)}, "key_padding_mask": None}


# torch._native_multi_head_attention with a dynamic batch on query, key and value.  As in
# torch's test, one tensor is query, key and value: a Dim on each input names one size.
@case("test_native_multi_attention_head[distinct]", lambda: _mha_inputs(4, distinct=True), dynamic_shapes=_mha_spec,
      more_inputs=lambda: [_mha_inputs(3, distinct=True), _mha_inputs(7, distinct=True)])
@case("test_native_multi_attention_head", lambda: _mha_inputs(16), dynamic_shapes=_mha_spec,
      more_inputs=lambda: [_mha_inputs(3), _mha_inputs(7)])
class NativeMultiHeadAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = torch.nn.Linear(_MHA_EMBED, 3 * _MHA_EMBED)
        self.out_proj = torch.nn.Linear(_MHA_EMBED, _MHA_EMBED)

    def forward(self, q, k, v, key_padding_mask):
        return torch._native_multi_head_attention(
            q, k, v, _MHA_EMBED, _MHA_HEADS,
            self.in_proj.weight, self.in_proj.bias, self.out_proj.weight, self.out_proj.bias,
            key_padding_mask, need_weights=False, average_attn_weights=False, mask_type=1,
        )


# A tensor constant that is created but never used.
@case("test_unused_constant", lambda: (torch.randn(3),), more_inputs=lambda: [(torch.randn(3),)])
class UnusedTensorConstant(torch.nn.Module):
    def forward(self, x):
        unused = torch.tensor(3)  # noqa: F841
        return x * x


# Sizes from .tolist() feed ones() and bincount(minlength=...).
class BincountUnbacked(torch.nn.Module):
    def forward(self, sizes):
        count, min_len = sizes.tolist()
        ones = torch.ones(count, dtype=torch.int64)
        return torch.bincount(ones, minlength=min_len)


case("test_unbacked_bincount", lambda: (torch.tensor([20, 10]),),
     more_inputs=lambda: [(torch.tensor([5, 10]),), (torch.tensor([7, 3]),)])(BincountUnbacked)


@case("test_masked_select_dynamic", lambda: (torch.randn(3, 4, 5),),
      dynamic_shapes=lambda: {"x": {0: Dim("dim0_x", max=100), 1: Dim("dim1_x_max", max=7)}},
      more_inputs=lambda: [(torch.randn(5, 6, 5),), (torch.randn(2, 3, 5),)])
class MaskedSelectHalf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.masked_select(x, x.ge(0.5))


class _NonzeroWithFlag(torch.nn.Module):
    def forward(self, x: torch.Tensor, as_tuple: bool):
        return torch.nonzero(x, as_tuple=as_tuple)


def _nonzero_spec():
    return {"x": {0: Dim("dim0_x", max=100), 1: Dim("dim1_x_max", max=7)}, "as_tuple": None}


case("test_nonzero_dynamic[as_tuple]", lambda: (torch.randn(3, 4, 5), True), dynamic_shapes=_nonzero_spec,
     more_inputs=lambda: [(torch.randn(6, 2, 5), True), (torch.randn(2, 7, 5), True)])(_NonzeroWithFlag)
case("test_nonzero_dynamic[no_tuple]", lambda: (torch.randn(3, 4, 5), False), dynamic_shapes=_nonzero_spec,
     more_inputs=lambda: [(torch.randn(6, 2, 5), False), (torch.randn(2, 7, 5), False)])(_NonzeroWithFlag)
case("test_nonzero_dynamic[scalar]", lambda: (torch.tensor(10), False),
     dynamic_shapes=lambda: {"x": None, "as_tuple": None},
     more_inputs=lambda: [(torch.tensor(7), False), (torch.tensor(0), False)])(_NonzeroWithFlag)


def _nonzero_static_inputs(rows):
    return (torch.randn(rows, 5), torch.ones(rows, 5, dtype=torch.bool), torch.randn(rows * 5))


# nonzero_static sized by another input's (backed) length, then gather with the chunks.
@case("test_mask_nonzero_static", lambda: _nonzero_static_inputs(5),
      dynamic_shapes=lambda: {"seq_embeddings": (Dim("batch"), None), "mask": (Dim("batch"), None),
                              "exp": (Dim("exp_size", max=100),)},
      more_inputs=lambda: [_nonzero_static_inputs(6), _nonzero_static_inputs(4)])
class GatherByStaticNonzero(torch.nn.Module):
    def forward(self, seq_embeddings, mask, exp):
        idx = torch.nonzero_static(mask, size=exp.shape[0])
        pieces = idx.chunk(chunks=mask.dim(), dim=1)
        picked = seq_embeddings[pieces].squeeze()
        return picked * 2


# A tensor constant created under enable_grad.
@case("test_setgrad_lifted_tensor", lambda: (torch.randn(4), torch.randn(4)),
      more_inputs=lambda: [(torch.randn(4), torch.randn(4))])
class ConstantUnderEnableGrad(torch.nn.Module):
    def forward(self, x, y):
        with torch.enable_grad():
            four = torch.tensor(4)
            s = four + x + y
        return s * s


@case("test_basic_non_strict_real_tensor", lambda: ([torch.randn(1, 3)], torch.randn(1, 3)),
      more_inputs=lambda: [([torch.randn(1, 3)], torch.randn(1, 3))])
class ListInputMinusParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.offset = torch.nn.Parameter(torch.randn(1, 3))

    def forward(self, xs, y):
        return xs[0] + y - self.offset


# aten.where with a single argument (the nonzero-like overload), all dims AUTO.
@case("test_where_decomp", lambda: (torch.randn(2, 3),),
      dynamic_shapes=lambda: ({0: Dim.AUTO, 1: Dim.AUTO},),
      more_inputs=lambda: [(torch.randn(3, 5),), (torch.randn(4, 2),)])
class WhereSingleArg(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.where.default(x > 0)


class _BufferMutationWithShapeBranch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.u = torch.nn.Buffer(torch.ones(1))
        self.v = torch.nn.Buffer(torch.ones(1))

    def forward(self, x, ys, zs, c):
        total = ys[0] + ys[1] + zs["a"] + zs["b"]
        self.v.add_(3)
        diff = self.u - self.v
        if x.shape[0] < 3 and c.shape[0] != 4:
            return x + diff, x + total
        return x - diff, x - total


def _pytree_inputs(n):
    return (torch.randn(n), [torch.randn(n), torch.randn(n)], {"a": torch.randn(n), "b": torch.randn(n)}, torch.ones(4))


def _shared_dim_spec():
    d = Dim("dim", min=3)
    return ({0: d}, [{0: d}, {0: d}], {"a": {0: d}, "b": {0: d}}, None)


# One dim shared across list and dict leaves, a buffer mutation and a shape branch.
case("test_non_strict_dynamic_shapes", lambda: _pytree_inputs(5), dynamic_shapes=_shared_dim_spec,
     more_inputs=lambda: [_pytree_inputs(7), _pytree_inputs(3)])(_BufferMutationWithShapeBranch)
# Same model with an example of size 2, below the dim's minimum of 3.
case("test_non_strict_dynamic_shapes[bad_example]", lambda: _pytree_inputs(2), dynamic_shapes=_shared_dim_spec,
     more_inputs=lambda: [_pytree_inputs(4), _pytree_inputs(6)])(_BufferMutationWithShapeBranch)


# Branching on x.shape[0] <= 6 narrows the dim: export fails with a suggested fix.
@case("test_non_strict_dynamic_shapes_suggested_fixes", lambda: (torch.ones(5), torch.ones(4)),
      dynamic_shapes=lambda: ({0: Dim("dim", min=3)}, None),
      more_inputs=lambda: [(torch.randn(4), torch.randn(4)), (torch.randn(6), torch.randn(4))])
class BranchOnUpperBound(torch.nn.Module):
    def forward(self, x, c):
        if x.shape[0] <= 6:
            return x + 1, c + 2
        return x - 1, c - 2


class _ItemOut(torch.nn.Module):
    def forward(self, t):
        return t.item()


case("test_symbool_item", lambda: (torch.tensor([1], dtype=torch.bool),),
     more_inputs=lambda: [(torch.tensor([0], dtype=torch.bool),)])(_ItemOut)
case("test_symint_item", lambda: (torch.tensor([1], dtype=torch.int),),
     more_inputs=lambda: [(torch.tensor([7], dtype=torch.int),)])(_ItemOut)
case("test_symfloat_item", lambda: (torch.tensor([3.14], dtype=torch.float),),
     more_inputs=lambda: [(torch.tensor([-2.5], dtype=torch.float),)])(_ItemOut)


def _sparse_vector():
    return torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0])


# torch.cond predicated on an unbacked size (number of nonzeros), reducing in each branch.
@case("test_unbacked_to_cond", lambda: (torch.randn(7),), more_inputs=lambda: [(torch.randn(7),), (_sparse_vector(),)])
class CondOnNonzeroCount(torch.nn.Module):
    def forward(self, a):
        nz = a.nonzero()

        def big(t):
            return (t + 1).sum()

        def small(t):
            return (t + 3).sum()

        return torch.cond(nz.size(0) > 3, big, small, (nz,)) * 2


# Same, but the branches return the unbacked-shaped tensor itself.
@case("test_unbacked_to_cond_passthrough", lambda: (torch.randn(7),),
      more_inputs=lambda: [(torch.randn(7),), (_sparse_vector(),)])
class CondOnNonzeroCountPassthrough(torch.nn.Module):
    def forward(self, a):
        nz = a.nonzero()

        def big(t):
            return t + 1

        def small(t):
            return t + 3

        return torch.cond(nz.size(0) > 3, big, small, (nz,)) * 2


# cond whose branches return distinct Python ints, used to index.
@case("test_cond_branches_return_constant_int", lambda: (torch.randn(3, 3),),
      more_inputs=lambda: [(torch.ones(3, 3),), (-torch.ones(3, 3),)])
class CondPicksRow(torch.nn.Module):
    def forward(self, x):
        row = torch.cond(x.sum() > 3, lambda: 0, lambda: 1, ())
        return x[row]


# cond on a SymBool from a dynamic int input; branches close over the inputs.
@case("test_cond_access_identical_symint_closure", lambda: (torch.randn(2), 0, 2),
      dynamic_shapes=lambda: (None, Dim.DYNAMIC, Dim.DYNAMIC),
      more_inputs=lambda: [(torch.randn(2), 1, 3), (torch.randn(2), 0, 5)])
class CondOnIntTrigger(torch.nn.Module):
    def forward(self, x, trigger, target):
        return torch.cond(trigger == 1, lambda: x + target, lambda: x * target, ())


@case("test_cond_branches_return_same_int", lambda: (torch.randn(3, 3),),
      more_inputs=lambda: [(torch.ones(3, 3),), (-torch.ones(3, 3),)])
class CondSameIntBothWays(torch.nn.Module):
    def forward(self, x):
        row = torch.cond(x.sum() > 3, lambda: 0, lambda: 0, ())
        return x[row]


# .item() inside cond branches; the unbacked values do not escape the branches. (The torch test
# also sets requires_grad on x; the harness clones inputs, and a cloned grad-requiring tensor
# stored in the program's example inputs cannot be deep-copied, so it is left off here.)
class CondWithItemInBranches(torch.nn.Module):
    def forward(self, pred, m1, m2, x):
        def on_true(t):
            return t * m1.item()

        def on_false(t):
            return t * m2.item()

        return torch.cond(pred, on_true, on_false, (x,)) * 2


case("test_cond_contains_unbacked_no_escape",
     lambda: (torch.tensor(True), torch.tensor([4]), torch.tensor([4]), torch.randn(10)),
     more_inputs=lambda: [(torch.tensor(False), torch.tensor([2]), torch.tensor([3]), torch.randn(10))],
     )(CondWithItemInBranches)


# Branches close over an int attribute of the module.
@case("test_cond_int_closure", lambda: (torch.tensor(True), torch.randn(10)),
      more_inputs=lambda: [(torch.tensor(False), torch.randn(10)), (torch.tensor(True), torch.randn(10))])
class CondWithIntAttr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 4

    def forward(self, pred, x):
        def on_true(t):
            return t * self.k

        def on_false(t):
            return t + self.k

        return torch.cond(pred, on_true, on_false, (x,)) * 2


# --- test_state_tensors: tensors assigned to attributes during forward -----------------------


# A registered non-persistent buffer reassigned twice; the last value is the mutation.
@case("test_state_tensors[buffer]", lambda: (torch.randn(2, 3),), more_inputs=lambda: [(torch.ones(2, 3) + 1,)])
class ReassignBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.state = torch.nn.Buffer(torch.ones(2, 3), persistent=False)

    def forward(self, x):
        before = self.state
        plus3 = self.state + 3
        plus4 = self.state + 4
        plus5 = self.state + 5
        self.state = plus3
        middle = self.state
        self.state = plus5
        return x + before + middle + plus4


# A plain tensor attribute (not a buffer) reassigned: torch warns but exports.
@case("test_state_tensors[plain_attr]", lambda: (torch.randn(2, 3),), more_inputs=lambda: [(torch.ones(2, 3) + 1,)])
class ReassignPlainTensorAttr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.state = torch.ones(2, 3)

    def forward(self, x):
        before = self.state
        self.state = self.state + 3
        return x + before + self.state


# Buffers reached through getattr/setattr helpers.
@case("test_state_tensors[buffers_via_helpers]", lambda: (torch.randn(2, 3),), more_inputs=lambda: [(torch.ones(2, 3) + 1,)])
class ReassignBuffersViaHelpers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(2):
            self.register_buffer(f"slot_{i}", torch.ones(2, 3), persistent=False)

    def _get(self, i):
        return getattr(self, f"slot_{i}")

    def _set(self, i, value):
        setattr(self, f"slot_{i}", value)

    def forward(self, x):
        first = self._get(0) + self._get(1)
        self._set(0, torch.ones(2, 3) + 2)
        self._set(1, torch.ones(2, 3) + 2)
        second = self._get(0) + self._get(1)
        return x + first + second


# Tensors in a plain Python list attribute, overwritten in place in the list.
@case("test_state_tensors[list_attr]", lambda: (torch.randn(2, 3),), more_inputs=lambda: [(torch.ones(2, 3) + 1,)])
class ReassignListOfTensors(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.slots = [torch.ones(2, 3), torch.ones(2, 3)]

    def forward(self, x):
        first = self.slots[0] + self.slots[1]
        self.slots[0] = torch.ones(2, 3) + 2
        self.slots[1] = torch.ones(2, 3) + 2
        second = self.slots[0] + self.slots[1]
        return x + first + second


# while_loop whose body indexes with .item() of the loop counter.
@case("test_while_loop_tensor_constant_idx", lambda: (torch.randn(6, 4), torch.randn(4)),
      more_inputs=lambda: [(torch.randn(6, 4), torch.randn(4))])
class PrefixSumWhileLoop(torch.nn.Module):
    def forward(self, x, y0):
        acc = torch.zeros_like(x)

        def keep_going(i, acc, run):
            return i < acc.size(0)

        def step(i, acc, run):
            j = i.item()
            torch._check_is_size(j, max=x.size(0) - 1)
            run = x[j] + run
            acc = acc.clone()
            acc[j] = run
            return i + 1, acc, run

        _, acc, _ = while_loop(keep_going, step, [torch.tensor(0), acc, y0])
        return acc


# --- test_malformed_fqn_from_source_name: forward replaced by an instance-level method ------


class _LinearDropBlock(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.to_out = torch.nn.ModuleList([torch.nn.Linear(width, width, bias=True), torch.nn.Dropout(0.5)])

    def forward(self, x):
        for layer in self.to_out:
            x = layer(x)
        return x


class _BlocksInDict(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleDict({str(i): _LinearDropBlock(16) for i in range(5)})

    def forward(self, x):
        for block in self.blocks.values():
            x = block(x)
        return x


class _BlocksInList(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([_LinearDropBlock(16) for _ in range(5)])

    def forward(self, x):
        x = self.blocks[0](x)
        for block in self.blocks[1:4]:
            x = block(x)
        return x


def _forward_through_saved(self, *args, **kwargs):
    return self._saved_forward(*args, **kwargs)


def _with_patched_forwards(model, names):
    # Mimics pipeline split-point annotation: instance-level forward wrappers on sub-blocks.
    model(torch.rand(16, 16))
    for name in names:
        *path, last = name.split(".")
        parent = model
        for atom in path:
            parent = getattr(parent, atom)
        target = getattr(parent, last)
        target._saved_forward = target.forward
        target.forward = MethodType(_forward_through_saved, target)
    # eval(): dropout in train mode would make eager and the program draw different masks.
    return model.eval()


case("test_malformed_fqn_from_source_name[module_dict]", lambda: (torch.rand(16, 16),),
     more_inputs=lambda: [(torch.rand(16, 16),)])(lambda: _with_patched_forwards(_BlocksInDict(), ["blocks.1", "blocks.3"]))
case("test_malformed_fqn_from_source_name[module_list]", lambda: (torch.rand(16, 16),),
     more_inputs=lambda: [(torch.rand(16, 16),)])(lambda: _with_patched_forwards(_BlocksInList(), ["blocks.1", "blocks.3"]))


class _CallsGivenFn(torch.nn.Module):
    def forward(self, fn, x):
        return fn(x + 2) + 4


class _AddThree(torch.nn.Module):
    def forward(self, x):
        return x + 3


# A submodule receives a lambda closing over a tensor and another submodule.
@case("test_unflatten_closure", lambda: (torch.randn(3),), more_inputs=lambda: [(torch.randn(3),)])
class PassesClosureToChild(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.caller = _CallsGivenFn()
        self.adder = _AddThree()

    def forward(self, x):
        base = x + 1
        out = self.caller(lambda t: self.adder(base + t) + base, base)
        return out + 5


# Python-number state (int, dict entry, tuple) updated during forward.
@case("test_state_primitives", lambda: (torch.randn(2, 3),), more_inputs=lambda: [(torch.zeros(2, 3),)])
class BumpsPythonState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 1
        self.table = {"k": 2}
        self.pair = (3,)

    def forward(self, x):
        self.count = self.count + 4
        self.table["k"] = self.table["k"] + 5
        self.pair = (self.pair[0] + 6,)
        return x + self.count + self.table["k"] + self.pair[0]


# Storing x.shape on the module during forward.
@case("test_state_shape_attribute_assignment", lambda: (torch.randn(20, 10),), more_inputs=lambda: [(torch.randn(20, 10),)])
class RemembersShape(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(10, 10)
        self.seen_shape = self.fc.weight.shape

    def forward(self, x):
        self.seen_shape = x.shape
        return self.fc(x)


# Boolean-mask indexing on both inputs, returning max() of the two unbacked lengths. (The torch
# test runs with fake_tensor_propagate_real_tensors; this port exports it plainly.)
@case("test_real_tensor_for_max_op", lambda: (torch.zeros(64), torch.ones(64)),
      more_inputs=lambda: [(torch.zeros(64), torch.zeros(64)), (torch.randn(64), torch.ones(64))])
class MaxOfMaskedLengths(torch.nn.Module):
    def forward(self, x, y):
        x = x[x > 0]
        y = y[y > 0]
        return max(x.shape[0], y.shape[0])


# --- tensor-subclass parameters and buffers --------------------------------------------------


class SubclassParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Parameter(torch.ones(3, 4))
        self.wrapped = torch.nn.Parameter(CustomTensorPlainOut(torch.ones(3, 4), torch.ones(3, 4)))

    def forward(self, x):
        return x + (2 * self.plain + self.wrapped).sum()

    def __deepcopy__(self, memo):
        # CustomTensorPlainOut cannot be deep-copied; the state is constant, so rebuild it.
        return type(self)()


class NestedSubclassParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Parameter(torch.ones(2, 2))
        self.wrapped = torch.nn.Parameter(
            CustomTensorPlainOut(
                CustomTensorPlainOut(torch.Tensor([[0, 0], [0, 1]]), torch.Tensor([[0, 0], [1, 0]])),
                CustomTensorPlainOut(torch.Tensor([[1, 0], [0, 0]]), torch.Tensor([[0, 1], [0, 0]])),
            )
        )

    def forward(self, x):
        total = (x + 2 * self.plain + self.wrapped).sum().sum()
        return x + total

    def __deepcopy__(self, memo):
        # CustomTensorPlainOut cannot be deep-copied; the state is constant, so rebuild it.
        return type(self)()


case("test_subclasses_parameterization", lambda: (torch.randn(3, 4),),
     more_inputs=lambda: [(torch.randn(3, 4),)])(SubclassParam)
case("test_subclasses_parameterization_nested", lambda: (torch.randn(2, 2),),
     more_inputs=lambda: [(torch.randn(2, 2),)])(NestedSubclassParam)


def _nested_two_tensor():
    return TwoTensor(TwoTensor(torch.ones(3, 4), torch.ones(3, 4)), TwoTensor(torch.ones(3, 4), torch.ones(3, 4)))


# Reading an inner tensor of a nested TwoTensor result.
@case("test_subclass_nested_attr_access", lambda: (torch.randn(3, 4),), more_inputs=lambda: [(torch.randn(3, 4),)])
class NestedTwoTensorAccess(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Parameter(torch.ones(3, 4))
        self.wrapped = torch.nn.Parameter(_nested_two_tensor())
        self.wrapped_buf = torch.nn.Buffer(_nested_two_tensor())

    def forward(self, x):
        total = (2 * self.plain + self.wrapped + self.wrapped_buf).sum()
        return x + total.get_elem_a().b


class _HoldsSubclassState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Parameter(torch.ones(3, 4))
        self.wrapped = torch.nn.Parameter(_nested_two_tensor())
        self.wrapped_buf = torch.nn.Buffer(_nested_two_tensor())

    def forward(self, x):
        return x


# Same, with the subclass state living on a child module.
@case("test_subclass_nested_attr_access_submodule", lambda: (torch.randn(3, 4),), more_inputs=lambda: [(torch.randn(3, 4),)])
class NestedTwoTensorAccessFromChild(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.child = _HoldsSubclassState()

    def forward(self, x):
        total = (2 * self.child.plain + self.child.wrapped + self.child.wrapped_buf).sum()
        return x + total.get_elem_a().b


# A subclass carrying constant metadata that is read during forward.
@case("test_subclass_nested_attr_access_const_metadata", lambda: (torch.randn(3, 4),), more_inputs=lambda: [(torch.randn(3, 4),)])
class ConstMetadataSubclass(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Parameter(torch.ones(3, 4))
        self.wrapped = torch.nn.Parameter(ConstantExtraMetadataTensor(ConstantExtraMetadataTensor(torch.ones(3, 4))))

    def forward(self, x):
        r = 2 * self.plain + self.wrapped
        r2 = r + r.constant_attribute
        return x + r2.elem.elem


# Constant-metadata subclasses nested inside a TwoTensor. (The torch file defines this test
# name twice; the second definition, ported here, is the one that runs.)
@case("test_subclass_nested_attr_access_const_metadata_not_top_level", lambda: (torch.randn(3, 4),),
      more_inputs=lambda: [(torch.randn(3, 4),)])
class ConstMetadataInsideTwoTensor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Parameter(torch.ones(3, 4))
        self.wrapped = torch.nn.Parameter(
            TwoTensor(ConstantExtraMetadataTensor(torch.ones(3, 4)), ConstantExtraMetadataTensor(torch.ones(3, 4)))
        )

    def forward(self, x):
        r = 2 * self.plain + self.wrapped
        r2 = r + r.a.elem + r.b.constant_attribute
        return x + r2.a.elem


@case("test_subclass_nested_attr_access_complicated_metadata", lambda: (torch.randn(3, 4),),
      more_inputs=lambda: [(torch.randn(3, 4),)])
class ComplicatedMetadataSubclass(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Parameter(torch.ones(3, 4))
        self.wrapped = torch.nn.Parameter(ConstantExtraMetadataTensor(ConstantExtraMetadataTensor(torch.ones(3, 4))))

    def forward(self, x):
        r = x + 2 * self.plain + self.wrapped
        return r.elem.elem + self.wrapped.get_complicated_metadata().foo


# vmap with dynamic batch sizes.
@case("test_vmap", lambda: (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.1, 0.2, 0.3])),
      dynamic_shapes=lambda: {"x": {0: Dim.DYNAMIC}, "y": {0: Dim.DYNAMIC}},
      more_inputs=lambda: [(torch.randn(5), torch.randn(5)), (torch.randn(2), torch.randn(2))])
class VmapMulAdd(torch.nn.Module):
    def forward(self, x, y):
        def per_sample(a, b):
            return (a * b + 1).sum(dim=0)

        return torch.vmap(per_sample)(x, y).sum(dim=0)


class _AddItem(torch.nn.Module):
    def forward(self, rv: torch.Tensor, t: torch.Tensor):
        return rv + t.item()


# Exporting a ScriptModule is refused.
@case("test_export_script_module", lambda: (torch.zeros(3, 4), torch.tensor(7)),
      more_inputs=lambda: [(torch.randn(3, 4), torch.tensor(2))])
def _scripted_add_item():
    return torch.jit.script(_AddItem())


# --- Dim hints mixed with named Dims ---------------------------------------------------------


class _Subtract(torch.nn.Module):
    def forward(self, x, y):
        return x - y


case("test_dim_auto_and_dim[basic]", lambda: (torch.randn(4, 4), torch.randn(4, 4)),
     dynamic_shapes=lambda: {"x": (Dim.AUTO, Dim("d1", min=3)), "y": (Dim("d0", max=8), Dim.DYNAMIC)},
     more_inputs=lambda: [(torch.randn(6, 5), torch.randn(6, 5)), (torch.randn(8, 3), torch.randn(8, 3))])(_Subtract)


def _three_x_plus_one_spec():
    dx = Dim("dx", min=2, max=10)
    return {"x": (dx,), "y": (3 * dx + 1,), "z": (Dim.AUTO,)}


@case("test_dim_auto_and_dim[derived]", lambda: (torch.randn(4), torch.randn(13), torch.randn(4)),
      dynamic_shapes=_three_x_plus_one_spec,
      more_inputs=lambda: [(torch.randn(5), torch.randn(16), torch.randn(5)), (torch.randn(2), torch.randn(7), torch.randn(2))])
class AddStridedSlice(torch.nn.Module):
    def forward(self, x, y, z):
        return x + y[1::3] + z


# x is STATIC and y a named Dim, but they must be equal: specialization is an error.
case("test_dim_auto_and_dim[specialized]", lambda: (torch.randn(4), torch.randn(4)),
     dynamic_shapes=lambda: {"x": (Dim.STATIC,), "y": (Dim("dy"),)},
     more_inputs=lambda: [(torch.randn(4), torch.randn(4))])(_Subtract)


# Writing a dynamic-width input into a slice of a clone (slice_scatter after functionalization).
@case("test_issue_157289", lambda: (torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 3)),
      dynamic_shapes=lambda: {"causal_mask": {3: Dim("M")}, "fill_value": {3: Dim("N")}},
      more_inputs=lambda: [(torch.randn(2, 2, 3, 6), torch.randn(2, 2, 3, 5)),
                           (torch.randn(2, 2, 3, 8), torch.randn(2, 2, 3, 2))])
class FillPrefixOfMask(torch.nn.Module):
    def forward(self, causal_mask, fill_value):
        out = causal_mask.clone()
        width = fill_value.shape[-1]
        out[:, :, :, :width] = fill_value
        return out


class _AddTwo(torch.nn.Module):
    def forward(self, x):
        return x + 2


# DYNAMIC on sizes 0 and 1 is rejected (0/1 specialization).
case("test_dim_dynamic_specialization[zero_one]", lambda: (torch.randn(0, 1),),
     dynamic_shapes=lambda: {"x": {0: Dim.DYNAMIC, 1: Dim.DYNAMIC}},
     more_inputs=lambda: [(torch.randn(3, 4),), (torch.randn(5, 2),)])(_AddTwo)


# An assert pins the size to 32, which conflicts with DYNAMIC(min=32).
@case("test_dim_dynamic_specialization[static]", lambda: (torch.randn(32),),
      dynamic_shapes=lambda: {"x": {0: Dim.DYNAMIC(min=32)}},
      more_inputs=lambda: [(torch.randn(32),)])
class AssertAtMost32(torch.nn.Module):
    def forward(self, x):
        assert x.shape[0] <= 32
        return x + 2


class _Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


# Ranges on AUTO/DYNAMIC hints, intersected across the two inputs.
case("test_dim_hint_ranges", lambda: (torch.randn(6, 4), torch.randn(6, 4)),
     dynamic_shapes=lambda: {"x": (Dim.AUTO(min=4), Dim.AUTO), "y": (Dim.DYNAMIC(max=16), Dim.AUTO(max=32))},
     more_inputs=lambda: [(torch.randn(8, 5), torch.randn(8, 5)), (torch.randn(16, 32), torch.randn(16, 32))])(_Add)


class _NestedPairSlice(torch.nn.Module):
    def forward(self, xs):
        x, y = xs["data"][0]
        assert y.shape[0] <= 32
        return x[6:], y + 2


def _nested_pair(nx, ny):
    return ({"data": [[torch.randn(nx), torch.randn(ny)]]},)


# x[6:] needs x >= 8 (the inferred range), but the hint caps x at 5.
case("test_dim_hint_range_violations[lower]", lambda: _nested_pair(8, 8),
     dynamic_shapes=lambda: {"xs": {"data": [[(Dim.DYNAMIC(max=5),), None]]}},
     more_inputs=lambda: [_nested_pair(4, 8), _nested_pair(3, 8)])(_NestedPairSlice)
# The assert caps y at 32, but the hint asks for [48, 62].
case("test_dim_hint_range_violations[upper]", lambda: _nested_pair(8, 8),
     dynamic_shapes=lambda: {"xs": {"data": [[None, (Dim.AUTO(min=48, max=62),)]]}},
     more_inputs=lambda: [_nested_pair(8, 16), _nested_pair(8, 20)])(_NestedPairSlice)
# A STATIC hint with a range that excludes the example size.
case("test_dim_hint_range_violations[static]", lambda: (torch.randn(4),),
     dynamic_shapes=lambda: {"x": [Dim.STATIC(min=6, max=8)]},
     more_inputs=lambda: [(torch.randn(4),)])(_AddTwo)


# Two conflicts at once (x capped at 32 by an assert, y floored at 128).
@case("test_dim_hint_range_violations[multiple]", lambda: (torch.randn(16), torch.randn(256)),
      dynamic_shapes=lambda: {"x": (Dim.DYNAMIC(min=33),), "y": (Dim.DYNAMIC(max=127),)},
      more_inputs=lambda: [(torch.randn(20), torch.randn(200)), (torch.randn(8), torch.randn(130))])
class TwoAssertedBounds(torch.nn.Module):
    def forward(self, x, y):
        assert x.shape[0] <= 32
        assert y.shape[0] >= 128
        return x + 2, y + 2


# The same Linear called twice, relu, self-add.
@case("test_torch_fn[module]", lambda: (torch.randn(3, 3),), more_inputs=lambda: [(torch.randn(3, 3),)])
class LinearTwiceRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        x = self.fc(x)
        x = self.fc(x)
        x = self.act(x)
        return x + x


# Functional linear with weight and bias given as inputs.
@case("test_torch_fn[functional]", lambda: (torch.randn(3, 3), torch.randn(3, 3), torch.randn(3)),
      more_inputs=lambda: [(torch.randn(3, 3), torch.randn(3, 3), torch.randn(3))])
class FunctionalLinearRelu(torch.nn.Module):
    def forward(self, x, weight, bias):
        x = F.linear(x, weight, bias)
        x = F.relu(x)
        return torch.add(x, x)


# Symbolic int arithmetic inside and outside no_grad, returned as outputs.
@case("test_hoo_inline_users_issue", lambda: (torch.randn(6),),
      dynamic_shapes=lambda: {"x": (Dim("dx"),)},
      more_inputs=lambda: [(torch.randn(4),), (torch.randn(9),)])
class SizeMathUnderNoGrad(torch.nn.Module):
    def forward(self, x):
        a = x.shape[0] + 2
        b = a + 2
        with torch.no_grad():
            c = a * 4
        return b, c


# A CompositeImplicitAutograd custom op after a Linear.
@case("test_export_preserve_linear_but_not_custom_op", lambda: (torch.randn(4, 4),), more_inputs=lambda: [(torch.randn(4, 4),)])
class LinearThenCompositeOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.ops.parity_a.sin_composite(self.fc(x))


@case("test_export_preserve_linear_at_aot_level", lambda: (torch.randn(3, 3),), more_inputs=lambda: [(torch.randn(3, 3),)])
class LinearThenChunk(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.ops.aten.chunk.default(self.fc(x), 3, 0)


class _CosChild(torch.nn.Module):
    def helper(self, x):
        return x.cos()

    def forward(self, x):
        return self.helper(x)


# cond branches given as a child's forward and as a method of the module.
@case("test_export_cond_preserve_torch_fn_for_subgraphs", lambda: (torch.randn(1, 3, 3, 3),),
      more_inputs=lambda: [(torch.zeros(1, 3, 3, 3),), (torch.ones(1, 3, 3, 3),)])
def _cond_with_method_branches():
    class CondBranchesAreMethods(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.child = _CosChild()

        def sine(self, x):
            return x.sin()

        def forward(self, x):
            return torch.cond(x.sum() <= 2, self.child.forward, self.sine, [x])

    return CondBranchesAreMethods().eval()


# Slice-assign into a buffer with a dynamic length, plus a full-step slice of another input.
# (The torch test runs this under backed_size_oblivious; this port exports it plainly.)
@case("test_ends_of_bounds_oblivious", lambda: (torch.randn(10), torch.randn(32, 36)),
      dynamic_shapes=lambda: {"x": {0: Dim("dx", min=1, max=10)}, "y": {0: Dim("dy0"), 1: Dim("dy1")}},
      more_inputs=lambda: [(torch.randn(9), torch.randn(4, 4)), (torch.randn(3), torch.randn(5, 7))])
class WriteIntoBufferPrefix(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("store", torch.zeros(10))

    def forward(self, x, y):
        self.store[0 : x.shape[0]] = x
        return x + 2, y[:, ::1]


def _nonzero_prefix(n):
    return (torch.cat([torch.ones(n), torch.zeros(64 - n)]), torch.randn(32), torch.randn(n, 32))


# An unbacked row count (nonzero) broadcast against a backed dynamic dim.
# (The torch test runs this under backed_size_oblivious; this port exports it plainly.)
@case("test_colin_unbacked_backed_vr_sub", lambda: (torch.ones(64), torch.randn(32), torch.randn(64, 32)),
      dynamic_shapes=lambda: {"a": None, "b": None, "c": (Dim.DYNAMIC, Dim.STATIC)},
      more_inputs=lambda: [_nonzero_prefix(10), _nonzero_prefix(40)])
class OnesFromNonzeroPlus(torch.nn.Module):
    def forward(self, a, b, c):
        nz = torch.nonzero(a)
        ones = a.new_ones([nz.size(0), b.size(0)])
        torch._check(ones.size(0) >= 1)
        return torch.add(ones, c)


class _BufHolder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.randn(4), persistent=False)

    def forward(self, x):
        return x + self.buf


class _Forwarder(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


# One module with a non-persistent buffer reachable under two paths.
@case("test_duplicate_modules_with_non_persistent_buffers", lambda: (torch.randn(4),), more_inputs=lambda: [(torch.randn(4),)])
class SharedChildTwice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        shared = _BufHolder()
        self.left = _Forwarder(shared)
        self.right = _Forwarder(shared)

    def forward(self, x):
        return self.left(x) + self.right(x)


def _dimx():
    return Dim("dimx", min=3, max=6)


def _pair_spec(fx, fy, root=_dimx):
    """A spec ``({0: fx(d)}, {0: fy(d)})`` for two 1-d inputs, both derived from one root dim."""
    d = root()
    return ({0: fx(d)}, {0: fy(d)})


# --- derived dims ---------------------------------------------------------------------------


class _AddShifted(torch.nn.Module):
    def forward(self, x, y):
        return x + y[1:]


# y's dim is independent of x's, but the model needs y = x + 1.
case("test_derived_dim_basic[independent]", lambda: (torch.randn(5), torch.randn(6)),
     dynamic_shapes=lambda: ({0: Dim("dimx", min=3, max=6)}, {0: Dim("dimy", min=4, max=7)}),
     more_inputs=lambda: [(torch.randn(4), torch.randn(5)), (torch.randn(6), torch.randn(7))])(_AddShifted)
# y declared as 2*x, which the example (5, 6) does not satisfy.
case("test_derived_dim_basic[doubled]", lambda: (torch.randn(5), torch.randn(6)),
     dynamic_shapes=lambda: _pair_spec(lambda d: d, lambda d: d * 2),
     more_inputs=lambda: [(torch.randn(5), torch.randn(6))])(_AddShifted)
case("test_derived_dim_basic[plus_one]", lambda: (torch.randn(5), torch.randn(6)),
     dynamic_shapes=lambda: _pair_spec(lambda d: d, lambda d: d + 1),
     more_inputs=lambda: [(torch.randn(4), torch.randn(5)), (torch.randn(6), torch.randn(7))])(_AddShifted)


@case("test_derived_dim_nested[2x_plus_1]", lambda: (torch.randn(5), torch.randn(11)),
      dynamic_shapes=lambda: _pair_spec(lambda d: d, lambda d: d * 2 + 1),
      more_inputs=lambda: [(torch.randn(4), torch.randn(9)), (torch.randn(6), torch.randn(13))])
class AddEveryOther(torch.nn.Module):
    def forward(self, x, y):
        return x + y[1::2]


class _ShiftedPlusEveryOther(torch.nn.Module):
    def forward(self, z, y):
        return z[1:] + y[1::2]


case("test_derived_dim_nested[z_root]", lambda: (torch.randn(6), torch.randn(11)),
     dynamic_shapes=lambda: _pair_spec(lambda d: d, lambda d: d * 2 - 1),
     more_inputs=lambda: [(torch.randn(5), torch.randn(9)), (torch.randn(4), torch.randn(7))])(_ShiftedPlusEveryOther)
# z = x + 1 and y = 2x - 1 cannot both hold for the example (6, 11).
case("test_derived_dim_nested[inconsistent]", lambda: (torch.randn(6), torch.randn(11)),
     dynamic_shapes=lambda: _pair_spec(lambda d: d + 1, lambda d: d * 2 - 1),
     more_inputs=lambda: [(torch.randn(6), torch.randn(11))])(_ShiftedPlusEveryOther)
case("test_derived_dim_nested[z_derived]", lambda: (torch.randn(6), torch.randn(11)),
     dynamic_shapes=lambda: _pair_spec(lambda d: d + 1, lambda d: d * 2 + 1),
     more_inputs=lambda: [(torch.randn(5), torch.randn(9)), (torch.randn(7), torch.randn(13))])(_ShiftedPlusEveryOther)


class _EvenOddSlice(torch.nn.Module):
    def forward(self, w):
        if w.shape[0] % 2 == 0:
            return w[::2]
        return w[1:-1:2]


# 10 is not of the form 2*dimx + 1.
case("test_derived_dim_integer[odd]", lambda: (torch.randn(10),),
     dynamic_shapes=lambda: ({0: Dim("dimx", min=3, max=6) * 2 + 1},),
     more_inputs=lambda: [(torch.randn(9),), (torch.randn(11),)])(_EvenOddSlice)
case("test_derived_dim_integer[even]", lambda: (torch.randn(10),),
     dynamic_shapes=lambda: ({0: Dim("dimx", min=3, max=6) * 2},),
     more_inputs=lambda: [(torch.randn(8),), (torch.randn(12),), (torch.randn(6),)])(_EvenOddSlice)


# The same derived dim on two inputs.
@case("test_derived_dim_repeat_derived", lambda: (torch.randn(10), torch.randn(10)),
      dynamic_shapes=lambda: _pair_spec(lambda d: d * 2, lambda d: d * 2),
      more_inputs=lambda: [(torch.randn(8), torch.randn(8)), (torch.randn(12), torch.randn(12))])
class AddEvenElements(torch.nn.Module):
    def forward(self, u, v):
        return u[::2] + v[::2]


def _out_of_order_dims():
    dy = Dim("dimy", min=5, max=7)
    return dy - 1, dy, dy + 1


# Derived dims defined from a root that is not the first input's dim.
@case("test_derived_dim_out_of_order", lambda: (torch.randn(5), torch.randn(6), torch.randn(7)),
      dynamic_shapes=lambda: tuple({0: d} for d in _out_of_order_dims()),
      more_inputs=lambda: [(torch.randn(6), torch.randn(7), torch.randn(8)), (torch.randn(4), torch.randn(5), torch.randn(6))])
class AddThreeShifted(torch.nn.Module):
    def forward(self, x, y, z):
        return x + y[1:] + z[2:]


def _out_of_order_repeat_spec():
    dx, dy, dz = _out_of_order_dims()
    return ({0: dx}, {0: dy}, {0: dz}, {0: dx}, {0: dz - 2})


def _five_vectors(n):
    return (torch.randn(n), torch.randn(n + 1), torch.randn(n + 2), torch.randn(n), torch.randn(n))


@case("test_derived_dim_out_of_order_repeat_derived", lambda: _five_vectors(5),
      dynamic_shapes=_out_of_order_repeat_spec,
      more_inputs=lambda: [_five_vectors(6), _five_vectors(4)])
class AddFiveShifted(torch.nn.Module):
    def forward(self, x, y, z, x1, x2):
        return x + y[1:] + z[2:] + x1 + x2


def _root_minus_six_spec():
    dy = Dim("dy", min=6)
    return {"x": (dy - 6, 2), "y": (dy,)}


# Both the root dy and dy - 6 get specialized by the reshape: export fails.
@case("test_specialize_derived_dim_roots", lambda: (torch.randn(6, 2), torch.randn(12)),
      dynamic_shapes=_root_minus_six_spec,
      more_inputs=lambda: [(torch.randn(6, 2), torch.randn(12))])
class FlattenPlus(torch.nn.Module):
    def forward(self, x, y):
        return x.reshape([-1]) + y


# --- conv/linear with plain-tensor or buffer weights -----------------------------------------


class _LinearFromTensorAttrs(torch.nn.Module):
    def __init__(self, as_buffers):
        super().__init__()
        if as_buffers:
            self.weight = torch.nn.Buffer(torch.randn(20, 98))
            self.bias = torch.nn.Buffer(torch.randn(20))
        else:
            self.weight = torch.randn(20, 98)
            self.bias = torch.randn(20)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class _ConvConvLinear(torch.nn.Module):
    def __init__(self, as_buffers):
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 33, 3)
        self.conv1d = torch.nn.Conv1d(16, 33, 3)
        self.linear = _LinearFromTensorAttrs(as_buffers)

    def forward(self, x, y):
        a = self.conv(x)
        b = self.conv1d(y)
        return self.linear(a).cos() + b.sum()


def _conv_inputs():
    return (torch.randn(2, 16, 5, 100), torch.randn(2, 16, 12))


# Linear weights as plain tensor attributes (lifted constants).
case("test_keep_composite_ops_linear_convd", _conv_inputs, more_inputs=lambda: [_conv_inputs()],
     atol=1e-4)(lambda: _ConvConvLinear(as_buffers=False))
# Linear weights as buffers.
case("test_keep_composite_ops_linear_convd_for_training_ir", _conv_inputs, more_inputs=lambda: [_conv_inputs()],
     atol=1e-4)(lambda: _ConvConvLinear(as_buffers=True))
