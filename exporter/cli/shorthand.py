"""Parse the ``--example-inputs`` shorthand into specs that draw example inputs.

    f32[2,3] i64[2,16]@[0,1000) 4 0.5 None mask=b8[2,16]

is a whitespace-separated list of inputs: positional ones in forward()'s order, and
``name=value`` ones, which may stand anywhere (``f32[2,3] mask=b8[2,3] 4`` is the positional
inputs ``f32[2,3]`` and ``4`` plus the keyword input ``mask``).
Tensors are written in torch's own notation (``f32[2, 3]``, as graphs and shape errors
print them), optionally followed by the range their values are drawn from uniformly:
``@[low,high)`` excludes high, ``@[low,high]`` includes it, ``@(low,...`` excludes low.
Anything else is a Python constant: an int, a float, None, True, False or a quoted string.

    spec   := item (SPACE item)*
    item   := [NAME '='] value
    value  := tensor | NUMBER | 'None' | 'True' | 'False' | STRING
    tensor := DTYPE '[' [INT (',' INT)*] ']' [range]
    range  := '@' ('[' | '(') NUMBER ',' NUMBER (')' | ']')

Without a range, floating and complex tensors are standard normal, integer tensors are
uniform in [0, 10) and b8 tensors are fair coin flips.
"""

from __future__ import annotations

import ast
import difflib
import keyword
import math
import warnings
from typing import Any, NoReturn

import attrs
import torch

from .._errors import InputSpecError, point_at
from .memory import available_memory, format_size

__all__ = ["TensorSpec", "InputsSpec", "parse_inputs_spec", "looks_like_callable_reference"]

_DTYPES: dict[str, torch.dtype] = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "c64": torch.complex64,
    "c128": torch.complex128,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "b8": torch.bool,
}
_DTYPE_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
# torch.float32, torch.long, ...: people write these where a short name belongs.
_TORCH_DTYPES = {name: value for name, value in vars(torch).items() if isinstance(value, torch.dtype)}
_CONSTANTS = {"None": None, "True": True, "False": False}
_DIGITS = frozenset("0123456789")
_DEFAULT_INT_RANGE = (0, 10)

_TENSOR_HINT = "write tensors as DTYPE[dims], like f32[2,3] or i64[1,8]@[0,1000)"
_RANGE_HINT = (
    "write a range as @[low,high) to exclude high or @[low,high] to include it, like i64[2,16]@[0,1000)"
)
_VALUE_HINT = (
    "each input is a tensor such as f32[2,3], a number, None, True, False or a quoted string"
)


@attrs.frozen
class TensorSpec:
    """A random tensor of a fixed dtype and shape, drawn from an optional range.

    Ranges are normalized so that ``high`` is always exclusive: an integer ``@[0,9]`` is
    stored as low 0, high 10, and ``@(0,...`` as low 1.  A float range ending in ``]`` is
    stored like one ending in ``)``, since values drawn from [low, high) also lie in
    [low, high]; only an excluded low end (``low_open``) changes what may be drawn.
    """

    dtype: torch.dtype
    shape: tuple[int, ...]
    low: float | int | None = None
    high: float | int | None = None
    low_open: bool = False

    def draw(self, generator: torch.Generator) -> torch.Tensor:
        """A fresh tensor; the values depend only on the generator's state."""
        if self.dtype == torch.bool:
            return torch.randint(0, 2, self.shape, generator=generator, dtype=torch.bool)
        if self.dtype.is_floating_point or self.dtype.is_complex:
            if self.low is None:
                return torch.randn(self.shape, generator=generator, dtype=self.dtype)
            # Drawn in float64 and clamped after the cast, because rounding to a narrow
            # dtype can land on an excluded end (f16(0.99997) == 1.0).
            least, greatest = _inner_bounds(self.dtype, self.low, self.high, self.low_open)
            unit = torch.rand(self.shape, generator=generator, dtype=torch.float64)
            values = self.low + (self.high - self.low) * unit
            return values.to(self.dtype).clamp_(least, greatest)
        low, high = (self.low, self.high) if self.low is not None else _DEFAULT_INT_RANGE
        # random_(low, None) reaches the dtype's maximum, which randint's int64 `high` cannot.
        to = None if high == torch.iinfo(self.dtype).max + 1 else high
        return torch.empty(self.shape, dtype=self.dtype).random_(low, to, generator=generator)

    @property
    def nbytes(self) -> int:
        """Bytes the drawn tensor takes."""
        return math.prod(self.shape) * self.dtype.itemsize

    def __str__(self) -> str:
        text = f"{_DTYPE_NAMES[self.dtype]}[{', '.join(map(str, self.shape))}]"
        if self.low is None:
            return text
        opening = "(" if self.low_open else "["
        return f"{text}@{opening}{_format_bound(self.low)},{_format_bound(self.high)})"


@attrs.frozen
class InputsSpec:
    """Example inputs as written on the command line: tensors to draw and constants."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = attrs.field(factory=dict)

    def materialize(self, seed: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` with every tensor drawn from one generator seeded with ``seed``.

        Seed 0 gives the example inputs; other seeds give fresh inputs of the same kind.
        Tensors are drawn in order, positional ones first; constants are passed as is.
        """
        generator = torch.Generator().manual_seed(seed)

        def value(item: Any) -> Any:
            return item.draw(generator) if isinstance(item, TensorSpec) else item

        args = tuple(value(item) for item in self.args)
        kwargs = {name: value(item) for name, item in self.kwargs.items()}
        return args, kwargs

    @property
    def nbytes(self) -> int:
        """Bytes the drawn tensors take together."""
        return sum(t.nbytes for t in (*self.args, *self.kwargs.values()) if isinstance(t, TensorSpec))

    def require_memory(self, available: int | None = None) -> None:
        """Refuse, before drawing anything, tensors that need more memory than the machine has
        available (``available`` bytes; by default what the system and its cgroup say)."""
        available = available_memory() if available is None else available
        if available is None or self.nbytes <= available:
            return
        tensors = [t for t in (*self.args, *self.kwargs.values()) if isinstance(t, TensorSpec)]
        largest = max(tensors, key=lambda t: t.nbytes)
        raise InputSpecError(
            f"--example-inputs {str(self)!r} needs {format_size(self.nbytes)} for its tensors "
            f"({largest} alone {format_size(largest.nbytes)}), more than the {format_size(available)} of memory available",
            hint="give smaller sizes: the program does not depend on them (a batch of 2 exports the same program; "
            "make sizes dynamic with --dynamic to accept any)",
        )

    def __str__(self) -> str:
        """Canonical text; ``parse_inputs_spec(str(spec)) == spec``."""
        items = [_format_value(item) for item in self.args]
        items += [f"{name}={_format_value(item)}" for name, item in self.kwargs.items()]
        return " ".join(items)


def parse_inputs_spec(text: str) -> InputsSpec:
    """Parse ``--example-inputs`` text; errors show the text with a caret where parsing stopped."""
    return _Parser(text).parse()


def looks_like_callable_reference(text: str) -> bool:
    """Whether ``text`` names a callable (``file.py:make_inputs``, ``pkg.mod:make``, ``:make``).

    The shorthand never holds ':' outside a quoted string, so a colon followed by a
    (dotted) Python name, or by nothing, marks a reference: the loader then explains a
    missing name.  A colon followed by anything else (``f32[2:3]``) is a typo in a spec,
    which the parser points at.
    """
    colon = None
    quote = None
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in ("'", '"'):
            quote = char
        elif char == ":":
            colon = i
        i += 1
    if colon is None:
        return False
    name = text[colon + 1 :].strip()
    return not name or all(part.isidentifier() for part in name.split("."))


class _Parser:
    """Recursive descent over the spec text; ``pos`` is how far parsing has got."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> InputsSpec:
        self._skip_space()
        if not self._peek():
            raise InputSpecError(
                "--example-inputs: no inputs given",
                hint='give one input per forward() argument, like --example-inputs "f32[2,3] mask=b8[2,3]"',
            )
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        while self._peek():
            start = self.pos
            name = self._keyword_name()
            if name in kwargs:
                self._fail(f"keyword input {name}= is given twice", at=start, hint="give each one once")
            value = self._value(name)
            if name is None:
                args.append(value)
            else:
                kwargs[name] = value
            self._end_of_item()
        return InputsSpec(tuple(args), kwargs)

    # Items

    def _keyword_name(self) -> str | None:
        """Consume ``NAME =`` if the item starts with one."""
        start = self.pos
        name = self._word()
        self._skip_space()
        if not name or self._peek() != "=":
            self.pos = start
            return None
        if keyword.iskeyword(name):
            self._fail(
                f"{name} is a Python keyword and cannot name a keyword input",
                at=start,
                hint="use the name of a forward() parameter",
            )
        self.pos += 1
        self._skip_space()
        return name

    def _value(self, name: str | None) -> Any:
        start = self.pos
        char = self._peek()
        if char.isalpha() or char == "_":
            word = self._word()
            if word in _CONSTANTS:
                return _CONSTANTS[word]
            if self._peek() == "[":
                return self._tensor(word, start)
            self._fail_on_word(word, start)
        if char in _DIGITS or char in ("+", "-", "."):
            return self._number("a number")
        if char in ("'", '"'):
            return self._string()
        if char == "@":
            self._fail(
                "a range must directly follow the ']' of its tensor",
                hint="write the range without a space: f32[2,3]@[-1,1)",
            )
        what = f"a value after {name}=" if name else "an input"
        self._fail(f"expected {what}, found {self._found()}", hint=_VALUE_HINT)

    def _fail_on_word(self, word: str, start: int) -> NoReturn:
        if word in _DTYPES:
            self._fail(f"expected '[' after the dtype {word}", hint=_TENSOR_HINT)
        close = difflib.get_close_matches(word, [*_DTYPES, *_CONSTANTS], n=1)
        hint = f"did you mean {close[0]}?" if close else f"quote strings: '{word}'; {_VALUE_HINT}"
        self._fail(f"expected an input, found the bare word {word!r}", at=start, hint=hint)

    def _end_of_item(self) -> None:
        char = self._peek()
        if char and not char.isspace():
            hint = "separate inputs with spaces, not commas" if char == "," else _VALUE_HINT
            self._fail(f"expected a space or the end of the spec after an input, found {char!r}", hint=hint)
        self._skip_space()

    # Tensors

    def _tensor(self, word: str, start: int) -> TensorSpec:
        dtype = _DTYPES.get(word)
        if dtype is None:
            self._fail(
                f"unknown dtype {word!r}; expected one of {', '.join(_DTYPES)}",
                at=start,
                hint=_dtype_hint(word),
            )
        shape = self._dims(word)
        if self._peek() != "@":
            return TensorSpec(dtype, shape)
        return self._range(dtype, word, shape)

    def _dims(self, word: str) -> tuple[int, ...]:
        self.pos += 1
        self._skip_space()
        if self._peek() == "]":
            self.pos += 1
            return ()
        dims = []
        while True:
            dims.append(self._dim(word))
            end = self.pos
            self._skip_space()
            char = self._peek()
            if char == ",":
                self.pos += 1
                self._skip_space()
            elif char == "]":
                self.pos += 1
                return tuple(dims)
            elif char and (self.pos == end or char in _DIGITS):
                self._fail(f"expected ',' or ']' after a dimension of {word}[...], found {char!r}")
            else:
                self._fail(f"expected ']' to close the dimensions of {word}[...]", at=end)

    def _dim(self, word: str) -> int:
        start = self.pos
        char = self._peek()
        if char in _DIGITS or char in ("+", "-", "."):
            size = self._number(f"a size in {word}[...]", _TENSOR_HINT)
            found = self.text[start : self.pos]
            if isinstance(size, float):
                self._fail(f"a size in {word}[...] must be a whole number, found {found}", at=start)
            if size < 0:
                self._fail(f"a size in {word}[...] must be >= 0, found {found}", at=start)
            return size
        if char.isalpha() or char == "_":
            self._fail(
                f"expected an integer size in {word}[...], found {self._word()!r}",
                at=start,
                hint="example inputs have concrete sizes, like f32[2,3]; "
                "say which dimensions are dynamic in the dynamic-shape spec",
            )
        self._fail(f"expected an integer size in {word}[...], found {self._found()}")

    def _range(self, dtype: torch.dtype, word: str, shape: tuple[int, ...]) -> TensorSpec:
        at = self.pos
        if dtype == torch.bool:
            self._fail("b8 tensors take no range: they are True or False at random", hint="drop the @...")
        if dtype.is_complex:
            self._fail(
                f"{word} tensors take no range: they are drawn standard normal",
                hint="drop the @..., or draw real and imaginary parts as two f32 inputs",
            )
        self.pos += 1
        opening = self._peek()
        if opening not in ("[", "("):
            self._fail(
                f"expected '[' or '(' to open the range of {word}[...] after '@', found {self._found()}",
                hint=_RANGE_HINT,
            )
        self.pos += 1
        self._skip_space()
        low_at = self.pos
        low = self._number("the low end of the range", _RANGE_HINT)
        self._skip_space()
        if self._peek() != ",":
            self._fail(f"expected ',' between the ends of the range, found {self._found()}", hint=_RANGE_HINT)
        self.pos += 1
        self._skip_space()
        high_at = self.pos
        high = self._number("the high end of the range", _RANGE_HINT)
        self._skip_space()
        closing = self._peek()
        if closing not in (")", "]"):
            self._fail(
                f"expected ')' or ']' to close the range of {word}[...], found {self._found()}",
                hint=_RANGE_HINT,
            )
        self.pos += 1
        written = self.text[at : self.pos]

        if dtype.is_floating_point:
            low, high = float(low), float(high)
        else:
            for value, value_at in ((low, low_at), (high, high_at)):
                if isinstance(value, float):
                    self._fail(
                        f"the range of an integer tensor {word}[...] needs integer ends, found {value!r}",
                        at=value_at,
                        hint=f"write the range like {word}[...]@[0,1000), or use a float dtype such as f32",
                    )
            if opening == "(":
                low += 1
            if closing == "]":
                high += 1
        if high <= low:
            self._fail(
                f"the range {written} of {word}[...] is empty",
                at=at,
                hint="the high end must be greater than the low end, like @[0,10)",
            )
        if dtype.is_floating_point:
            limit = torch.finfo(dtype).max
            for value, value_at in ((low, low_at), (high, high_at)):
                if abs(value) > limit:
                    self._fail(
                        f"{value:g} is out of {word}'s range (largest {limit:g})",
                        at=value_at,
                        hint="narrow the range, or use a wider dtype such as f32",
                    )
            least, greatest = _inner_bounds(dtype, low, high, opening == "(")
            if least > greatest:
                self._fail(f"no {word} value lies in the range {written}", at=at, hint="widen the range")
        else:
            info = torch.iinfo(dtype)
            hint = f"keep the range within {word}'s values, @[{info.min},{info.max}]"
            if low < info.min:
                self._fail(f"the range goes below {word}'s least value {info.min}", at=low_at, hint=hint)
            if high - 1 > info.max:
                self._fail(f"the range goes above {word}'s greatest value {info.max}", at=high_at, hint=hint)
        return TensorSpec(dtype, shape, low, high, dtype.is_floating_point and opening == "(")

    # Tokens

    def _number(self, what: str, hint: str = _VALUE_HINT) -> int | float:
        """NUMBER := [+-] (DIGITS ['.' [DIGITS]] | '.' DIGITS) [('e'|'E') [+-] DIGITS]."""
        start = self.pos
        if self._peek() in ("+", "-"):
            self.pos += 1
        is_float = False
        digits = self._digits()
        if self._peek() == ".":
            self.pos += 1
            is_float = True
            digits += self._digits()
        if not digits:
            self._fail(f"expected {what}, found {self._found()}", hint=hint)
        if self._peek() in ("e", "E"):
            self.pos += 1
            is_float = True
            if self._peek() in ("+", "-"):
                self.pos += 1
            if not self._digits():
                self._fail(f"expected the exponent's digits, found {self._found()}", hint="write 1e-3 or 2e+5")
        text = self.text[start : self.pos]
        if not is_float:
            return int(text)
        value = float(text)
        if not math.isfinite(value):
            self._fail(f"{text} is too large for a float", at=start, hint="use a number below 1.8e308")
        return value

    def _string(self) -> str:
        start = self.pos
        quote = self._peek()
        self.pos += 1
        while True:
            char = self._peek()
            if not char:
                self._fail(
                    f"unterminated string: no closing {quote}",
                    at=start,
                    hint=f"end the string with {quote}; inside it write {quote} as \\{quote}",
                )
            self.pos += 1
            if char == "\\":
                self.pos += 1
            elif char == quote:
                break
        literal = self.text[start : self.pos]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # an invalid escape such as '\d' is an error here
                return ast.literal_eval(literal)
        except (SyntaxError, ValueError) as e:
            reason = e.msg if isinstance(e, SyntaxError) else str(e)
            self._fail(
                f"{literal} is not a valid string: {reason}",
                at=start,
                hint="strings follow Python's rules; write a backslash as \\\\",
            )

    def _word(self) -> str:
        start = self.pos
        char = self._peek()
        if char.isalpha() or char == "_":
            while char.isalnum() or char == "_":
                self.pos += 1
                char = self._peek()
        return self.text[start : self.pos]

    def _digits(self) -> int:
        start = self.pos
        while self._peek() in _DIGITS:
            self.pos += 1
        return self.pos - start

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _skip_space(self) -> None:
        while self._peek().isspace():
            self.pos += 1

    def _found(self) -> str:
        char = self._peek()
        return repr(char) if char else "the end of the spec"

    def _fail(self, message: str, *, at: int | None = None, hint: str = _TENSOR_HINT) -> NoReturn:
        column = self.pos if at is None else at
        shown = "".join(" " if char.isspace() else char for char in self.text)
        raise InputSpecError(
            f"--example-inputs: {message}\n{point_at(shown, column)}",
            hint=hint,
        )


def _inner_bounds(dtype: torch.dtype, low: float, high: float, low_open: bool) -> tuple[float, float]:
    """The least and the greatest ``dtype`` values in the range; draws are clamped to them."""

    def step(value: float, toward: float) -> float:
        return torch.nextafter(torch.tensor(value, dtype=dtype), torch.tensor(toward, dtype=dtype)).item()

    least = torch.tensor(low, dtype=dtype).item()
    if least < low or (low_open and least == low):
        least = step(least, math.inf)
    greatest = torch.tensor(high, dtype=dtype).item()
    if greatest >= high:
        greatest = step(greatest, -math.inf)
    return least, greatest


def _dtype_hint(word: str) -> str:
    if word in _TORCH_DTYPES and _TORCH_DTYPES[word] in _DTYPE_NAMES:
        return f"write torch.{word} as {_DTYPE_NAMES[_TORCH_DTYPES[word]]}"
    close = difflib.get_close_matches(word, _DTYPES, n=1, cutoff=0.5)
    return f"did you mean {close[0]}?" if close else _TENSOR_HINT


def _format_bound(value: float | int) -> str:
    # The dtype decides whether a bound is an int or a float, so 1.0 can read as 1.
    text = repr(value)
    return text.removesuffix(".0")


def _format_value(value: Any) -> str:
    return str(value) if isinstance(value, TensorSpec) else repr(value)
