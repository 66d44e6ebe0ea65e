"""The composites served by their rule from a kind's first call (``meta_kernels.TRUSTED``)
give what fake tensors' expansion gives, kind by kind: the check each other kind of call
gets at run time, made here for these once per torch release.

The kinds swept are those a kind tells apart (dtype, which sizes are 1, stride order,
density) crossed with what the ops take: ranks and optional arguments, and
the layouts models hand them (transposed heads, slices, broadcast views, offsets)."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

import exporter
from exporter._torch_internals import FakeTensorMode
from exporter._torch_internals.fast import composite_on_meta
from exporter.trace.fast import meta_kernels
from exporter.trace.fast.meta_kernels import TRUSTED, _results
from tests.support import graph_fingerprint

aten = torch.ops.aten
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _laid_out(shape: tuple[int, ...], how: str, dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``shape`` in one of the layouts models hand these ops."""
    if how == "contiguous" or len(shape) == 0:
        return torch.randn(shape, dtype=dtype)
    if how == "transposed" and len(shape) >= 2:  # the last two dims swapped in memory
        return torch.randn(*shape[:-2], shape[-1], shape[-2], dtype=dtype).transpose(-1, -2)
    if how == "heads" and len(shape) == 4:  # (B, L, H, E) viewed as (B, H, L, E)
        b, h, n, e = shape
        return torch.randn(b, n, h, e, dtype=dtype).transpose(1, 2)
    if how == "reversed":
        return torch.randn(tuple(reversed(shape)), dtype=dtype).permute(*reversed(range(len(shape))))
    if how == "sliced":  # the last dim a window of a wider one, at an offset
        return torch.randn(*shape[:-1], shape[-1] + 3, dtype=dtype)[..., 2 : 2 + shape[-1]]
    if how == "broadcast":  # the first dim a stride-0 expansion
        return torch.randn(1, *shape[1:], dtype=dtype).expand(shape)
    return torch.randn(shape, dtype=dtype)


LAYOUTS = ("contiguous", "transposed", "heads", "reversed", "sliced", "broadcast")


def _sizes(rank: int, rng: random.Random) -> tuple[int, ...]:
    return tuple(rng.choice((1, 2, 3, 5)) for _ in range(rank))


def _linear_calls(rng):
    for rank, bias, dtype, how in itertools.product((1, 2, 3, 4), (False, True), DTYPES, LAYOUTS):
        lead = _sizes(rank - 1, rng)
        k, n = rng.choice((1, 4, 6)), rng.choice((1, 3, 8))
        weight_how = rng.choice(("contiguous", "transposed", "sliced"))
        args = [_laid_out((*lead, k), how, dtype), _laid_out((n, k), weight_how, dtype)]
        if bias:
            args.append(_laid_out((n,), rng.choice(("contiguous", "sliced")), dtype))
        yield aten.linear.default, tuple(args), {}


def _matmul_calls(rng):
    ranks = [(a, b) for a in range(1, 5) for b in range(1, 5)]
    for (ra, rb), dtype, how in itertools.product(ranks, DTYPES[:2], LAYOUTS):
        k = rng.choice((1, 4, 6))
        batch = _sizes(max(ra, rb) - 2, rng) if max(ra, rb) > 2 else ()
        a_shape = (*(batch[len(batch) - (ra - 2) :] if ra > 2 else ()), *((rng.choice((1, 3, 5)),) if ra >= 2 else ()), k)
        b_shape = (*(batch[len(batch) - (rb - 2) :] if rb > 2 else ()), k, *((rng.choice((1, 2, 7)),) if rb >= 2 else ()))
        other = rng.choice(LAYOUTS)
        yield aten.matmul.default, (_laid_out(a_shape, how, dtype), _laid_out(b_shape, other, dtype)), {}


def _layer_norm_calls(rng):
    for rank, normalized, affine, dtype, how in itertools.product((2, 3, 4), (1, 2), (0, 1, 2), DTYPES, LAYOUTS):
        shape = _sizes(rank, rng)
        normalized_shape = list(shape[rank - normalized :])
        weight_dtype = rng.choice((dtype, torch.float32))
        args = [_laid_out(shape, how, dtype), normalized_shape]
        if affine:
            args.append(torch.randn(normalized_shape, dtype=weight_dtype))
            args.append(torch.randn(normalized_shape, dtype=weight_dtype) if affine == 2 else None)
        yield aten.layer_norm.default, tuple(args), {"eps": rng.choice((1e-5, 1e-6))} if affine else {}


SWEEPS = {
    aten.linear.default: _linear_calls,
    aten.matmul.default: _matmul_calls,
    aten.layer_norm.default: _layer_norm_calls,
}


def test_every_trusted_composite_is_swept():
    assert set(SWEEPS) == set(TRUSTED)


@pytest.mark.parametrize("op", list(SWEEPS), ids=lambda op: op.overloadpacket.__name__)
def test_a_trusted_composite_on_meta_tensors_equals_its_expansion_on_every_kind(op):
    mode = FakeTensorMode()
    mode.cache_enabled = False
    checked = 0
    for func, args, kwargs in SWEEPS[op](random.Random(0)):
        fake_args, fake_kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, mode.from_tensor, (args, kwargs))
        try:
            with mode:
                expected = func(*fake_args, **fake_kwargs)
        except RuntimeError:
            continue  # a call the op refuses (fp16 on CPU, say): the rule's refusal takes the expansion
        served = composite_on_meta(mode, func, fake_args, fake_kwargs)
        assert _results(served, fake_args, fake_kwargs) == _results(expected, fake_args, fake_kwargs), (
            func, [getattr(a, "shape", a) for a in args], {k: getattr(v, "shape", v) for k, v in kwargs.items()},
        )
        checked += 1
    assert checked >= 100


class Attention(torch.nn.Module):
    """A self-attention block in the shapes models give it: each trusted composite once."""

    def __init__(self, width=24, heads=3):
        super().__init__()
        self.heads = heads
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x, mask):
        b, n, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        h = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        h = self.out(h.transpose(1, 2).reshape(b, n, -1))
        return h @ x.transpose(1, 2)


def test_a_trusted_kind_is_served_by_its_rule_from_its_first_call(monkeypatch):
    expanded = []
    call = meta_kernels.MetaKernels.__call__

    def counted(self, dispatch, func, types, args=(), kwargs=None):
        def counting(func, types, args, kwargs):
            expanded.append(func)
            return dispatch(func, types, args, kwargs)

        return call(self, counting, func, types, args, kwargs)

    model = Attention().eval()
    inputs = (torch.randn(2, 7, 24), torch.rand(2, 1, 7, 7) > 0.2)
    plain = exporter.export(model, inputs, fast_paths=False)
    monkeypatch.setattr(meta_kernels.MetaKernels, "__call__", counted)
    meta_kernels.forget_meta_verdicts()
    fast = exporter.export(model, inputs, fast_paths=True)
    assert graph_fingerprint(fast.graph_module) == graph_fingerprint(plain.graph_module)
    trusted = [kind for kind, verdict in meta_kernels._VERDICTS.items() if verdict and kind[0] in TRUSTED]
    assert {kind[0] for kind in trusted} == set(TRUSTED)
    assert expanded and not TRUSTED & set(expanded)  # fake tensors expanded none of them
    fresh = (torch.randn(2, 7, 24), torch.rand(2, 1, 7, 7) > 0.5)
    torch.testing.assert_close(fast.module()(*fresh), model(*fresh))


def test_a_call_the_rule_cannot_compute_takes_the_expansion(monkeypatch):
    def refuses(mode, func, dispatch, types, args, kwargs):
        raise NotImplementedError("no meta kernel here")

    monkeypatch.setattr(meta_kernels, "_by_composite_on_meta", refuses)
    meta_kernels.forget_meta_verdicts()
    model = Attention(width=12, heads=2).eval()
    inputs = (torch.randn(2, 5, 12), torch.rand(2, 1, 5, 5) > 0.2)
    plain = exporter.export(model, inputs, fast_paths=False)
    fast = exporter.export(model, inputs, fast_paths=True)
    assert graph_fingerprint(fast.graph_module) == graph_fingerprint(plain.graph_module)
    assert not any(v for k, v in meta_kernels._VERDICTS.items() if k[0] in TRUSTED)
    meta_kernels.forget_meta_verdicts()
