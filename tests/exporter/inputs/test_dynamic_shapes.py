"""dynamic_shapes read against the example inputs: every wrong spec named at its path."""

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import InputSpecError
from exporter._dims import DimKind
from exporter.inputs import bind_inputs, plan_dynamic_shapes


class Two(torch.nn.Module):
    def forward(self, x, mask=None, scale=1.0):
        return x * scale if mask is None else x * mask * scale


x2 = torch.randn(4, 8)

SPEC_ERRORS = [
    ({"z": {0: Dim("b")}}, (x2,), r"dynamic_shapes has a spec for 'z', which is not an input of Two.forward\(x, mask, scale\)"),
    ({"maks": {0: Dim("b")}}, (x2, x2), r"did you mean 'mask'\?"),
    ({"x": {0: Dim("b")}, "mask": None}, (x2,), r"a spec for 'mask', but the example inputs give no value for that parameter"),
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


def test_the_plan_types_every_entry():
    b = Dim("b", max=16)
    bound = bind_inputs(Two(), (x2, torch.randn(8, 8)), {})
    plan = plan_dynamic_shapes(Two(), bound, {"x": {0: b, 1: Dim.AUTO}, "mask": [2 * b, None]})
    kinds = {(leaf, dim): (r.kind, r.where, r.input_dim) for leaf, dim, r in plan.dims()}
    assert kinds == {
        (0, 0): (DimKind.NAMED, "dynamic_shapes['x'][0]", "x.shape[0]"),
        (0, 1): (DimKind.AUTO, "dynamic_shapes['x'][1]", "x.shape[1]"),
        (1, 0): (DimKind.DERIVED, "dynamic_shapes['mask'][0]", "mask.shape[0]"),
        (1, 1): (DimKind.STATIC, "dynamic_shapes['mask'][1]", "mask.shape[1]"),
    }
    assert list(plan.roots) == ["b"] and plan.roots["b"].max == 16


def test_nested_inputs_are_walked_by_key_and_index():
    class Nested(torch.nn.Module):
        def forward(self, inputs):
            return inputs["a"] + inputs["b"][0]

    x = torch.randn(3, 4)
    bound = bind_inputs(Nested(), ({"a": x, "b": [x]},), {})
    plan = plan_dynamic_shapes(Nested(), bound, {"inputs": {"a": {0: Dim("n")}, "b": [{0: Dim("n")}]}})
    assert [(leaf, r.where) for leaf, _, r in plan.dims()] == [
        (0, "dynamic_shapes['inputs']['a'][0]"),
        (1, "dynamic_shapes['inputs']['b'][0][0]"),
    ]
    with pytest.raises(InputSpecError, match=r"dynamic_shapes\['inputs'\] has a spec for 'c', which inputs does not have"):
        plan_dynamic_shapes(Nested(), bound, {"inputs": {"c": None}})


class ScaleBy(torch.nn.Module):
    def forward(self, x, n):
        return x * n


@pytest.mark.parametrize("hint", [Dim.AUTO, Dim.DYNAMIC])
def test_an_int_input_with_a_hint_is_a_symbolic_int(hint):
    x = torch.randn(3, 2)
    ep = exporter.export(ScaleBy(), (x, 4), dynamic_shapes={"x": None, "n": hint})
    assert type(ep.graph_signature.input_specs[1].arg).__name__ == "SymIntArgument"
    torch.testing.assert_close(ep.module()(x, 9), x * 9)


def test_an_int_input_cannot_take_a_named_dim_and_must_fit_its_range():
    x = torch.randn(3, 2)
    with pytest.raises(InputSpecError, match=r"n is an int: an int input can be made dynamic with Dim.AUTO or Dim.DYNAMIC"):
        exporter.export(ScaleBy(), (x, 4), dynamic_shapes={"x": None, "n": Dim("n")})
    with pytest.raises(InputSpecError, match=r"the example n = 14 is outside the range \[3, 10\]"):
        exporter.export(ScaleBy(), (x, 14), dynamic_shapes={"x": None, "n": Dim.DYNAMIC(min=3, max=10)})


def test_a_static_hint_with_a_range_must_hold_the_example():
    with pytest.raises(InputSpecError, match=r"the example x.shape\[0\] = 4 is outside the range \[6, 8\]"):
        exporter.export(ScaleBy(), (torch.randn(4, 2), 2), dynamic_shapes={"x": [Dim.STATIC(min=6, max=8), None], "n": None})


def test_shapes_collection_and_additional_inputs_are_read_as_torch_export_reads_them():
    x = torch.randn(3, 2)
    collection = torch.export.ShapesCollection()
    collection[x] = {0: Dim("rows")}
    ep = exporter.export(ScaleBy(), (x, 2), dynamic_shapes=collection)
    torch.testing.assert_close(ep.module()(torch.ones(5, 2), 2), torch.full((5, 2), 2.0))

    more = torch.export.AdditionalInputs()
    more.add((torch.randn(6, 2), 3))
    ep = exporter.export(ScaleBy(), (x, 2), dynamic_shapes=more)
    assert [type(s.arg).__name__ for s in ep.graph_signature.input_specs] == ["TensorArgument", "SymIntArgument"]
    torch.testing.assert_close(ep.module()(torch.ones(7, 2), 5), torch.full((7, 2), 5.0))


def test_additional_inputs_the_program_refuses_are_a_constraint_error():
    class NeedsThree(torch.nn.Module):
        def forward(self, x):
            return x[:3] * 2

    more = torch.export.AdditionalInputs()
    more.add((torch.randn(2),))
    with pytest.raises(exporter.ConstraintError, match="does not accept all of the additional inputs"):
        exporter.export(NeedsThree(), (torch.randn(5),), dynamic_shapes=more)


def test_a_list_spec_gives_a_dataclass_input_its_fields_in_order():
    import dataclasses

    @dataclasses.dataclass
    class Pair:
        a: torch.Tensor
        b: torch.Tensor

    torch.export.register_dataclass(Pair, serialized_type_name="tests.dynamic_shapes.Pair")

    class AddPair(torch.nn.Module):
        def forward(self, pair):
            return pair.a + pair.b

    batch = Dim("batch")
    ep = exporter.export(AddPair(), (Pair(torch.randn(4, 2), torch.randn(4, 2)),), dynamic_shapes={"pair": [{0: batch}, {0: batch}]})
    pair = Pair(torch.randn(6, 2), torch.randn(6, 2))
    torch.testing.assert_close(ep.module()(pair), pair.a + pair.b)


def test_a_tuple_spec_follows_the_signature_whatever_order_keywords_came_in():
    class Four(torch.nn.Module):
        def forward(self, a, b, kw1, kw2):
            return a.sum() + b.sum() + kw1.sum() - kw2.sum()

    ep = exporter.export(
        Four(), (torch.randn(4, 4), torch.randn(4, 4)), {"kw2": torch.ones(4, 4), "kw1": torch.zeros(4, 4)},
        dynamic_shapes=(None, {0: Dim("dim")}, {0: Dim("dim_for_kw1")}, None),
    )
    args, kwargs = (torch.randn(4, 4), torch.randn(7, 4)), {"kw2": torch.ones(4, 4), "kw1": torch.randn(9, 4)}
    torch.testing.assert_close(ep.module()(*args, **kwargs), Four()(*args, **kwargs))


class Options(torch.nn.Module):
    """Reads an options input that may hold no tensor at all (``cross_attention_kwargs={}``)."""

    def forward(self, x, opts=None):
        out = x * (2.0 if opts is None else 3.0 + len(opts))
        if isinstance(opts, dict) and isinstance(opts.get("b"), torch.Tensor):
            out = out + opts["b"]
        return out


_t = torch.randn(3, 4)
_AUTO = {0: Dim.AUTO}

# (args, kwargs, dynamic_shapes): every way of passing an input that holds no tensor, each
# accepted by torch.export.export(strict=False)
EMPTY_INPUTS = {
    "kwarg {} with spec": ((), {"x": _t, "opts": {}}, {"x": _AUTO, "opts": {}}),
    "kwarg {} without dynamic_shapes": ((), {"x": _t, "opts": {}}, None),
    "kwarg {} tuple spec": ((), {"x": _t, "opts": {}}, (_AUTO, {})),
    "kwarg []": ((), {"x": _t, "opts": []}, {"x": _AUTO, "opts": []}),
    "kwarg ()": ((), {"x": _t, "opts": ()}, {"x": _AUTO, "opts": ()}),
    "kwarg None": ((), {"x": _t, "opts": None}, {"x": _AUTO, "opts": None}),
    "kwarg [None]": ((), {"x": _t, "opts": [None]}, {"x": _AUTO, "opts": [None]}),
    "kwarg {'a': None}": ((), {"x": _t, "opts": {"a": None}}, {"x": _AUTO, "opts": {"a": None}}),
    "kwarg {'a': []}": ((), {"x": _t, "opts": {"a": []}}, {"x": _AUTO, "opts": {"a": []}}),
    "kwarg {'a': {'b': ()}}": ((), {"x": _t, "opts": {"a": {"b": ()}}}, {"x": _AUTO, "opts": {"a": {"b": ()}}}),
    "kwarg {'a': [], 'b': tensor}": (
        (), {"x": _t, "opts": {"a": [], "b": torch.randn(3, 4)}}, {"x": _AUTO, "opts": {"a": [], "b": _AUTO}},
    ),
    "positional {} dict spec": ((_t, {}), {}, {"x": _AUTO, "opts": {}}),
    "positional {} tuple spec": ((_t, {}), {}, (_AUTO, {})),
    "positional [] tuple spec": ((_t, []), {}, (_AUTO, [])),
    "positional () tuple spec": ((_t, ()), {}, (_AUTO, ())),
    "positional None tuple spec": ((_t, None), {}, (_AUTO, None)),
    "positional {'a': []} without dynamic_shapes": ((_t, {"a": []}), {}, None),
}


def _signature(program) -> tuple:
    rows = [(s.kind.name, type(s.arg).__name__, s.target) for s in program.graph_signature.input_specs]
    return program.call_spec.in_spec, program.call_spec.out_spec, rows


@pytest.mark.parametrize("args, kwargs, spec", EMPTY_INPUTS.values(), ids=EMPTY_INPUTS)
def test_an_input_that_holds_no_tensor_is_present_as_torch_export_reads_it(args, kwargs, spec):
    oracle = torch.export.export(Options(), args, kwargs, dynamic_shapes=spec, strict=False).run_decompositions({})
    ep = exporter.export(Options(), args, kwargs, dynamic_shapes=spec)
    assert _signature(ep) == _signature(oracle)
    torch.testing.assert_close(ep.module()(*args, **kwargs), Options()(*args, **kwargs))
    torch.testing.assert_close(ep.module()(*args, **kwargs), oracle.module()(*args, **kwargs))


def test_a_spec_must_still_cover_every_input_given_in_a_tuple():
    with pytest.raises(InputSpecError, match=r"dynamic_shapes has 1 entries but forward\(\) was given 2 inputs \(x, opts\)"):
        exporter.export(Options(), (_t, {}), dynamic_shapes=(_AUTO,))
    with pytest.raises(InputSpecError, match=r"dynamic_shapes\['opts'\] should be a list of 0 entries"):
        exporter.export(Options(), (_t, []), dynamic_shapes={"x": _AUTO, "opts": {0: Dim.AUTO}})
