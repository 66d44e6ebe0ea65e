"""Random models with data-dependent control flow, as Python source.

``generate(seed)`` builds a ``Program``: a module whose ``forward(x, labels)`` (``x`` eight
floats, ``labels`` eight class ids, -1 for none) mixes

- value branches (``if h.mean() > 0.2:``), nested, and one in each of several layers;
- loops over data-sized tensors: the classes present (``torch.unique``), the positions
  a mask selects (``nonzero``), the experts a routing hits, two of them side by side
  (``zip``), ``range`` of how many a mask selects;
- Python state read after them: counters, flags, floats, lists appended then measured or
  stacked, an attribute of the module, a value kept from the last step;
- exits inside loops: ``break``, ``continue`` and ``return``, on a Python count or a
  tensor's value, ``for ... else``; early returns from ``forward``;
- loops of fixed length (``for k in range(3):``) whose steps branch on values, ``continue``
  or ``break`` on one, and change Python numbers on one side only;
- input checks stored in a flag and raised later; helper functions whose loops run in a
  frame of their own.

Every variable is set at the top of ``forward``, so any statement can be dropped (the
shrinker's edit) and the program still runs.  ``Program.render()`` writes a self-contained
file: the module, ``make_model()`` and ``EXAMPLE``, the input the export traces.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field

__all__ = ["Program", "Stmt", "generate"]

N = 8
"""The length of ``x`` and ``labels``."""
CLASSES = 6
"""Labels are -1 (none) or ``0 .. CLASSES - 1``."""


@dataclass
class Stmt:
    """One statement: a line, and for ``if``/``for`` the blocks under it."""

    line: str
    body: list[Stmt] = field(default_factory=list)
    orelse: list[Stmt] = field(default_factory=list)
    tag: str = ""
    """What kind of statement it is (``branch``, ``loop``, ``break``, ...): the features."""

    def render(self, indent: int) -> list[str]:
        pad = "    " * indent
        lines = [pad + self.line]
        if self.line.endswith(":"):
            lines += [line for s in self.body for line in s.render(indent + 1)] or [pad + "    pass"]
            if self.orelse:
                lines.append(pad + "else:")
                lines += [line for s in self.orelse for line in s.render(indent + 1)]
        return lines

    def walk(self):
        yield self
        for s in (*self.body, *self.orelse):
            yield from s.walk()


@dataclass
class Helper:
    """A module-level function: ``name(x, labels, acc, n0)`` holding a loop, returning ``acc,
    n0`` (the loop runs in a frame between forward's and the loop), or ``name(x, labels, h,
    acc)`` holding branches, returning ``h, acc`` from each of its sides (a value one
    decision leaves alike on both sides, another changes)."""

    name: str
    body: list[Stmt]
    params: str = "x, labels, acc, n0"
    returns: str = "acc, n0"

    def render(self) -> list[str]:
        lines = [f"def {self.name}({self.params}):"]
        lines += [line for s in self.body for line in s.render(1)] or ["    pass"]
        lines.append(f"    return {self.returns}")
        return lines


@dataclass
class Program:
    """A generated model: its statements, helpers, layers and what forward returns."""

    seed: int
    stmts: list[Stmt]
    helpers: list[Helper] = field(default_factory=list)
    layers: int = 0
    layer_threshold: float = 0.0
    returns: list[str] = field(default_factory=list)

    def features(self) -> set[str]:
        found = {s.tag for top in self.stmts for s in top.walk() if s.tag}
        found |= {s.tag for h in self.helpers for top in h.body for s in top.walk() if s.tag}
        if self.layers:
            found.add("layers")
        if self.helpers:
            found.add("helper")
        return found

    def render(self) -> str:
        out = [
            f'"""A generated control-flow program (seed {self.seed})."""',
            "import torch",
            "from torch import nn",
            "",
            "",
        ]
        for helper in self.helpers:
            out += helper.render() + ["", ""]
        if self.layers:
            out += [
                "class Layer(nn.Module):",
                "    def __init__(self, k):",
                "        super().__init__()",
                "        self.scale = nn.Parameter(torch.tensor(0.5 + 0.25 * k))",
                "",
                "    def forward(self, h):",
                f"        if h.mean() > {self.layer_threshold}:",
                "            h = h * self.scale",
                "        else:",
                "            h = h - self.scale",
                "        return h",
                "",
                "",
            ]
        out += [
            "class Model(nn.Module):",
            "    def __init__(self):",
            "        super().__init__()",
            f"        self.w = nn.Parameter(torch.linspace(-1.0, 1.0, {N}))",
            f"        self.layers = nn.ModuleList([Layer(k) for k in range({self.layers})])" if self.layers else "",
            "        self.steps = 0",
            "",
            "    def forward(self, x, labels):",
            "        h = x * self.w",
            "        acc = x.new_zeros(())",
            "        n0, n1, f0, b0, b1, bad = 0, 0, 0.0, False, False, False",
            "        items = []",
            "        last = None",
        ]
        out += [line for s in self.stmts for line in s.render(2)]
        out.append("        return " + (" + ".join(["h", *self.returns])))
        out += [
            "",
            "",
            "def make_model():",
            "    torch.manual_seed(0)",
            "    return Model()",
            "",
            "",
            "EXAMPLE = (",
            "    torch.tensor([0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.5, -0.3]),",
            "    torch.tensor([0, 1, 2, 0, 1, 2, -1, 0]),",
            ")",
        ]
        return "\n".join(out) + "\n"

    def without(self, path: tuple[int, ...]) -> Program:
        """The program without the statement at ``path`` (indices into nested blocks; a
        block index 0 is the body, 1 the else block: ``(3, 0, 1)`` is the second statement
        of the body of the fourth statement)."""
        p = copy.deepcopy(self)
        block = p.stmts
        for k in range(0, len(path) - 1, 2):
            stmt = block[path[k]]
            block = stmt.body if path[k + 1] == 0 else stmt.orelse
        del block[path[-1]]
        return p

    def paths(self) -> list[tuple[int, ...]]:
        """Every statement's path (see ``without``), innermost last."""
        found: list[tuple[int, ...]] = []

        def visit(block: list[Stmt], prefix: tuple[int, ...]) -> None:
            for i, s in enumerate(block):
                found.append((*prefix, i))
                visit(s.body, (*prefix, i, 0))
                visit(s.orelse, (*prefix, i, 1))

        visit(self.stmts, ())
        return found


# -- drawing


def _value(r: random.Random) -> float:
    return round(r.uniform(-0.6, 0.6), 2)


def _f(value: float) -> str:
    """A number as the source writes it: ``0.43``, not ``0.43000000000000005``."""
    return repr(round(value, 3))


def _tensor_condition(r: random.Random) -> str:
    c = _value(r)
    k = r.randrange(CLASSES)
    return r.choice([
        f"x.sum() > {_f(c * 4)}",
        f"h.mean() > {c}",
        f"(h > {_f(abs(c) + 0.4)}).any()",
        f"(labels == {k}).any()",
        f"labels.max() >= {k}",
        f"acc > {_f(c * 3)}",
        f"x.abs().max().item() > {_f(abs(c) + 0.8)}",
    ])


def _python_condition(r: random.Random) -> str:
    return r.choice([f"n0 >= {r.randint(1, 3)}", "b0", "not b0", f"n1 == {r.randint(0, 4)}", f"f0 > {_value(r)}"])


def _loop_header(r: random.Random, var: str = "c") -> tuple[str, str]:
    """The ``for`` line over a data-sized tensor and how a step reads its item (``label`` or
    ``position``)."""
    k = r.randint(0, 2)
    c = _value(r)
    hit = f"torch.greater(nn.functional.one_hot(labels.clamp(min=0), {CLASSES}).T.sum(-1), {r.randint(0, 2)})"
    header, reads = r.choice([
        ("torch.unique(labels[labels >= 0])", "label"),
        (f"torch.unique(labels[labels >= {k}])", "label"),
        (f"labels[x > {c}].unique()", "label"),
        (f"torch.nonzero(x > {c})[:, 0]", "position"),
        (f"{hit}.nonzero()[:, 0]", "label"),
        (f"zip(torch.unique(labels[labels >= {k}]), torch.nonzero(x > {c})[:, 0])", "zip"),
        (f"range(len(torch.nonzero(x > {c})))", "position"),
    ])
    if reads == "zip":  # side by side with positions: as long as the shorter
        return f"for {var}, {var}_at in {header}:", "label"
    return f"for {var} in {header}:", reads


_STEP_KINDS = {
    # kind: (weight in forward, weight in a helper)
    "acc": (6, 6), "h": (3, 0), "count": (4, 3), "flag": (3, 0), "float": (2, 0), "float item": (1, 0),
    "append": (2, 0), "attribute": (1, 0), "last": (1, 0), "break count": (2, 2), "break value": (3, 2),
    "continue value": (2, 2), "return": (1, 0), "branch inside": (1, 1), "branch one side": (2, 1),
    "rebind": (1, 0), "loop inside": (1, 1),
}


def _step_statement(r: random.Random, reads: str, depth: int, helper: bool = False) -> Stmt:
    """One statement of a loop's step (``c`` the item); in a helper only ``x``, ``labels``,
    ``acc`` and ``n0`` exist."""
    pick = "x[labels == c]" if reads == "label" else "x[c]"
    kinds = [k for k in _STEP_KINDS if not (k == "loop inside" and depth >= 2)]
    kind = r.choices(kinds, [_STEP_KINDS[k][1 if helper else 0] for k in kinds])[0]
    a = _value(r)
    if kind == "acc":
        return Stmt(f"acc = acc + {pick}.sum() * {_f(a + 1)}", tag="loop acc")
    if kind == "h":
        mask = "(labels == c)" if reads == "label" else "(torch.arange(8) == c)"
        return Stmt(f"h = h + {mask}.float() * {a}", tag="loop h")
    if kind == "count":
        return Stmt(r.choice(["n0 += 1", "n0 = n0 + 1"] if helper else ["n0 += 1", f"n1 = n1 + {r.randint(1, 3)}", "n0 = n0 + 1"]), tag="counter")
    if kind == "flag":
        return Stmt(r.choice(["b0 = True", "b1 = not b1"]), tag="flag")
    if kind == "float":
        return Stmt(f"f0 = f0 * 0.5 + {a}", tag="float")
    if kind == "float item":
        return Stmt(f"f0 = f0 + {pick}.sum().item()", tag="float item")
    if kind == "append":
        return Stmt(f"items.append({pick}.sum())", tag="list")
    if kind == "attribute":
        return Stmt("self.steps += 1", tag="attribute")
    if kind == "last":
        return Stmt("last = c", tag="last item")
    if kind == "break count":
        return Stmt(f"if n0 >= {r.randint(1, 3)}:", [Stmt("break")], tag="break")
    if kind == "break value":  # after changing a value or a number, or on the else side
        before = r.choice([[], [], [Stmt(f"acc = acc + {pick}.sum() * 2")], [Stmt("n0 += 1")]]
                          + ([[Stmt("b0 = True")], [Stmt("h = h * 0.5")]] if not helper else []))
        if r.random() < 0.3:
            return Stmt(f"if {pick}.sum() <= {_f(a + 0.5)}:", [Stmt("acc = acc + 0.25")], [*before, Stmt("break")],
                        tag="break on value")
        return Stmt(f"if {pick}.sum() > {_f(a + 0.5)}:", [*before, Stmt("break")], tag="break on value")
    if kind == "continue value":
        return Stmt(f"if {pick}.sum() < {a}:", [Stmt("continue")], tag="continue")
    if kind == "return":
        return Stmt(f"if acc > {_f(a * 3 + 1)}:", [Stmt("return h * 2 + acc")], tag="return in loop")
    if kind == "branch inside":
        return Stmt(f"if {pick}.sum() > {a}:", [Stmt("acc = acc + 1.0")], [Stmt("acc = acc - 0.5")], tag="branch in loop")
    if kind == "branch one side":  # a value or a number only one side changes
        change = r.choice([f"acc = acc + {pick}.sum()", f"h = h * {_f(abs(a) + 0.5)}", "n0 += 1", "b0 = True"]
                          if not helper else [f"acc = acc + {pick}.sum()", "n0 += 1"])
        return Stmt(f"if {pick}.sum() > {a}:", [Stmt(change)], tag="branch one side in loop")
    if kind == "rebind":  # no op of the step makes what the name holds after it
        return Stmt(r.choice(["h = x", "acc = h.sum()" if r.random() < 0.5 else "h = x * 1.0"]), tag="rebind")
    header, _ = _loop_header(r, "d")
    return Stmt(header, [Stmt("acc = acc + d * 0.1")], tag="loop in loop")


def _fixed_step_statement(r: random.Random) -> Stmt:
    """One statement of a step of ``for k in range(...)`` (``k`` the step's number)."""
    a = _value(r)
    kind = r.choice(["continue", "continue", "break", "branch", "branch count", "tensor", "count", "break count"])
    if kind == "continue":
        return Stmt(f"if {r.choice(['h[k]', 'x[k]', 'acc'])} < {a}:", [Stmt("continue")], tag="step continue")
    if kind == "break":
        return Stmt(f"if (labels == k).sum() > {r.randint(0, 2)}:", [Stmt("break")], tag="step break")
    if kind == "branch":
        return Stmt("if (labels == k).any():", [Stmt(f"acc = acc + x[labels == k].sum() * {_f(a + 1)}")],
                    [Stmt(f"h = h * {_f(abs(a) + 0.5)}")], tag="step branch")
    if kind == "branch count":  # a number only one side changes
        return Stmt(f"if h[k] > {a}:", [Stmt(r.choice(["n0 += 1", "b0 = True", f"f0 = f0 + {a}"]))], tag="step branch state")
    if kind == "tensor":
        return Stmt(r.choice([f"h = h + (labels == k).float() * {a}", f"acc = acc + h[k] * {a}"]), tag="step tensor")
    if kind == "count":
        return Stmt("n1 = n1 + 1", tag="step count")
    return Stmt(f"if n0 >= {r.randint(1, 2)}:", [Stmt("break")], tag="step break count")


def _statement(r: random.Random, depth: int, helpers: list[Helper]) -> Stmt:
    choices = [
        ("tensor", 4), ("python", 2), ("branch", 5 if depth < 3 else 1), ("loop", 5 if depth < 3 else 0),
        ("fixed loop", 1 if depth < 2 else 0),
        ("stored check", 2), ("check", 1), ("raise stored", 2), ("early return", 1 if depth else 2),
        ("python branch", 2), ("helper", 1 if depth < 2 else 0), ("branch helper", 1 if depth < 2 else 0),
    ]
    kind = r.choices([k for k, _ in choices], [w for _, w in choices])[0]
    a = _value(r)
    if kind == "tensor":
        return Stmt(r.choice([
            f"h = h * {_f(a + 1)} + {a}", "h = torch.tanh(h) + x", f"acc = acc + h.sum() * {a}", "h = h + acc",
            f"acc = acc * {_f(abs(a) + 0.5)}",
        ]), tag="tensor")
    if kind == "python":
        return Stmt(r.choice(["n0 += 1", "b0 = not b0", f"f0 = f0 + {a}", f"n1 = n1 * 2 + {r.randint(0, 2)}"]), tag="python")
    if kind == "branch":
        body = [_statement(r, depth + 1, helpers) for _ in range(r.randint(1, 2))]
        orelse = [_statement(r, depth + 1, helpers) for _ in range(r.randint(0, 2))]
        return Stmt(f"if {_tensor_condition(r)}:", body, orelse, tag="branch")
    if kind == "python branch":
        body = [_statement(r, depth + 1, helpers) for _ in range(r.randint(1, 2))]
        return Stmt(f"if {_python_condition(r)}:", body, tag="python branch")
    if kind == "fixed loop":
        body = [_fixed_step_statement(r) for _ in range(r.randint(1, 2))]
        return Stmt(f"for k in range({r.randint(2, 3)}):", body, tag="fixed loop")
    if kind == "loop":
        header, reads = _loop_header(r)
        body = [_step_statement(r, reads, depth + 1) for _ in range(r.randint(1, 3))]
        if r.random() < 0.15:  # ``for ... else``: runs only where no step breaks
            orelse = [Stmt(r.choice(["n1 = n1 + 5", "f0 = 2.0", "h = h * 0.5"]), tag="loop else")]
            return Stmt(header, body, orelse, tag="loop")
        return Stmt(header, body, tag="loop")
    if kind == "stored check":
        return Stmt(f"bad = bad or bool((x < {_f(-abs(a) - 1.15)}).any())", tag="stored check")  # the example holds -1.1
    if kind == "check":
        return Stmt(f"if (x > {_f(abs(a) + 1.4)}).any():", [Stmt('raise ValueError("x too large")')], tag="check")
    if kind == "raise stored":
        return Stmt("if bad:", [Stmt('raise ValueError("negative input")')], tag="raise stored")
    if kind == "early return":
        return Stmt(f"if {_tensor_condition(r)}:", [Stmt("return h - acc")], tag="early return")
    name = f"helper_{len(helpers)}"
    if kind == "branch helper":
        scaled = Stmt(f"if {_tensor_condition(r)}:", [Stmt(f"h = h * {_f(a + 1)}")], [Stmt(f"h = h + {_f(a)}")], tag="branch")
        early = Stmt(f"if {_tensor_condition(r)}:", [Stmt("return h, acc")], tag="early return")
        tail = Stmt(f"acc = acc * {_f(abs(a) + 0.5)} + 1.0", tag="tensor")
        helpers.append(Helper(name, [scaled, early, tail], "x, labels, h, acc", "h, acc"))
        return Stmt(f"h, acc = {name}(x, labels, h, acc)", tag="branch helper call")
    header, reads = _loop_header(r)
    body = [_step_statement(r, reads, 1, helper=True) for _ in range(r.randint(1, 2))]
    helpers.append(Helper(name, [Stmt(header, body, tag="loop")]))
    return Stmt(f"acc, n0 = {name}(x, labels, acc, n0)", tag="helper call")


_READS = ["acc", "n0", "n1", "f0", "(1.0 if b0 else 0.0)", "(2.0 if b1 else 0.0)", "len(items)",
          "(torch.stack(items).sum() if items else 0.0)", "(0.0 if last is None else last * 1.0)", "self.steps"]


def generate(seed: int) -> Program:
    """The program of ``seed``: the same source for the same seed."""
    r = random.Random(seed)
    helpers: list[Helper] = []
    stmts = [_statement(r, 0, helpers) for _ in range(r.randint(2, 6))]
    layers = r.choice([0, 0, 0, 2, 3])
    if layers:
        stmts.insert(r.randrange(len(stmts) + 1), Stmt("for layer in self.layers:", [Stmt("h = layer(h)")], tag="layers"))
    returns = r.sample(_READS, r.randint(1, 4))
    return Program(seed, stmts, helpers, layers, _value(r), returns)
