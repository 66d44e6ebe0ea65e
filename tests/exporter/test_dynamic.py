"""dynamic_shapes: wrong specs named at their path, model constraints explained with the fix to paste."""

import re

import pytest
import torch
from torch.export import Dim

import exporter
import exporter._constraints
from exporter import ConstraintError, InputSpecError

HERE = __file__


def _line(marker: str) -> str:
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if f"# marker: {marker}" in line:
                return f"{HERE}:{i}"
    raise AssertionError(marker)


class PosEmbed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(128, 8))

    def forward(self, x, y):
        t = x.shape[1]
        return x + self.pos[:t], y * 2  # marker: slice


class View16(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 16) * 2  # marker: view16


class Pairs(torch.nn.Module):
    def forward(self, x):
        b, t = x.shape
        return x.view(b, t // 2, 2).sum(-1)  # marker: pairs


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y  # marker: add


class CatAdd(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, x], 0) + y  # marker: cat


class MidColumn(torch.nn.Module):
    def forward(self, x):
        t = x.shape[1]
        return x[:, t // 2]  # marker: index


class CausalTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("causal", torch.ones(16, 16, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x, mask):
        t = x.shape[1]
        return x.masked_fill(self.causal[:t, :t] & mask[:, None, :].bool(), 0.0)  # marker: causal


class MinSize(torch.nn.Module):
    def forward(self, x):
        torch._check(x.shape[0] >= 8)  # marker: check
        return x * 2


# (model, example args, dynamic_shapes, marker of the line that forces it, message, exact fix)
CONSTRAINT_CASES = [
    (
        PosEmbed(), (torch.randn(2, 16, 8), torch.randn(2)), {"x": {1: Dim("seq", max=200)}, "y": None}, "slice",
        r"the model needs x.shape\[1\] <= 128, but the spec allows \[2, 200\]",
        'seq = Dim("seq", max=128)',
    ),
    (
        View16(), (torch.randn(4, 16),), {"x": {1: Dim("features")}}, "view16",
        r"x.shape\[1\] is declared dynamic \(dynamic_shapes\['x'\]\[1\] = features\) but the model only works when it is 16",
        '"x": {1: None}  (static), or change the model so it does not fix this size',
    ),
    (
        View16(), (torch.randn(4, 16),), {"x": {1: Dim.DYNAMIC}}, "view16",
        r"x.shape\[1\] is declared dynamic \(dynamic_shapes\['x'\]\[1\] = Dim.DYNAMIC\) but the model only works when it is 16",
        '"x": {1: None}  (static), or change the model so it does not fix this size',
    ),
    (
        Pairs(), (torch.randn(4, 16),), {"x": {0: Dim("b"), 1: Dim("t")}}, "pairs",
        r"the model needs x.shape\[1\] to be a multiple of 2",
        't_2 = Dim("t_2"); "x": {1: 2 * t_2}  (a multiple of 2)',
    ),
    (
        Add(), (torch.randn(6), torch.randn(6)), {"x": {0: Dim("a")}, "y": {0: Dim("b")}}, "add",
        r"the model needs x.shape\[0\] == y.shape\[0\] \(b\), which the spec does not declare",
        '"x": {0: b}  (the same Dim as y.shape[0])',
    ),
    (
        CatAdd(), (torch.randn(3, 4), torch.randn(6, 4)), {"x": {0: Dim("a")}, "y": {0: Dim("c")}}, "cat",
        r"the model needs y.shape\[0\] == 2 \* a, which the spec does not declare",
        '"y": {0: 2 * a}  (derived from x.shape[0])',
    ),
    (
        MidColumn(), (torch.randn(3, 8),), {"x": {1: Dim("t")}}, "index",
        r"the model needs t // 2 < t, which export can prove for every size only if x.shape\[1\] is a multiple of 2",
        't_2 = Dim("t_2"); "x": {1: 2 * t_2}  (a multiple of 2)',
    ),
    (
        CausalTable(), (torch.randn(2, 6, 6), torch.ones(2, 6)), {"x": {1: (s := Dim("s", max=16)), 2: s}, "mask": {1: s}},
        "causal", r"the model needs s != 16, which fails for s = 16 inside the declared range \[2, 16\]", 's = Dim("s", max=15)',
    ),
    (
        MinSize(), (torch.randn(10),), {"x": {0: Dim("n")}}, "check",
        r"the model needs x.shape\[0\] >= 8, but the spec allows \[2, inf\]",
        'n = Dim("n", min=8)',
    ),
]


@pytest.mark.parametrize("model, args, spec, marker, message, fix", CONSTRAINT_CASES, ids=lambda v: v if isinstance(v, str) and " " not in v else None)
def test_constraint_errors_say_what_where_and_the_fix(model, args, spec, marker, message, fix):
    with pytest.raises(ConstraintError) as info:
        exporter.export(model, args, dynamic_shapes=spec)
    error = info.value
    assert error.category == "dynamic shape constraint"
    assert re.search(message, str(error)), str(error)
    assert [v.fix for v in error.violations] == [fix]
    assert error.location == _line(marker)
    assert f"forced at {_line(marker)}" in str(error)


def test_the_suggested_fixes_export():
    a = Dim("a")
    t_2 = Dim("t_2")
    for model, args, spec in [
        (PosEmbed(), (torch.randn(2, 16, 8), torch.randn(2)), {"x": {1: Dim("seq", max=128)}, "y": None}),
        (View16(), (torch.randn(4, 16),), {"x": {1: None}}),
        (Pairs(), (torch.randn(4, 16),), {"x": {0: Dim("b"), 1: 2 * t_2}}),
        (Add(), (torch.randn(6), torch.randn(6)), {"x": {0: a}, "y": {0: a}}),
        (CatAdd(), (torch.randn(3, 4), torch.randn(6, 4)), {"x": {0: a}, "y": {0: 2 * a}}),
        (MidColumn(), (torch.randn(3, 8),), {"x": {1: 2 * t_2}}),
        (CausalTable(), (torch.randn(2, 6, 6), torch.ones(2, 6)), {"x": {1: (s := Dim("s", max=15)), 2: s}, "mask": {1: s}}),
        (MinSize(), (torch.randn(10),), {"x": {0: Dim("n", min=8)}}),
    ]:
        exporter.export(model, args, dynamic_shapes=spec)


def test_a_guard_torch_cannot_prove_is_reported_in_input_names(monkeypatch):
    # our own checks normally catch everything; when torch's solver still refuses, its
    # message is passed on with L['x'].size()[0] written as the user's x.shape[0]
    monkeypatch.setattr(exporter._constraints, "find_violations", lambda state: [])
    with pytest.raises(ConstraintError) as info:
        exporter.export(MinSize(), (torch.randn(10),), dynamic_shapes={"x": {0: Dim("n")}})
    text = str(info.value)
    assert "torch's shape solver cannot prove" in text
    assert "Not all values of x.shape[0] in the specified range satisfy the generated guard 8 <= x.shape[0] and x.shape[0] <= inf" in text, text
    assert "L['x']" not in text and "TORCH_LOGS" not in text
    assert info.value.hint.startswith("narrow the range")


class PadTo(torch.nn.Module):
    def forward(self, x):
        n = max(x.shape[0], 4)  # plain Python max/min on a symbolic size
        m = min([x.shape[0], 6, 9])
        last = x[x.shape[0] - 1]  # indexing with a symbolic int
        return torch.zeros(n) + last, x * m * torch.tensor(x.shape[0])


def test_builtin_max_min_and_symbolic_indexing_stay_symbolic():
    spec = {"x": {0: Dim("n")}}
    ep = exporter.export(PadTo(), (torch.randn(6),), dynamic_shapes=spec)
    oracle = torch.export.export(PadTo(), (torch.randn(6),), dynamic_shapes=spec)
    assert {str(k): (v.lower, v.upper) for k, v in ep.range_constraints.items()} == {
        str(k): (v.lower, v.upper) for k, v in oracle.range_constraints.items()
    }
    for n in (2, 3, 5, 6, 7, 12):
        x = torch.randn(n)
        torch.testing.assert_close(ep.module()(x), PadTo()(x))
    assert max(3, 4) == 4 and min([5, 2]) == 2 and max.__module__ == "builtins"  # restored


def test_builtins_are_restored_when_a_dynamic_export_fails():
    with pytest.raises(ConstraintError):
        exporter.export(View16(), (torch.randn(4, 16),), dynamic_shapes={"x": {1: Dim("features")}})
    assert max is __builtins__["max"] if isinstance(__builtins__, dict) else max is __builtins__.max
    import builtins
    assert builtins.max.__module__ == "builtins" and builtins.min.__module__ == "builtins"
    assert not torch.overrides._get_current_function_mode_stack()


class Two(torch.nn.Module):
    def forward(self, x, mask=None, scale=1.0):
        return x * scale if mask is None else x * mask * scale


x2 = torch.randn(4, 8)

SPEC_ERRORS = [
    ({"z": {0: Dim("b")}}, (x2,), r"dynamic_shapes has a spec for 'z', which is not an input of Two.forward\(x, mask, scale\)"),
    ({"maks": {0: Dim("b")}}, (x2, x2), r"did you mean 'mask'\?"),
    ({"x": {2: Dim("b")}}, (x2,), r"dynamic_shapes\['x'\]\[2\]: x has only 2 dimensions \(shape \[4, 8\]\)"),
    ({"x": [Dim("b")]}, (x2,), r"dynamic_shapes\['x'\] has 1 entries but x has 2 dimensions"),
    ({"x": Dim("b")}, (x2,), r'(?s)dynamic_shapes\[.x.\] is Dim\("b"\) for the whole tensor x.*write dynamic_shapes\[.x.\] = \{0: Dim\("b"\)\}'),
    ({"x": {0: "batch"}}, (x2,), r"dynamic_shapes\['x'\]\[0\] is a str \('batch'\)"),
    ({"x": {0: 5}}, (x2,), r"dynamic_shapes\['x'\]\[0\] = 5 but the example x has size 4 there"),
    ({"x": {0: Dim("b")}, "scale": {0: Dim("c")}}, (x2, None, 2.0), r"dynamic_shapes\['scale'\] is given, but scale is a float constant"),
    ((None, None), (x2,), r"dynamic_shapes has 2 entries but forward\(\) was given 1 inputs \(x\)"),
    ([{0: Dim("b")}], (x2,), None),
    ({"x": {0: Dim("b", max=3)}}, (x2,), r"the example x.shape\[0\] = 4 is outside the range \[0, 3\] declared at dynamic_shapes\['x'\]\[0\]"),
    ({"x": {0: Dim("b")}, "mask": {0: Dim("b", max=9)}}, (x2, x2), r"Dim 'b' is used with two ranges"),
    ({"x": {0: Dim("b")}, "mask": {1: Dim("b")}}, (x2, x2), r"x.shape\[0\] and mask.shape\[1\] share Dim 'b' \(so they are always equal\) but the examples have sizes 4 and 8"),
    ({"x": {0: 2 * Dim("h")}}, (torch.randn(5, 8),), r"x.shape\[0\] is declared 2\*h but its example size 5 is not of that form"),
    ("x", (x2,), r"dynamic_shapes must be a dict keyed by forward\(\) argument names or a tuple"),
]


@pytest.mark.parametrize("spec, args, message", SPEC_ERRORS)
def test_wrong_specs_are_named_at_their_path(spec, args, message):
    if message is None:  # a list works like a tuple
        exporter.export(Two(), args, dynamic_shapes=spec)
        return
    with pytest.raises(InputSpecError, match=message) as info:
        exporter.export(Two(), args, dynamic_shapes=spec)
    assert info.value.hint


@pytest.mark.parametrize("size", [0, 1])
def test_example_size_zero_or_one_for_a_dynamic_dim_suggests_two(size):
    with pytest.raises(InputSpecError, match=rf"x.shape\[0\] is declared dynamic .* but its example size is {size}; "
                                            r"export specializes sizes 0 and 1") as info:
        exporter.export(Two(), (torch.randn(size, 8),), dynamic_shapes={"x": {0: Dim("b")}})
    assert info.value.hint == "use an example where x.shape[0] is 2 or more"
    # Dim.AUTO may specialize silently
    ep = exporter.export(Two(), (torch.randn(size, 8),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert ep.graph_signature.input_specs[0].kind.name == "USER_INPUT"


class HFStyle(torch.nn.Module):
    def forward(self, input_ids, attention_mask=None, **kwargs):
        return input_ids * attention_mask + kwargs["token_type_ids"]


def test_specs_keyed_by_keyword_names_reach_kwargs():
    batch, seq = Dim("batch", max=16), Dim("seq", max=32)
    ids = torch.ones(2, 5, dtype=torch.long)
    spec = {n: {0: batch, 1: seq} for n in ("input_ids", "attention_mask", "token_type_ids")}
    ep = exporter.export(
        HFStyle(), (ids,), {"attention_mask": ids.clone(), "token_type_ids": ids * 0}, dynamic_shapes=spec
    )
    run = ep.module()
    for b, s in [(3, 7), (16, 32), (2, 2)]:
        a, m, t = torch.randint(0, 5, (b, s)), torch.randint(0, 2, (b, s)), torch.randint(0, 3, (b, s))
        torch.testing.assert_close(run(a, attention_mask=m, token_type_ids=t), HFStyle()(a, attention_mask=m, token_type_ids=t))
    with pytest.raises(Exception, match=r"input_ids.size\(\)\[0\] <= 16"):
        run(torch.ones(17, 5, dtype=torch.long), attention_mask=torch.ones(17, 5, dtype=torch.long),
            token_type_ids=torch.ones(17, 5, dtype=torch.long))
