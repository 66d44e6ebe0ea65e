"""Registry of small models exported with ``dynamic_shapes``, for the dynamic differential tests.

Each case names its dynamic sizes (``{"batch": 3, "seq": 5}``) and draws inputs for any
assignment of them, so one program, exported on the example sizes, can be run at several
others.  Besides the example it lists in-range assignments the program must accept and one
out-of-range assignment it must reject, with a pattern the rejection message must match.
Assignments other than the example are partial: they override the example's sizes.

``dynamic_shapes`` is built fresh for every export (``Dim`` objects are not reused across
exports), so the spec is a function.  The size names are the case's own; most are also the
names of the case's ``Dim`` objects, but hint-based specs (``Dim.AUTO``) have no names, and
a size may be a value rather than a dimension (the ``.item()`` case).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

__all__ = ["DynamicCase", "DYNAMIC_CASES", "DYNAMIC_CASES_BY_NAME", "VAR_KWARGS_CASE"]

Sizes = dict[str, int]


@attrs.frozen
class DynamicCase:
    """One model, its ``dynamic_shapes`` spec, and the sizes to run it at."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[Sizes, torch.Generator], tuple[tuple[Any, ...], dict[str, Any]]]
    spec: Callable[[], Any]
    """Builds the ``dynamic_shapes`` argument (fresh ``Dim`` objects on every call)."""
    example: Sizes
    in_range: tuple[Sizes, ...]
    """At least three assignments (overriding ``example``) the program must accept."""
    out_of_range: Sizes
    """An assignment (overriding ``example``) the program must reject."""
    rejection: str
    """Regex the rejection's message must match: it should name the input or the size."""
    train: bool = False
    rtol: float = 1e-5
    atol: float = 1e-5
    skip: dict[str, str] = attrs.field(factory=dict)
    """Check name -> reason it is skipped for this case."""

    def make_model(self) -> nn.Module:
        """A fresh, seeded model in the mode the case needs."""
        torch.manual_seed(0)
        return self.build().train(self.train)

    def make_dynamic_shapes(self) -> Any:
        """A fresh ``dynamic_shapes`` spec."""
        return self.spec()

    def sizes(self, override: Sizes | None = None) -> Sizes:
        """The example sizes with ``override`` applied."""
        return {**self.example, **(override or {})}

    def make_inputs(self, sizes: Sizes, seed: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` at ``sizes`` drawn from ``seed``; example sizes and seed 0 are the export example."""
        return self.inputs(sizes, torch.Generator().manual_seed(seed))

    def __repr__(self) -> str:
        return f"DynamicCase({self.name})"


DYNAMIC_CASES: list[DynamicCase] = []


def register(name: str, *, inputs, spec, example, in_range, out_of_range, rejection, build=None, **kw):
    """Register a case; usable as a decorator on the model class (or a builder function)."""

    def deco(builder):
        DYNAMIC_CASES.append(
            DynamicCase(
                name=name,
                build=builder,
                inputs=inputs,
                spec=spec,
                example=example,
                in_range=tuple(in_range),
                out_of_range=out_of_range,
                rejection=rejection,
                **kw,
            )
        )
        return builder

    return deco(build) if build is not None else deco


def _randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


def _ids(g: torch.Generator, vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=g)


def _mentions(*words: str) -> str:
    """A regex matching any of ``words`` as a whole word (input names, paths, sizes)."""
    return "|".join(rf"(?<![\w.]){re.escape(w)}(?!\w)" for w in words)


def _padding_mask(g: torch.Generator, batch: int, seq: int) -> torch.Tensor:
    """Right padding: row 0 is full, the others keep a random length in [1, seq]."""
    lengths = torch.randint(1, seq + 1, (batch,), generator=g)
    lengths[0] = seq
    return (torch.arange(seq) < lengths[:, None]).long()


# -- shared, derived and sliced dimensions ---------------------------------------------------


def _shared_batch_spec():
    batch = Dim("batch", min=2, max=32)
    return {"x": {0: batch}, "y": {0: batch}}


@register(
    "shared_batch_two_inputs",
    inputs=lambda s, g: ((_randn(g, s["batch"], 8), _randn(g, s["batch"], 4)), {}),
    spec=_shared_batch_spec,
    example={"batch": 3},
    in_range=[{"batch": 2}, {"batch": 7}, {"batch": 32}],
    out_of_range={"batch": 33},
    rejection=_mentions("x", "y", "args[0]", "args[1]", "33"),
)
class SharedBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 6), nn.Linear(4, 6)

    def forward(self, x, y):
        return torch.tanh(self.a(x)) * self.b(y), x.sum(1) - y.sum(1)


@register(
    "positional_embedding_slice",
    inputs=lambda s, g: ((_ids(g, 50, s["batch"], s["seq"]),), {}),
    spec=lambda: {"ids": {0: Dim("batch", max=16), 1: Dim("seq", max=64)}},
    example={"batch": 2, "seq": 5},
    in_range=[{"seq": 64}, {"batch": 3, "seq": 2}, {"batch": 9, "seq": 33}],
    out_of_range={"seq": 65},
    # Not "65": eager fails on 65 positions too, naming the size; the guard must name the input.
    rejection=_mentions("ids", "args[0]"),
)
class PositionalSlice(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(50, 16)
        self.pos = nn.Parameter(torch.randn(64, 16))
        self.norm = nn.LayerNorm(16)

    def forward(self, ids):
        return self.norm(self.tok(ids) + self.pos[: ids.shape[1]])


@register(
    "flatten_unflatten_symbolic",
    inputs=lambda s, g: ((_randn(g, s["batch"], s["seq"], 8),), {}),
    spec=lambda: {"x": {0: Dim("batch", max=12), 1: Dim("seq", min=3, max=40)}},
    example={"batch": 2, "seq": 5},
    in_range=[{"batch": 12, "seq": 3}, {"batch": 3, "seq": 40}, {"batch": 7, "seq": 11}],
    out_of_range={"seq": 2},
    rejection=_mentions("x", "args[0]", "2"),
)
class FlattenUnflatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 12)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.proj(x.reshape(b * t, 8))
        heads = h.view(b, t, 3, 4).transpose(1, 2)  # (b, 3, t, 4): no longer contiguous
        return heads.flatten(0, 1).unflatten(0, (b, 3)), heads.reshape(b, -1), h.view(-1).view(b, t, 12)


def _derived_inputs(s, g):
    d = s["d"]
    return (_randn(g, d, 4), _randn(g, 2 * d, 4), _randn(g, d + 1, 4)), {}


def _derived_spec():
    d = Dim("d", min=2, max=20)
    return {"x": {0: d}, "y": {0: 2 * d}, "z": {0: d + 1}}


@register(
    "derived_dims",
    inputs=_derived_inputs,
    spec=_derived_spec,
    example={"d": 3},
    in_range=[{"d": 2}, {"d": 11}, {"d": 20}],
    out_of_range={"d": 21},
    rejection=_mentions("x", "y", "z", "args[0]", "args[1]", "args[2]", "21", "42", "22"),
)
class DerivedDims(nn.Module):
    def forward(self, x, y, z):
        pairs = y.view(x.shape[0], 2, 4).sum(1)
        return x * pairs + z[1:] - z[:-1], torch.cat([x, y, z]).mean(0), y[::2] - y[1::2]


def _cat_inputs(s, g):
    return (_randn(g, s["a"], 4), _randn(g, s["c"], 4)), {}


@register(
    "independent_dims_concat",
    inputs=_cat_inputs,
    spec=lambda: ({0: Dim("a", max=10)}, {0: Dim("c", min=3, max=10)}),
    example={"a": 2, "c": 4},
    in_range=[{"a": 10, "c": 3}, {"a": 5, "c": 10}, {"a": 3, "c": 3}],
    out_of_range={"c": 11},
    rejection=_mentions("y", "args[1]", "11"),
)
class IndependentConcat(nn.Module):
    def forward(self, x, y):
        both = torch.cat([x, y])
        steps = torch.arange(both.shape[0], dtype=torch.float32)
        return both * steps[:, None], both.view(-1, 2, 2).sum(1), torch.zeros(x.shape[0], y.shape[0]) + x @ y.T


# -- hints and static entries ------------------------------------------------------------------


@register(
    "auto_hints",
    inputs=lambda s, g: ((_randn(g, s["b"], 6), _randn(g, s["b"], s["n"])), {}),
    spec=lambda: {"x": (Dim.AUTO, Dim.AUTO), "y": {0: Dim.AUTO, 1: Dim.AUTO(min=2, max=10)}},
    example={"b": 3, "n": 5},
    in_range=[{"b": 2, "n": 2}, {"b": 50, "n": 10}, {"b": 7, "n": 3}],
    out_of_range={"n": 11},
    rejection=_mentions("y", "args[1]", "11"),
)
class AutoHints(nn.Module):
    """x.shape[1] specializes (it meets a Linear); y.shape[0] is unified with x.shape[0]."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 4)

    def forward(self, x, y):
        return self.lin(x).sum(1, keepdim=True) + y.mean(1, keepdim=True), y.cumsum(1)


@register(
    "dynamic_hints",
    inputs=lambda s, g: ((_randn(g, s["rows"], s["cols"]), _randn(g, s["m"], s["k"])), {}),
    spec=lambda: {
        "x": {0: Dim.DYNAMIC, 1: Dim.DYNAMIC(min=3, max=12)},
        "y": {0: Dim.DYNAMIC(max=8), 1: Dim.DYNAMIC},
    },
    example={"rows": 4, "cols": 5, "m": 3, "k": 6},
    in_range=[{"rows": 2, "cols": 3, "m": 2, "k": 2}, {"rows": 100, "cols": 12, "m": 8}, {"cols": 7, "k": 31}],
    out_of_range={"cols": 13},
    rejection=_mentions("x", "args[0]", "13"),
)
class DynamicHints(nn.Module):
    def forward(self, x, y):
        return x.softmax(-1) * x.shape[1], (y * 2).sum(0), F.pad(y, (1, 2))


def _static_inputs(s, g):
    return (_randn(g, s["b"], 5), _randn(g, 3, 5), _randn(g, s["b"], 5)), {}


def _static_spec():
    batch = Dim("b", max=16)
    return ({0: batch, 1: Dim.STATIC}, None, [batch, 5])


@register(
    "static_none_and_int_entries",
    inputs=_static_inputs,
    spec=_static_spec,
    example={"b": 4},
    in_range=[{"b": 2}, {"b": 16}, {"b": 9}],
    out_of_range={"b": 17},
    rejection=_mentions("x", "z", "args[0]", "args[2]", "17"),
)
class StaticEntries(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x, y, z):
        return self.lin(x) + z, y @ self.lin.weight, x.new_full((x.shape[0],), y.shape[0])


# -- nested and keyword inputs -----------------------------------------------------------------


def _nested_inputs(s, g):
    b, t = s["batch"], s["seq"]
    mask = (torch.rand(b, t, generator=g) > 0.3).float()
    return ({"feats": _randn(g, b, 4), "seqs": [_randn(g, b, t, 3), mask]},), {}


def _nested_spec():
    b, t = Dim("batch", max=16), Dim("seq", max=16)
    return {"batch": {"feats": {0: b}, "seqs": [{0: b, 1: t}, {0: b, 1: t}]}}


@register(
    "nested_dict_list_inputs",
    inputs=_nested_inputs,
    spec=_nested_spec,
    example={"batch": 2, "seq": 3},
    in_range=[{"batch": 16, "seq": 2}, {"batch": 5, "seq": 16}, {"batch": 3, "seq": 7}],
    out_of_range={"batch": 17},
    rejection=_mentions("batch", "args[0]", "17"),
)
class NestedInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, batch):
        feats = self.lin(batch["feats"])
        values, mask = batch["seqs"]
        pooled = (values * mask.unsqueeze(-1)).sum(1)
        return {"pooled": pooled + feats, "lengths": mask.sum(1)}, [feats.mean(0)]


def _hf_style_inputs(s, g):
    b, t = s["batch"], s["seq"]
    return (), {"input_ids": _ids(g, 30, b, t), "attention_mask": _padding_mask(g, b, t)}


def _hf_style_spec():
    b, t = Dim("batch", max=8), Dim("seq", max=24)
    return {"input_ids": (b, t), "attention_mask": {0: b, 1: t}}


@register(
    "keyword_inputs",
    inputs=_hf_style_inputs,
    spec=_hf_style_spec,
    example={"batch": 2, "seq": 6},
    in_range=[{"batch": 8, "seq": 2}, {"batch": 3, "seq": 24}, {"batch": 5, "seq": 9}],
    out_of_range={"seq": 25},
    rejection=_mentions("input_ids", "attention_mask", "25"),
)
class HFStyle(nn.Module):
    """A Hugging Face style signature, all inputs given by keyword (nothing lands in **kwargs)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(30, 8)
        self.type_embed = nn.Embedding(2, 8)

    def forward(self, input_ids, attention_mask=None, **kwargs):
        h = self.embed(input_ids)
        token_type_ids = kwargs.get("token_type_ids")
        if token_type_ids is not None:
            h = h + self.type_embed(token_type_ids)
        if attention_mask is None:
            return h.mean(1)
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        return (h * m).sum(1) / m.sum(1).clamp(min=1)


def _var_kwargs_inputs(s, g):
    args, kwargs = _hf_style_inputs(s, g)
    return args, {**kwargs, "token_type_ids": _ids(g, 2, s["batch"], s["seq"])}


def _var_kwargs_spec():
    b, t = Dim("batch", max=8), Dim("seq", max=24)
    # The var-keyword's entry is keyed by its parameter name, as torch.export's spec check requires.
    return {"input_ids": (b, t), "attention_mask": {0: b, 1: t}, "kwargs": {"token_type_ids": {0: b, 1: t}}}


VAR_KWARGS_CASE = DynamicCase(
    name="keyword_inputs_var_kwargs",
    build=HFStyle,
    inputs=_var_kwargs_inputs,
    spec=_var_kwargs_spec,
    example={"batch": 2, "seq": 6},
    in_range=({"batch": 8, "seq": 2}, {"batch": 3, "seq": 24}, {"batch": 5, "seq": 9}),
    out_of_range={"seq": 25},
    rejection=_mentions("input_ids", "attention_mask", "token_type_ids", "25"),
)
"""Not in DYNAMIC_CASES: torch.export 2.13 cannot export it.  A dynamic input that lands in
**kwargs breaks its range-constraint step (``_get_range_constraints`` lists the **kwargs
entries both under ``kwargs`` and at top level, then fails with "AssertionError: Must
provide a tree_name when there might be a mismatch"), so only the oracle-free checks run."""


# -- control flow and data-dependent sizes -----------------------------------------------------


def _cond_inputs(s, g):
    return (_randn(g, s["batch"], 4),), {}


@register(
    "cond_on_dynamic_size",
    inputs=_cond_inputs,
    spec=lambda: {"x": {0: Dim("batch", max=16)}},
    example={"batch": 3},
    in_range=[{"batch": 2}, {"batch": 5}, {"batch": 16}, {"batch": 4}],
    out_of_range={"batch": 17},
    rejection=_mentions("x", "args[0]", "17"),
)
class CondOnSize(nn.Module):
    """One cond on a SymBool, one on a tensor made from the size; branches use the size."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        n = x.shape[0]

        def big(x):
            return self.lin(x) * x.shape[0]

        def small(x):
            return x.new_ones(x.shape[0], 4) + x.cumsum(0)

        by_symbool = torch.cond(n > 4, big, small, (x,))
        as_tensor = torch.full((), n) > 4
        by_tensor = torch.cond(as_tensor, lambda x: x.sum(0) / n, lambda x: x.amax(0), (x,))
        return by_symbool, by_tensor


@register(
    "nonzero_unbacked",
    inputs=lambda s, g: ((_randn(g, s["n"], 3),), {}),
    spec=lambda: {"x": {0: Dim("n", max=32)}},
    example={"n": 6},
    in_range=[{"n": 2}, {"n": 32}, {"n": 13}],
    out_of_range={"n": 33},
    rejection=_mentions("x", "args[0]", "33"),
)
class NonzeroUnbacked(nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x[:, 0] > 0)
        picked = x[idx.squeeze(1)]
        return picked * 2, idx, picked.sum(0)


def _item_inputs(s, g):
    return (_randn(g, s["n"], 4), torch.tensor(s["k"])), {}


@register(
    "item_as_size",
    inputs=_item_inputs,
    spec=lambda: {"x": {0: Dim("n", max=32)}, "k": None},
    example={"n": 6, "k": 4},
    in_range=[{"n": 2, "k": 0}, {"n": 32, "k": 32}, {"n": 9, "k": 1}],
    out_of_range={"k": 7},  # violates torch._check(k <= n): a runtime assertion, not an input guard
    # Not "7": eager fails on k=7 too, naming the size; the check must name k or its symbol.
    rejection=_mentions("k", "args[1]") + r"|u\d+ <= s\d+",
)
class ItemAsSize(nn.Module):
    def forward(self, x, k):
        m = k.item()
        torch._check_is_size(m)
        torch._check(m <= x.shape[0])
        head = x[:m]
        return torch.cat([head, x.new_zeros(m, 2)], 1), head.sum(0)


# -- common layers -------------------------------------------------------------------------------


def _image_inputs(s, g):
    return (_randn(g, s["batch"], 3, s["h"], s["w"]),), {}


@register(
    "conv_pool_dynamic_spatial",
    inputs=_image_inputs,
    # Spatial minimum 16: smaller images shrink some output to one pixel, a guard torch.export
    # refuses for a dynamic dim.
    spec=lambda: {"x": {0: Dim("batch", max=8), 2: Dim("h", min=16, max=64), 3: Dim("w", min=16, max=64)}},
    example={"batch": 2, "h": 16, "w": 20},
    in_range=[{"batch": 3, "h": 17, "w": 31}, {"h": 16, "w": 64}, {"batch": 5, "h": 33, "w": 33}],
    out_of_range={"w": 65},
    rejection=_mentions("x", "args[0]", "65"),
    train=True,  # batch statistics over a dynamic batch and image size; running stats updated
)
class ConvPoolDynamic(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 4, 3, stride=2, padding=1)
        self.norm = nn.BatchNorm2d(8)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.norm(self.conv(x))), 2)
        h = self.conv2(h)
        return F.adaptive_avg_pool2d(h, 1).flatten(1), F.avg_pool2d(h, 2), h


def _gru_inputs(s, g):
    return (_randn(g, s["batch"], s["seq"], 4), _randn(g, 1, s["batch"], 6)), {}


def _gru_spec():
    # The GRU kernel loops over time steps, so a named seq Dim fails in torch.export
    # ("specialized it to be a constant"); Dim.AUTO lets the sequence length specialize.
    batch = Dim("batch", max=16)
    return {"x": {0: batch, 1: Dim.AUTO}, "h0": {1: batch}}


@register(
    "gru_dynamic_batch_auto_seq",
    inputs=_gru_inputs,
    spec=_gru_spec,
    example={"batch": 2, "seq": 5},
    in_range=[{"batch": 3}, {"batch": 16}, {"batch": 7}],
    out_of_range={"seq": 6},  # the specialized sequence length
    rejection=_mentions("x", "args[0]", "6"),
)
class GRUDynamic(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 6, batch_first=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x, h0):
        out, h = self.gru(x, h0)
        return self.head(out), h


@register(
    "causal_sdpa_dynamic_seq",
    inputs=lambda s, g: ((_randn(g, s["batch"], s["seq"], 16),), {}),
    spec=lambda: {"x": {0: Dim("batch", max=8), 1: Dim("seq", max=48)}},
    example={"batch": 2, "seq": 6},
    in_range=[{"batch": 8, "seq": 2}, {"batch": 3, "seq": 48}, {"batch": 4, "seq": 17}],
    out_of_range={"seq": 49},
    rejection=_mentions("x", "args[0]", "49"),
)
class CausalAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 16)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 4, 4).permute(2, 0, 3, 1, 4)
        pos = torch.arange(t, device=x.device)
        mask = pos[:, None] >= pos[None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, t, 16))


@register(
    "buffer_update_dynamic_batch",
    inputs=lambda s, g: ((_randn(g, s["batch"], 4),), {}),
    spec=lambda: {"x": {0: Dim("batch", min=2, max=64)}},
    example={"batch": 5},
    in_range=[{"batch": 2}, {"batch": 64}, {"batch": 23}],
    out_of_range={"batch": 65},
    rejection=_mentions("x", "args[0]", "65"),
)
class RunningStats(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        self.count.add_(x.shape[0])
        return x - self.mean, self.count * 1


@register(
    "size_factories_and_symint_output",
    inputs=lambda s, g: ((_randn(g, s["batch"], s["seq"]),), {}),
    spec=lambda: {"x": {0: Dim("batch", max=10), 1: Dim("seq", max=20)}},
    example={"batch": 3, "seq": 4},
    in_range=[{"batch": 2, "seq": 2}, {"batch": 10, "seq": 20}, {"batch": 6, "seq": 13}],
    out_of_range={"batch": 11},
    rejection=_mentions("x", "args[0]", "11"),
)
class SizeFactories(nn.Module):
    def forward(self, x):
        b, t = x.shape
        pos = torch.arange(t).expand(b, t)
        tri = torch.ones(t, t).tril()
        ones = torch.ones(b, 1).expand(-1, t)
        return x * pos + ones, x @ tri, x.repeat(2, 1)[b:], b * t


@register(
    "frames_folded_into_batch_auto",
    inputs=lambda s, g: ((_randn(g, s["videos"] * 3, 4, 4, 4),), {}),
    # Dim.AUTO: the batch must be a multiple of the 3 frames, which a named Dim would refuse.
    spec=lambda: {"x": {0: Dim.AUTO}},
    example={"videos": 2},
    in_range=[{"videos": 3}, {"videos": 4}, {"videos": 9}],
    out_of_range={"videos": 1},  # one video: the trace took the batch for more than 3 frames
    rejection=_mentions("x"),
    skip={
        "values_match_oracle": "the output's batch: exporter's is s, the size the model asked its "
        "last view for; torch.export's fake view kernel writes the same value as nested floor "
        "divisions of s, one more per layer (tests/exporter/trace/test_view_sizes.py)",
    },
)
class FramesFoldedIntoBatch(nn.Module):
    """Video layers on frames folded into the batch, (videos * 3, c, h, w), that unfold them to
    convolve across time, (videos, c, 3, h, w), and fold them back: each layer views the batch
    as two sizes and back again."""

    def __init__(self):
        super().__init__()
        self.spatial = nn.ModuleList(nn.Conv2d(4, 4, 3, padding=1) for _ in range(2))
        self.temporal = nn.ModuleList(nn.Conv3d(4, 4, (3, 1, 1), padding=(1, 0, 0)) for _ in range(2))

    def forward(self, x):
        for spatial, temporal in zip(self.spatial, self.temporal):
            x = x + spatial(x)
            frames_batch, c, h, w = x.shape
            videos = x[None].reshape(frames_batch // 3, 3, c, h, w).permute(0, 2, 1, 3, 4)
            x = temporal(videos).permute(0, 2, 1, 3, 4).reshape(frames_batch, c, h, w)
        return x


# -- transformers (tiny configs, random weights, nothing downloaded) ---------------------------


def _lm_inputs(s, g):
    b, t = s["batch"], s["seq"]
    return (), {"input_ids": _ids(g, 128, b, t), "attention_mask": _padding_mask(g, b, t)}


def _lm_spec():
    b, t = Dim("batch", max=8), Dim("seq", max=24)
    return {"input_ids": {0: b, 1: t}, "attention_mask": {0: b, 1: t}}


def _bert():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=32, attn_implementation="sdpa",
    )
    return BertModel(config)


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=32, use_cache=False, attn_implementation="eager",
    )
    return LlamaForCausalLM(config)


_LM_SIZES = dict(
    inputs=_lm_inputs,
    spec=_lm_spec,
    example={"batch": 2, "seq": 8},
    in_range=[{"batch": 3, "seq": 2}, {"batch": 2, "seq": 24}, {"batch": 8, "seq": 13}],
    out_of_range={"seq": 25},
    rejection=_mentions("input_ids", "attention_mask", "25"),
    rtol=1e-4,
)
register("bert_model_sdpa_dynamic", build=_bert, **_LM_SIZES)
register("llama_causal_lm_eager_dynamic", build=_llama, **_LM_SIZES)


DYNAMIC_CASES_BY_NAME: dict[str, DynamicCase] = {case.name: case for case in DYNAMIC_CASES}
assert len(DYNAMIC_CASES_BY_NAME) == len(DYNAMIC_CASES), "duplicate case names"
