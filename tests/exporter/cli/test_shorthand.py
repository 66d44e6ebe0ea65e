import pytest
import torch

from exporter import InputSpecError
from exporter.cli.shorthand import InputsSpec, TensorSpec, looks_like_callable_reference, parse_inputs_spec

f16, bf16, f32, f64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
c64, c128 = torch.complex64, torch.complex128
i8, i16, i32, i64, u8, b8 = torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool
I64_MAX = torch.iinfo(i64).max


def flat(args, kwargs):
    return [*args, *kwargs.values()]


def typed(value):
    """A comparable form that, unlike ==, tells 1 from 1.0 from True."""
    if isinstance(value, InputsSpec):
        return [typed(v) for v in value.args], [(k, typed(v)) for k, v in value.kwargs.items()]
    if isinstance(value, TensorSpec):
        bounds = (type(value.low), value.low, type(value.high), value.high)
        return ("tensor", value.dtype, value.shape, *bounds, value.low_open)
    return type(value), value


VALID = [
    ("f32[2,3]", [TensorSpec(f32, (2, 3))], {}),
    ("  f32[ 2 , 3 ]  ", [TensorSpec(f32, (2, 3))], {}),
    ("f32[2, 3]", [TensorSpec(f32, (2, 3))], {}),
    ("f32[] i64[0,4]", [TensorSpec(f32, ()), TensorSpec(i64, (0, 4))], {}),
    (
        "f16[1] bf16[1] f64[1] c64[1] c128[1] i8[1] i16[1] i32[1] i64[1] u8[1] b8[1]",
        [
            TensorSpec(dtype, (1,))
            for dtype in (f16, bf16, f64, c64, c128, i8, i16, i32, i64, u8, b8)
        ],
        {},
    ),
    ("i64[2,16]@[0,1000)", [TensorSpec(i64, (2, 16), 0, 1000)], {}),
    ("i64[4]@[0,9]", [TensorSpec(i64, (4,), 0, 10)], {}),
    ("i64[4]@(0,9)", [TensorSpec(i64, (4,), 1, 9)], {}),
    ("i32[4]@[ -5 , 5 )", [TensorSpec(i32, (4,), -5, 5)], {}),
    ("u8[4]@[0,255]", [TensorSpec(u8, (4,), 0, 256)], {}),
    ("i64[1]@[0,9223372036854775807]", [TensorSpec(i64, (1,), 0, I64_MAX + 1)], {}),
    ("f32[4]@[-1.5,1e-3)", [TensorSpec(f32, (4,), -1.5, 0.001)], {}),
    ("f64[4]@[-2,2]", [TensorSpec(f64, (4,), -2.0, 2.0)], {}),
    ("f32[4]@(0,1]", [TensorSpec(f32, (4,), 0.0, 1.0, low_open=True)], {}),
    (
        "4 -3 +7 0.5 1e-3 -2. .5 2E+2 None True False",
        [4, -3, 7, 0.5, 0.001, -2.0, 0.5, 200.0, None, True, False],
        {},
    ),
    (r"""'a b' "it's" 'x\'y' 'a:b' '\u00e9\n' """, ["a b", "it's", "x'y", "a:b", "é\n"], {}),
    (
        "f32[2] mask=b8[2] scale=0.5 name='x' flag=None",
        [TensorSpec(f32, (2,))],
        {"mask": TensorSpec(b8, (2,)), "scale": 0.5, "name": "x", "flag": None},
    ),
    ("b = 1 a=2.0 _c=True", [], {"b": 1, "a": 2.0, "_c": True}),
    ("f32[1]\t\n4", [TensorSpec(f32, (1,)), 4], {}),
]
VALID_TEXTS = [text for text, _, _ in VALID]


@pytest.mark.parametrize("text, args, kwargs", VALID)
def test_valid_specs_parse(text, args, kwargs):
    spec = parse_inputs_spec(text)
    assert typed(spec) == typed(InputsSpec(tuple(args), kwargs))


@pytest.mark.parametrize("text", VALID_TEXTS)
def test_canonical_text_round_trips(text):
    spec = parse_inputs_spec(text)
    assert typed(parse_inputs_spec(str(spec))) == typed(spec)


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("i64[2,16]@[0,1000)", "i64[2, 16]@[0,1000)"),
        ("i64[ 4 ]@(0,9]", "i64[4]@[1,10)"),
        ("f32[]@(0,1]", "f32[]@(0,1)"),
        ("f16[2]@[-1.5,2.25)", "f16[2]@[-1.5,2.25)"),
        ("0.5 -2. 1e-5 'a' \"b\" None x=True y=b8[1]", "0.5 -2.0 1e-05 'a' 'b' None x=True y=b8[1]"),
    ],
)
def test_canonical_text(text, canonical):
    assert str(parse_inputs_spec(text)) == canonical


def test_materialize_gives_dtypes_shapes_and_constants():
    spec = parse_inputs_spec(
        "f16[2,3] bf16[4] f32[] f64[1,2,3] c64[2] c128[2] i8[5] i64[5] u8[5] b8[5] 4 'a' k=i32[0,3] n=None"
    )
    args, kwargs = spec.materialize(0)
    tensors = [*args[:10], kwargs["k"]]
    assert [(t.dtype, tuple(t.shape)) for t in tensors] == [
        (f16, (2, 3)), (bf16, (4,)), (f32, ()), (f64, (1, 2, 3)), (c64, (2,)), (c128, (2,)),
        (i8, (5,)), (i64, (5,)), (u8, (5,)), (b8, (5,)), (i32, (0, 3)),
    ]
    assert args[10:] == (4, "a")
    assert list(kwargs) == ["k", "n"] and kwargs["n"] is None


@pytest.mark.parametrize(
    "text, least, greatest",
    [
        ("i64[100000]@[0,1000)", 0, 999),
        ("i64[100000]@(0,9]", 1, 9),
        ("u8[100000]", 0, 9),
        ("i32[100000]", 0, 9),
        ("i8[100000]@[-128,127]", -128, 127),
        (f"i64[1000]@[{I64_MAX - 1},{I64_MAX}]", I64_MAX - 1, I64_MAX),
    ],
)
def test_integer_draws_cover_exactly_the_range(text, least, greatest):
    (t,), _ = parse_inputs_spec(text).materialize(0)
    assert (t.min().item(), t.max().item()) == (least, greatest)


@pytest.mark.parametrize(
    "text, low, high, low_open",
    [
        ("f32[100000]@[-1.5,2)", -1.5, 2.0, False),
        ("f64[100000]@[0,1]", 0.0, 1.0, False),
        # ~1 in 2000 draws round to an excluded end in f16; they must be pulled inside.
        ("f16[100000]@(1,2)", 1.0, 2.0, True),
        ("bf16[100000]@[0,1)", 0.0, 1.0, False),
    ],
)
def test_float_draws_stay_inside_the_range(text, low, high, low_open):
    (t,), _ = parse_inputs_spec(text).materialize(0)
    least, greatest = t.min().item(), t.max().item()
    assert (least > low) if low_open else (least >= low)
    assert greatest < high
    span = high - low
    assert least < low + 0.01 * span and greatest > high - 0.01 * span, "draws spread over the range"


def test_defaults_without_a_range():
    (x, mask), _ = parse_inputs_spec("f32[100000] b8[1000]").materialize(0)
    assert abs(x.mean().item()) < 0.02 and 0.98 < x.std().item() < 1.02
    assert 400 < mask.sum().item() < 600


def test_seed_zero_is_reproducible_and_other_seeds_are_fresh():
    spec = parse_inputs_spec("f32[8] i64[8]@[0,1000) 3 'text' m=b8[64] c=c64[4] s=0.5")
    first, second, other = (flat(*spec.materialize(seed)) for seed in (0, 0, 1))
    for a, b, c in zip(first, second, other):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)
            assert not torch.equal(a, c)
        else:
            assert type(a) is type(b) is type(c) and a == b == c


def test_tensors_are_drawn_from_one_generator_in_order():
    (a, b), _ = parse_inputs_spec("f32[16] f32[16]").materialize(0)
    assert not torch.equal(a, b)
    (alone,), _ = parse_inputs_spec("f32[16]").materialize(0)
    assert torch.equal(a, alone)


# The second string of each row is a caret under the column where parsing stopped.
MALFORMED = [
    ("f32[2,3 i64[2]",
     "       ^", r"expected '\]' to close the dimensions of f32\[\.\.\.\]"),
    ("f32[2,3",
     "       ^", r"expected '\]' to close the dimensions of f32"),
    ("f32[2;3]",
     "     ^", r"expected ',' or '\]' after a dimension of f32\[\.\.\.\], found ';'"),
    ("f32[2 3]",
     "      ^", r"expected ',' or '\]' after a dimension of f32\[\.\.\.\], found '3'"),
    ("f32[2,]",
     "      ^", r"expected an integer size in f32\[\.\.\.\], found '\]'"),
    ("f32[2,-1]",
     "      ^", r"a size in f32\[\.\.\.\] must be >= 0, found -1"),
    ("f32[2.5]",
     "    ^", r"a size in f32\[\.\.\.\] must be a whole number, found 2.5"),
    ("f32[s0,3]",
     "    ^", r"expected an integer size in f32\[\.\.\.\], found 's0'"),
    ("f32[2] float32[2]",
     "       ^", r"unknown dtype 'float32'; expected one of f16, bf16, f32, f64, c64, c128, "
                 r"i8, i16, i32, i64, u8, b8\n"),
    ("f32[2] i46[3]",
     "       ^", r"unknown dtype 'i46'"),
    ("f32 [2]",
     "   ^", r"expected '\[' after the dtype f32"),
    ("i64[2]@[5,5)",
     "      ^", r"the range @\[5,5\) of i64\[\.\.\.\] is empty"),
    ("i64[2]@(4,5)",
     "      ^", r"the range @\(4,5\) of i64\[\.\.\.\] is empty"),
    ("f32[2]@[1,0.5]",
     "      ^", r"the range @\[1,0.5\] of f32\[\.\.\.\] is empty"),
    ("b8[2]@[0,1)",
     "     ^", r"b8 tensors take no range"),
    ("c64[2]@[0,1)",
     "      ^", r"c64 tensors take no range"),
    ("i64[2]@[0,1.5)",
     "          ^", r"the range of an integer tensor i64\[\.\.\.\] needs integer ends, found 1.5"),
    ("i32[2]@[0.0,4)",
     "        ^", r"needs integer ends, found 0.0"),
    ("u8[2]@[0,256]",
     "         ^", r"the range goes above u8's greatest value 255"),
    ("i8[2]@[-129,0)",
     "       ^", r"the range goes below i8's least value -128"),
    ("f16[2]@[0,7e4)",
     "          ^", r"70000 is out of f16's range \(largest 65504\)"),
    ("f16[2]@(1,1.0001)",
     "      ^", r"no f16 value lies in the range @\(1,1.0001\)"),
    ("f32[2]@0,1)",
     "       ^", r"expected '\[' or '\(' to open the range of f32\[\.\.\.\] after '@', found '0'"),
    ("f32[2]@[,1)",
     "        ^", r"expected the low end of the range, found ','"),
    ("f32[2]@[0 1)",
     "          ^", r"expected ',' between the ends of the range, found '1'"),
    ("f32[2]@[0,1",
     "           ^", r"expected '\)' or '\]' to close the range of f32\[\.\.\.\], found the end of the spec"),
    ("f32[2] @[0,1)",
     "       ^", r"a range must directly follow the '\]' of its tensor"),
    ("x='abc",
     "  ^", r"unterminated string: no closing '"),
    (r"'it\'s",
     r"^", r"unterminated string: no closing '"),
    (r"f32[1] '\d'",
     r"       ^", r"'\\d' is not a valid string: invalid escape sequence"),
    ("x=1 y=2 x=3",
     "        ^", r"keyword input x= is given twice"),
    ("class=1",
     "^", r"class is a Python keyword and cannot name a keyword input"),
    ("x=",
     "  ^", r"expected a value after x=, found the end of the spec"),
    ("f32[2]#",
     "      ^", r"expected a space or the end of the spec after an input, found '#'"),
    ("f32[2]]",
     "      ^", r"found '\]'"),
    ("4,5",
     " ^", r"expected a space or the end of the spec after an input, found ','"),
    ("4x",
     " ^", r"found 'x'"),
    ("#",
     "^", r"expected an input, found '#'"),
    ("4 none",
     "  ^", r"expected an input, found the bare word 'none'"),
    ("-x",
     " ^", r"expected a number, found 'x'"),
    ("1e",
     "  ^", r"expected the exponent's digits, found the end of the spec"),
    ("1e400",
     "^", r"1e400 is too large for a float"),
    ("f32[2]\t#",
     "       ^", r"found '#'"),
]


@pytest.mark.parametrize("text, caret, match", MALFORMED)
def test_malformed_specs_say_what_and_where(text, caret, match):
    with pytest.raises(InputSpecError, match=match) as info:
        parse_inputs_spec(text)
    headline, shown, pointer = info.value.message.splitlines()
    assert headline.startswith("--example-inputs: ")
    assert shown == "  " + "".join(" " if c.isspace() else c for c in text)
    assert pointer == "  " + caret
    assert info.value.hint
    assert info.value.category.value == "input"


@pytest.mark.parametrize(
    "text, hint",
    [
        ("float32[2]", "write torch.float32 as f32"),
        ("long[2]", "write torch.long as i64"),
        ("i46[2]", "did you mean i64?"),
        ("none", "did you mean None?"),
        ("hello", "quote strings: 'hello'"),
        ("4,5", "separate inputs with spaces, not commas"),
        ("f32[s0]", "dynamic-shape spec"),
    ],
)
def test_errors_hint_at_the_fix(text, hint):
    with pytest.raises(InputSpecError) as info:
        parse_inputs_spec(text)
    assert hint in info.value.hint


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_spec_is_an_error(text):
    with pytest.raises(InputSpecError) as info:
        parse_inputs_spec(text)
    assert info.value.message == "--example-inputs: no inputs given"
    assert "one input per forward() argument" in info.value.hint


REFERENCES = [
    "file.py:make_inputs",
    ":make_inputs",
    "pkg.mod:make_inputs",
    "models/m.py:Factory.inputs",
    r"C:\models\m.py:make",
    " m.py:make ",
    "m.py:",
]
NOT_REFERENCES = [
    "f32[2,3] i64[2,16]@[0,1000)",
    "name='a:b'",
    "x=\"a:b\" f32[2]",
    r"'it\'s:' f32[1]",
    "f32[2:3]",
    "",
]


@pytest.mark.parametrize(
    "text, expected", [(t, True) for t in REFERENCES] + [(t, False) for t in NOT_REFERENCES]
)
def test_looks_like_callable_reference(text, expected):
    assert looks_like_callable_reference(text) is expected


@pytest.mark.parametrize("text", VALID_TEXTS)
def test_valid_specs_are_not_references(text):
    assert not looks_like_callable_reference(text)


@pytest.mark.parametrize("text", REFERENCES)
def test_references_are_not_specs(text):
    with pytest.raises(InputSpecError):
        parse_inputs_spec(text)


def test_keyword_inputs_may_stand_anywhere_among_positional_ones():
    spec = parse_inputs_spec("f32[2,3] i64[2,16]@[0,1000) mask=b8[2,16] 4 0.5 None")
    assert [str(a) for a in spec.args] == ["f32[2, 3]", "i64[2, 16]@[0,1000)", "4", "0.5", "None"]
    assert list(spec.kwargs) == ["mask"]
    assert parse_inputs_spec(str(spec)) == spec


def test_tensors_the_machine_cannot_hold_are_refused_before_any_is_drawn():
    spec = parse_inputs_spec("f32[1024,1024] x=i64[8] 3")
    assert spec.nbytes == 4 * 1024 * 1024 + 64
    spec.require_memory(available=spec.nbytes)
    with pytest.raises(InputSpecError, match=r"needs 4\.0 MiB for its tensors \(f32\[1024, 1024\] alone 4\.0 MiB\), more than the 1\.0 MiB"):
        spec.require_memory(available=1 << 20)
    huge = parse_inputs_spec("f32[100000,100000,100]")
    with pytest.raises(InputSpecError, match=r"needs 3\.6 TiB"):
        huge.require_memory()
