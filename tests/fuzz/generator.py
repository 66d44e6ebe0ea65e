"""Random nn.Module programs as Python source, shape-correct by construction.

``generate(seed)`` builds a ``Program``: inputs (tensors and nested tuples, lists and
dicts of tensors, some passed by keyword), a forward body of statements, outputs in a
random pytree, and a ``dynamic_shapes`` spec. Every tensor's shape is tracked as
``Size`` polynomials in the program's size symbols, so each operation is drawn from
those its operands' shapes allow (broadcasting only equal sizes or a static 1, slicing
only what is long enough). ``Program.render()`` writes a self-contained file: the module,
``make_model()``, ``make_inputs(sizes, seed)``, ``dynamic_shapes()`` and the sizes the
runner checks, ready to paste into a bug report.

The structure stays editable after generation: the shrinker removes statements (with
everything that depends on them), outputs and inputs, and loosens the spec, then
renders again.
"""

from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass, field

from .shapes import Size

__all__ = ["Program", "generate"]


@dataclass
class Symbol:
    """A size symbol: its example value, the smallest value the body needs, whether
    the body fixes it (so a dynamic spec for it is wrong), and its spec."""

    name: str
    example: int
    req_min: int = 2
    forced_static: bool = False
    mode: str = "static"  # dim | auto | dynamic | static
    lo: int | None = None
    hi: int | None = None


@dataclass
class Var:
    name: str
    shape: list
    root: str  # the var whose storage this one views (itself when freshly computed)
    contig: bool = True
    expanded: bool = False
    grad_leaf: bool = False  # a parameter or a view of one: no in-place
    dtype: str = "f"


@dataclass
class Leaf:
    """One tensor of the inputs: its local name in forward and how forward reaches it."""

    name: str
    access: str  # `x1[0]`, `d["a"]["p"]`
    path: tuple  # keys below the argument, for the spec
    shape: list


@dataclass
class Arg:
    name: str
    kind: str  # tensor | tuple | list | dict | nested
    leaves: list
    keyword: bool = False


@dataclass
class Stmt:
    lines: list
    defines: str | None
    uses: set
    attrs: set = field(default_factory=set)
    helpers: set = field(default_factory=set)
    tag: str = ""


@dataclass
class Program:
    seed: int
    symbols: dict
    args: list
    attrs: dict  # name -> (lines in __init__, attrs it needs, helpers it needs)
    helpers: dict  # name -> source lines at module level
    stmts: list
    outputs: list  # var names
    out_kind: str  # single | tuple | list | dict | nested
    leaf_specs: dict  # leaf name -> {dim: spec code}
    dim_decls: dict  # Dim variable name -> declaration code
    check_sizes: list  # [{symbol: value}]
    spec_enabled: bool = True
    list_form: set = field(default_factory=set)
    notes: list = field(default_factory=list)

    # ------------------------------------------------------------------ rendering
    def leaves(self) -> list[Leaf]:
        return [leaf for arg in self.args for leaf in arg.leaves]

    def features(self) -> set[str]:
        """Tags of what the program exercises (for the summary)."""
        tags = {s.tag for s in self.stmts if s.tag}
        if self.is_dynamic():
            tags.add("dynamic")
        return tags

    def is_dynamic(self) -> bool:
        return self.spec_enabled and any(
            spec not in ("None", "Dim.STATIC") and not spec.isdigit()
            for specs in self.leaf_specs.values()
            for spec in specs.values()
        )

    def render(self) -> str:
        used_attrs: set[str] = set()
        used_helpers: set[str] = set()
        pending = [a for s in self.stmts for a in s.attrs]
        used_helpers |= {h for s in self.stmts for h in s.helpers}
        while pending:
            name = pending.pop()
            if name in used_attrs:
                continue
            used_attrs.add(name)
            _, deps, helpers = self.attrs[name]
            pending.extend(deps)
            used_helpers |= set(helpers)
        out = [
            f'"""Fuzz program (tests/fuzz, seed {self.seed})."""',
            "import torch",
            "from torch import nn",
            "from torch.export import Dim",
            "",
        ]
        for name, lines in self.helpers.items():
            if name in used_helpers:
                out += lines + [""]
        out += ["", "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
        for name, (lines, _, _) in self.attrs.items():
            if name in used_attrs:
                out += ["        " + line for line in lines]
        positional = [a.name for a in self.args if not a.keyword]
        keyword = [f"{a.name}=None" for a in self.args if a.keyword]
        params = ", ".join(["self"] + positional + (["*"] + keyword if keyword else []))
        out += ["", f"    def forward({params}):"]
        used_vars = {u for s in self.stmts for u in s.uses} | set(self.outputs)
        for arg in self.args:
            for leaf in arg.leaves:
                if leaf.access != leaf.name and leaf.name in used_vars:
                    out.append(f"        {leaf.name} = {leaf.access}")
        for stmt in self.stmts:
            out += ["        " + line for line in stmt.lines]
        out.append(f"        return {self._render_outputs()}")
        out += ["", ""]
        out += self._render_inputs()
        out += ["", "", "def make_model():", "    torch.manual_seed(0)", "    return Model()", "", ""]
        out += self._render_spec()
        out += [
            "",
            "",
            'if __name__ == "__main__":',
            "    import exporter",
            "",
            "    args, kwargs = make_inputs()",
            "    ep = exporter.export(make_model(), args, kwargs, dynamic_shapes=dynamic_shapes())",
            "    print(ep)",
            "",
        ]
        return "\n".join(out)

    def _render_outputs(self) -> str:
        names = list(self.outputs)
        if self.out_kind == "single" and len(names) == 1:
            return names[0]
        if self.out_kind == "list":
            return "[" + ", ".join(names) + "]"
        if self.out_kind == "dict":
            return "{" + ", ".join(f'"o{i}": {n}' for i, n in enumerate(names)) + "}"
        if self.out_kind == "nested" and len(names) >= 2:
            head, rest = names[0], names[1:]
            return "{" + f'"first": {head}, "rest": (' + ", ".join(rest) + ",)}"
        return "(" + ", ".join(names) + ",)"

    def _render_inputs(self) -> list[str]:
        syms = sorted(self.symbols)
        sizes = {s: self.symbols[s].example for s in syms}
        out = [
            f"SIZES = {sizes!r}",
            f"CHECK_SIZES = {self.check_sizes!r}",
            "",
            "",
            "def make_inputs(sizes=SIZES, seed=0):",
            "    g = torch.Generator().manual_seed(seed)",
        ]
        for s in syms:
            out.append(f'    {s} = sizes["{s}"]')

        def tensor(leaf):
            return f"torch.randn({', '.join(_size_code(d) for d in leaf.shape)}, generator=g)"

        positional, keyword = [], []
        for arg in self.args:
            leaves = arg.leaves
            if arg.kind == "tensor":
                value = tensor(leaves[0])
            elif arg.kind == "tuple":
                value = "(" + ", ".join(tensor(lf) for lf in leaves) + ",)"
            elif arg.kind == "list":
                value = "[" + ", ".join(tensor(lf) for lf in leaves) + "]"
            elif arg.kind == "dict":
                value = "{" + ", ".join(f'"{lf.path[0]}": {tensor(lf)}' for lf in leaves) + "}"
            else:  # nested: {"p": (t, t), "q": t}
                value = (
                    '{"p": (' + ", ".join(tensor(lf) for lf in leaves[:-1]) + ',), "q": ' + tensor(leaves[-1]) + "}"
                )
            (keyword if arg.keyword else positional).append((arg.name, value))
        out.append("    args = (" + "".join(f"{v}, " for _, v in positional) + ")")
        out.append("    kwargs = {" + ", ".join(f'"{n}": {v}' for n, v in keyword) + "}")
        out.append("    return args, kwargs")
        return out

    def _render_spec(self) -> list[str]:
        out = ["def dynamic_shapes():"]
        if not self.spec_enabled or not any(self.leaf_specs.values()):
            return out + ["    return None"]
        entries = [f'"{arg.name}": {self._arg_spec(arg)}' for arg in self.args]
        text = " ".join(entries)
        for d, decl in self.dim_decls.items():
            if re.search(rf"\b{d}\b", text):
                out.append(f"    {d} = {decl}")
        out.append("    return {" + ", ".join(entries) + "}")
        return out

    def _arg_spec(self, arg: Arg) -> str:
        def one(leaf):
            specs = self.leaf_specs.get(leaf.name) or {}
            if not specs:
                return "None"
            if leaf.name in self.list_form:
                return "[" + ", ".join(specs.get(d, "None") for d in range(len(leaf.shape))) + "]"
            return "{" + ", ".join(f"{d}: {c}" for d, c in sorted(specs.items())) + "}"

        leaves = arg.leaves
        if arg.kind == "tensor":
            return one(leaves[0])
        if arg.kind == "tuple":
            return "(" + ", ".join(one(lf) for lf in leaves) + ",)"
        if arg.kind == "list":
            return "[" + ", ".join(one(lf) for lf in leaves) + "]"
        if arg.kind == "dict":
            return "{" + ", ".join(f'"{lf.path[0]}": {one(lf)}' for lf in leaves) + "}"
        return '{"p": (' + ", ".join(one(lf) for lf in leaves[:-1]) + ',), "q": ' + one(leaves[-1]) + "}"

    # ------------------------------------------------------------------ editing
    def without_stmt(self, index: int) -> Program:
        """A copy without statement ``index`` and everything that depends on what it defines."""
        prog = copy.deepcopy(self)
        removed = set()
        stmt = prog.stmts.pop(index)
        if stmt.defines:
            removed.add(stmt.defines)
        prog._cascade(removed)
        return prog

    def without_arg(self, index: int) -> Program:
        prog = copy.deepcopy(self)
        arg = prog.args.pop(index)
        removed = {lf.name for lf in arg.leaves}
        for lf in arg.leaves:
            prog.leaf_specs.pop(lf.name, None)
        prog._cascade(removed)
        return prog

    def _cascade(self, removed: set) -> None:
        kept = []
        for stmt in self.stmts:
            if stmt.uses & removed:
                if stmt.defines:
                    removed.add(stmt.defines)
            else:
                kept.append(stmt)
        self.stmts = kept
        self.outputs = [o for o in self.outputs if o not in removed]
        if not self.outputs:
            defined = [s.defines for s in self.stmts if s.defines]
            leaves = [lf.name for lf in self.leaves()]
            self.outputs = [(defined or leaves or ["None"])[-1]]


# ---------------------------------------------------------------------- helpers


def _size_code(size: Size) -> str:
    return repr(size).replace(" ", "") if not size.is_static else str(size.static_value)


def _broadcasts_to(small: list, big: list) -> bool:
    if len(small) > len(big):
        return False
    for a, b in zip(reversed(small), reversed(big)):
        if not (a == b or (a.is_static and a.static_value == 1)):
            return False
    return True


UNARY = ["torch.sin({a})", "torch.tanh({a})", "torch.relu({a})", "torch.sigmoid({a})", "-{a}", "{a}.abs()",
         "{a} * 0.5 + 1.0", "torch.clamp({a}, -0.5, 0.5)", "{a}.clone()"]


class _Gen:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.seed = seed
        self.symbols: dict[str, Symbol] = {}
        self.vars: dict[str, Var] = {}
        self.order: list[str] = []
        self.sym_source: dict[str, tuple[str, int]] = {}
        self.attrs: dict = {}
        self.helpers: dict = {}
        self.stmts: list[Stmt] = []
        self.counter = 0
        self.feature = self.rng.choice([3, 4, 5, 6])
        self.notes: list[str] = []
        self.list_form: set[str] = set()
        self._inputs: set[str] = set()

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -------------------------------------------------------------- inputs
    def make_inputs(self) -> list[Arg]:
        rng = self.rng
        n_sym = rng.choice([0, 1, 1, 2, 2, 2, 3])
        for i in range(n_sym):
            self.symbols[f"s{i}"] = Symbol(f"s{i}", rng.randint(2, 7))
        args = []
        n_args = rng.choice([1, 2, 2, 3, 3])
        for i in range(n_args):
            kind = rng.choice(["tensor"] * 5 + ["tuple", "list", "dict", "nested"])
            n_leaves = {"tensor": 1, "tuple": 2, "list": 2, "dict": 2, "nested": 3}[kind]
            name = f"x{i}" if kind == "tensor" else rng.choice(["xs", "pair", "inputs", "feats"]) + str(i)
            leaves = []
            for j in range(n_leaves):
                if kind == "tensor":
                    lname, access, path = name, name, ()
                elif kind in ("tuple", "list"):
                    lname, access, path = f"{name}_{j}", f"{name}[{j}]", (j,)
                elif kind == "dict":
                    key = "ab"[j]
                    lname, access, path = f"{name}_{key}", f'{name}["{key}"]', (key,)
                else:
                    if j < 2:
                        lname, access, path = f"{name}_p{j}", f'{name}["p"][{j}]', ("p", j)
                    else:
                        lname, access, path = f"{name}_q", f'{name}["q"]', ("q",)
                leaves.append(Leaf(lname, access, path, self.random_shape()))
            keyword = i > 0 and i == n_args - 1 and rng.random() < 0.3
            args.append(Arg(name, kind, leaves, keyword))
        # Every symbol must appear plainly somewhere; derived sizes need their root first.
        for arg in args:
            for leaf in arg.leaves:
                for d, size in enumerate(leaf.shape):
                    syms = size.symbols
                    if len(syms) == 1 and size == Size(next(iter(syms))):
                        self.sym_source.setdefault(next(iter(syms)), (leaf.name, d))
                for d, size in enumerate(leaf.shape):
                    for s in size.symbols:
                        if s not in self.sym_source:
                            leaf.shape[d] = Size(s)
                            self.sym_source[s] = (leaf.name, d)
                self.vars[leaf.name] = Var(leaf.name, list(leaf.shape), leaf.name)
                self.order.append(leaf.name)
        for s in list(self.symbols):
            if s not in self.sym_source:
                del self.symbols[s]
        return args

    def random_shape(self) -> list:
        rng = self.rng
        rank = rng.choice([1, 2, 2, 3, 3, 4])
        shape = []
        syms = list(self.symbols)
        for d in range(rank):
            last = d == rank - 1
            if last and rng.random() < 0.55:
                shape.append(Size(self.feature))
            elif syms and rng.random() < 0.65:
                s = rng.choice(syms)
                r = rng.random()
                shape.append(Size(s) * 2 if r < 0.08 else Size(s) + 1 if r < 0.14 else Size(s))
            else:
                shape.append(Size(rng.choice([2, 3, 4, self.feature])))
        return shape

    # -------------------------------------------------------------- body
    def add_var(self, var: Var) -> None:
        self.vars[var.name] = var
        self.order.append(var.name)

    def pick(self, pred=lambda v: True) -> Var | None:
        cands = [self.vars[n] for n in self.order if pred(self.vars[n])]
        if not cands:
            return None
        # Prefer recent values: programs then chain instead of fanning out from the inputs.
        weights = [1.0 + i for i in range(len(cands))]
        return self.rng.choices(cands, weights)[0]

    def lower(self, size: Size) -> int:
        return size.evaluate({s: sym.req_min for s, sym in self.symbols.items()})

    def example(self, size: Size) -> int:
        return size.evaluate({s: sym.example for s, sym in self.symbols.items()})

    def size_expr(self, size: Size, uses: set) -> str | None:
        """Forward-time code for ``size``: an int, or `x.shape[d]` read from an input."""
        if size.is_static:
            return str(size.static_value)
        if len(size.terms) == 1 and size == Size(next(iter(size.symbols))):
            leaf, d = self.sym_source[next(iter(size.symbols))]
            uses.add(leaf)
            return f"{leaf}.shape[{d}]"
        return None

    def emit(self, lines, defines=None, uses=(), attrs=(), helpers=(), tag=""):
        self.stmts.append(Stmt(list(lines), defines, set(uses), set(attrs), set(helpers), tag))

    def add_attr(self, name, lines, deps=(), helpers=()):
        self.attrs[name] = (list(lines), list(deps), list(helpers))

    def operand_for(self, a: Var, uses: set, attrs: set) -> str:
        """Something that broadcasts to ``a``'s shape: a var, a parameter, a constant, a scalar."""
        rng = self.rng
        r = rng.random()
        last_static = a.shape and a.shape[-1].is_static and a.shape[-1].static_value > 1
        if r < 0.45:
            b = self.pick(lambda v: v.name != a.name and v.dtype == "f" and _broadcasts_to(v.shape, a.shape))
            if b is not None:
                uses.add(b.name)
                return b.name
        if r < 0.75 and last_static:
            n = a.shape[-1].static_value
            kind = rng.choice(["param", "buffer", "const"])
            name = self.fresh({"param": "w", "buffer": "buf", "const": "c"}[kind])
            if kind == "param":
                self.add_attr(name, [f"self.{name} = nn.Parameter(torch.randn({n}))"])
            elif kind == "buffer":
                persistent = rng.choice(["True", "False"])
                self.add_attr(name, [f'self.register_buffer("{name}", torch.randn({n}), persistent={persistent})'])
            else:
                self.add_attr(name, [f"self.{name} = torch.randn({n})"])
            attrs.add(name)
            return f"self.{name}"
        if r < 0.8 and a.shape:
            # A symbolic trailing size against a static parameter fixes the symbol.
            size = a.shape[-1]
            if len(size.symbols) == 1 and size == Size(next(iter(size.symbols))):
                sym = self.symbols[next(iter(size.symbols))]
                sym.forced_static = True
                name = self.fresh("w")
                self.add_attr(name, [f"self.{name} = nn.Parameter(torch.randn({sym.example}))"])
                attrs.add(name)
                return f"self.{name}"
        if r < 0.9:
            name = self.fresh("alpha")
            self.add_attr(name, [f"self.{name} = {rng.choice([0.5, 2.0, -1.5, 3])}"])
            attrs.add(name)
            return f"self.{name}"
        return rng.choice(["torch.tensor(2.0)", "1.5", "torch.tensor([0.5])"])

    def step(self) -> bool:
        rng = self.rng
        ops = [
            (self.op_unary, 3), (self.op_binary, 5), (self.op_reduce, 3), (self.op_view, 6),
            (self.op_inplace, 5), (self.op_index_put, 1.5), (self.op_masked_fill, 1.5), (self.op_buffer, 2),
            (self.op_linear, 2), (self.op_sub, 2), (self.op_cat, 1.5), (self.op_cond, 2), (self.op_expand, 1.5),
            (self.op_where, 1), (self.op_size_output, 0.5),
        ]
        op = rng.choices([o for o, _ in ops], [w for _, w in ops])[0]
        return op() is not False

    def op_unary(self):
        a = self.pick(lambda v: v.dtype == "f")
        if a is None:
            return False
        v = self.fresh("v")
        self.emit([f"{v} = " + self.rng.choice(UNARY).format(a=a.name)], v, {a.name}, tag="elementwise")
        self.add_var(Var(v, list(a.shape), v, contig=a.contig, grad_leaf=False))

    def op_binary(self):
        a = self.pick(lambda v: v.dtype == "f")
        if a is None:
            return False
        uses, attrs = {a.name}, set()
        if self.rng.random() < 0.25 and a.shape:
            d = self.rng.randrange(len(a.shape))
            fn = self.rng.choice(["mean", "sum", "amax"])
            other = f"{a.name}.{fn}({d}, keepdim=True)"
        else:
            other = self.operand_for(a, uses, attrs)
        op = self.rng.choice(["+", "-", "*"])
        v = self.fresh("v")
        self.emit([f"{v} = {a.name} {op} {other}"], v, uses, attrs, tag="broadcast")
        self.add_var(Var(v, list(a.shape), v, contig=False))

    def op_reduce(self):
        a = self.pick(lambda v: v.dtype == "f" and len(v.shape) >= 1)
        if a is None:
            return False
        rng = self.rng
        fn = rng.choice(["sum", "mean", "amax"])
        rank = len(a.shape)
        dims = sorted(rng.sample(range(rank), rng.randint(1, min(2, rank))))
        keep = rng.random() < 0.4
        if rng.random() < 0.3:
            dims_code = ", ".join(str(d - rank) for d in dims)
        else:
            dims_code = ", ".join(str(d) for d in dims)
        dims_code = f"({dims_code},)" if len(dims) > 1 else dims_code
        shape = [Size(1) if d in dims else s for d, s in enumerate(a.shape)] if keep else [
            s for d, s in enumerate(a.shape) if d not in dims
        ]
        v = self.fresh("v")
        keep_code = ", keepdim=True" if keep else rng.choice(["", ", keepdim=False"])
        self.emit([f"{v} = {a.name}.{fn}({dims_code}{keep_code})"], v, {a.name}, tag="reduction")
        self.add_var(Var(v, shape, v, contig=a.contig))

    def op_view(self):
        rng = self.rng
        a = self.pick(lambda v: len(v.shape) >= 1 and v.dtype == "f")
        if a is None:
            return False
        rank = len(a.shape)
        shape = list(a.shape)
        uses = {a.name}
        contig = False
        choice = rng.choice(["transpose", "unsqueeze", "slice", "narrow", "select", "flatten", "view", "unflatten"])
        if choice == "transpose" and rank >= 2:
            i, j = rng.sample(range(rank), 2)
            code = rng.choice([f"{a.name}.transpose({i}, {j})", f"{a.name}.swapaxes({i}, {j})"])
            shape[i], shape[j] = shape[j], shape[i]
        elif choice == "unsqueeze":
            d = rng.randint(0, rank)
            code = f"{a.name}.unsqueeze({d})"
            shape.insert(d, Size(1))
            contig = a.contig
        elif choice == "slice":
            d = rng.randrange(rank)
            if self.lower(shape[d]) < 2:
                return False
            idx = ["..."] if d == rank - 1 and rng.random() < 0.5 else [":"] * d
            if rng.random() < 0.5:
                idx.append("1:")
                shape[d] = shape[d] + (-1)
            else:
                k = rng.randint(1, min(self.lower(shape[d]), 3))
                idx.append(f":{k}")
                shape[d] = Size(k)
            code = f"{a.name}[{', '.join(idx)}]"
        elif choice == "narrow":
            d = rng.randrange(rank)
            size = shape[d]
            plain = len(size.symbols) == 1 and size == Size(next(iter(size.symbols)))
            if not (size.is_static or plain):
                return False
            start = rng.randint(0, 1)
            k = rng.randint(1, max(1, self.example(size) - start))
            if start + k > self.example(size):
                return False
            if plain:
                sym = self.symbols[next(iter(size.symbols))]
                sym.req_min = max(sym.req_min, start + k)
            code = f"{a.name}.narrow({d}, {start}, {k})"
            shape[d] = Size(k)
        elif choice == "select":
            d = rng.randrange(rank)
            code = f"{a.name}.select({d}, 0)" if rng.random() < 0.5 else f"{a.name}[{', '.join([':'] * d + ['0'])}]"
            shape.pop(d)
        elif choice == "flatten" and rank >= 2:
            d = rng.randrange(rank - 1)
            code = f"{a.name}.flatten({d}, {d + 1})" if rng.random() < 0.5 else f"{a.name}.reshape(-1)"
            if code.endswith("reshape(-1)"):
                total = Size(1)
                for s in shape:
                    total = total * s
                shape = [total]
            else:
                shape[d:d + 2] = [shape[d] * shape[d + 1]]
        elif choice == "view" and rank >= 2:
            method = "view" if a.contig else "reshape"
            first = self.size_expr(shape[0], uses)
            if first is None:
                first = f"{a.name}.shape[0]"
            rest = Size(1)
            for s in shape[1:]:
                rest = rest * s
            code = f"{a.name}.{method}({first}, -1)"
            shape = [shape[0], rest]
            contig = a.contig
        elif choice == "unflatten":
            cands = [d for d, s in enumerate(shape) if s.is_static and s.static_value % 2 == 0 and s.static_value > 2]
            if not cands:
                return False
            d = rng.choice(cands)
            code = f"{a.name}.unflatten({d}, (2, -1))"
            shape[d:d + 1] = [Size(2), Size(shape[d].static_value // 2)]
            contig = a.contig
        else:
            return False
        v = self.fresh("v")
        self.emit([f"{v} = {code}"], v, uses, tag="view")
        self.add_var(Var(v, shape, a.root, contig=contig, expanded=a.expanded, grad_leaf=a.grad_leaf, dtype=a.dtype))

    def op_expand(self):
        a = self.pick(lambda v: v.dtype == "f" and any(s == Size(1) for s in v.shape))
        if a is None:
            return False
        d = next(i for i, s in enumerate(a.shape) if s == Size(1))
        target = self.rng.choice([Size(self.feature)] + [Size(s) for s in self.symbols])
        uses = {a.name}
        code = self.size_expr(target, uses)
        sizes = ["-1"] * len(a.shape)
        sizes[d] = code
        v = self.fresh("v")
        shape = list(a.shape)
        shape[d] = target
        self.emit([f"{v} = {a.name}.expand({', '.join(sizes)})"], v, uses, tag="expand")
        self.add_var(Var(v, shape, a.root, contig=False, expanded=True, grad_leaf=a.grad_leaf, dtype=a.dtype))

    def inplace_target(self) -> Var | None:
        return self.pick(lambda v: v.dtype == "f" and not v.expanded and not v.grad_leaf and len(v.shape) >= 1)

    def op_inplace(self):
        a = self.inplace_target()
        if a is None:
            return False
        rng = self.rng
        uses, attrs = {a.name}, set()
        kind = rng.choice(["add_", "mul_", "copy_", "sub_"])
        b = self.pick(
            lambda v: v.dtype == "f" and v.root != a.root and _broadcasts_to(v.shape, a.shape)
            and not (self.vars[v.root].root == a.root)
        )
        if b is not None and rng.random() < 0.6:
            # Reading a tensor that aliases the target would be undefined: only other storage.
            other = b.name
            uses.add(b.name)
        else:
            other = rng.choice(["2.0", "0.5", "torch.tensor(1.5)"]) if kind != "copy_" else f"torch.zeros_like({a.name})"
        if kind == "copy_" and other in ("2.0", "0.5"):
            other = f"torch.full_like({a.name}, {other})"
        is_input = a.root in self._inputs
        self.emit([f"{a.name}.{kind}({other})"], None, uses, attrs, tag="input mutation" if is_input else "in-place")

    def op_index_put(self):
        a = self.pick(
            lambda v: v.dtype == "f" and not v.expanded and not v.grad_leaf and len(v.shape) >= 1
            and self.lower(v.shape[0]) >= 2
        )
        if a is None:
            return False
        rng = self.rng
        attrs = set()
        if rng.random() < 0.5:
            name = self.fresh("idx")
            self.add_attr(name, [f"self.{name} = torch.tensor([0, 1])"])
            attrs.add(name)
            idx = f"self.{name}"
        else:
            idx = "torch.tensor([1, 0])"
        if rng.random() < 0.5:
            line = f"{a.name}.index_put_(({idx},), torch.tensor(-1.0))"
        else:
            line = f"{a.name}[{idx}] = {rng.choice(['0.25', 'torch.tensor(3.0)'])}"
        self.emit([line], None, {a.name}, attrs, tag="index_put")

    def op_masked_fill(self):
        a = self.inplace_target()
        if a is None:
            return False
        self.emit([f"{a.name}.masked_fill_({a.name} > 0.5, {self.rng.choice(['0.0', '-1.0'])})"], None, {a.name},
                  tag="masked_fill")

    def op_buffer(self):
        rng = self.rng
        f = self.feature
        a = self.pick(lambda v: v.dtype == "f" and v.shape and v.shape[-1] == Size(f))
        name = self.fresh("buf")
        persistent = rng.choice(["True", "False"])
        if a is not None and rng.random() < 0.7:
            self.add_attr(name, [f'self.register_buffer("{name}", torch.zeros({f}), persistent={persistent})'])
            dims = tuple(range(len(a.shape) - 1))
            mean = f"{a.name}.detach().mean({dims})" if dims else f"{a.name}.detach()"
            line = rng.choice([
                f"self.{name}.mul_(0.9).add_({mean} * 0.1)",
                f"self.{name}.copy_({mean})",
                f"self.{name}.add_({mean})",
            ])
            uses = {a.name}
        else:
            self.add_attr(name, [f'self.register_buffer("{name}", torch.zeros(()), persistent={persistent})'])
            line = f"self.{name}.add_(1)"
            uses = set()
        self.emit([line], None, uses, {name}, tag="buffer mutation")
        # The updated buffer is then read like any value (but not written through this name).
        v = self.fresh("v")
        shape = [Size(f)] if "zeros(()" not in self.attrs[name][0][0] else []
        self.emit([f"{v} = self.{name} * 1.0"], v, uses, {name}, tag="buffer mutation")
        self.add_var(Var(v, shape, v))

    def op_linear(self):
        f = self.feature
        a = self.pick(lambda v: v.dtype == "f" and v.shape and v.shape[-1] == Size(f))
        if a is None:
            return False
        rng = self.rng
        existing = [n for n in self.attrs if n.startswith("lin")]
        if existing and rng.random() < 0.5:
            name = rng.choice(existing)
            tag = "submodule reuse"
        else:
            name = self.fresh("lin")
            lines = [f"self.{name} = nn.Linear({f}, {f})"]
            deps = []
            tag = "linear"
            if existing and rng.random() < 0.5:
                tied = rng.choice(existing)
                lines.append(f"self.{name}.weight = self.{tied}.weight")
                deps.append(tied)
                tag = "tied parameters"
            self.add_attr(name, lines, deps)
        v = self.fresh("v")
        self.emit([f"{v} = self.{name}({a.name})"], v, {a.name}, {name}, tag=tag)
        self.add_var(Var(v, list(a.shape), v))

    def op_sub(self):
        f = self.feature
        a = self.pick(lambda v: v.dtype == "f" and v.shape and v.shape[-1] == Size(f))
        if a is None:
            return False
        self.helpers.setdefault("Scale", [
            "class Scale(nn.Module):",
            "    def __init__(self, n):",
            "        super().__init__()",
            "        self.scale = nn.Parameter(torch.ones(n) * 0.5)",
            '        self.register_buffer("shift", torch.linspace(-1, 1, n))',
            "",
            "    def forward(self, x):",
            "        return torch.tanh(x * self.scale) + self.shift",
        ])
        existing = [n for n in self.attrs if n.startswith("scale")]
        if existing and self.rng.random() < 0.6:
            name, tag = self.rng.choice(existing), "submodule reuse"
        else:
            name, tag = self.fresh("scale"), "submodule"
            lines = [f"self.{name} = Scale({f})"]
            if self.rng.random() < 0.3:
                alias = self.fresh("scale")
                lines.append(f"self.{alias} = self.{name}")
                self.add_attr(name, lines, (), ("Scale",))
                v = self.fresh("v")
                self.emit([f"{v} = self.{alias}(self.{name}({a.name}))"], v, {a.name}, {name}, tag="submodule reuse")
                self.add_var(Var(v, list(a.shape), v))
                return
            self.add_attr(name, lines, (), ("Scale",))
        v = self.fresh("v")
        self.emit([f"{v} = self.{name}({a.name})"], v, {a.name}, {name}, tag=tag)
        self.add_var(Var(v, list(a.shape), v, contig=a.contig))

    def op_where(self):
        a = self.pick(lambda v: v.dtype == "f")
        if a is None:
            return False
        uses, attrs = {a.name}, set()
        other = self.operand_for(a, uses, attrs)
        if other[0].isdigit():
            other = f"torch.tensor({other})"
        v = self.fresh("v")
        self.emit([f"{v} = torch.where({a.name} > 0, {a.name}, {other})"], v, uses, attrs, tag="broadcast")
        self.add_var(Var(v, list(a.shape), v, contig=False))

    def op_size_output(self):
        a = self.pick(lambda v: v.dtype == "f" and len(v.shape) >= 1)
        if a is None:
            return False
        d = self.rng.randrange(len(a.shape))
        v = self.fresh("n")
        self.emit([f"{v} = {a.name}.shape[{d}] * 2"], v, {a.name}, tag="int output")
        self.add_var(Var(v, [], v, dtype="i"))

    def op_cat(self):
        a = self.pick(lambda v: v.dtype == "f" and len(v.shape) >= 1)
        if a is None:
            return False
        b = self.pick(lambda v: v.dtype == "f" and v.shape == a.shape)
        d = self.rng.randrange(len(a.shape))
        shape = list(a.shape)
        shape[d] = shape[d] + shape[d]
        v = self.fresh("v")
        self.emit([f"{v} = torch.cat([{a.name}, {b.name}], dim={d})"], v, {a.name, b.name}, tag="cat")
        self.add_var(Var(v, shape, v, contig=a.contig and b.contig))

    def op_cond(self):
        a = self.pick(lambda v: v.dtype == "f" and len(v.shape) >= 1)
        if a is None:
            return False
        rng = self.rng
        # Operands of a higher-order op may not alias one another.
        b = self.pick(lambda v: v.dtype == "f" and v.root != a.root and _broadcasts_to(v.shape, a.shape))
        b_code = b.name if b is not None else f"{a.name}.mean()"
        k = self.fresh("")
        tname, fname = f"true_fn{k}", f"false_fn{k}"
        self.helpers[tname] = [f"def {tname}(a, b):", "    return " + rng.choice(
            ["torch.sin(a) + b", "a * 2.0 - b", "(a + b).relu()", "a.cos() * b"])]
        self.helpers[fname] = [f"def {fname}(a, b):", "    return " + rng.choice(
            ["a - b", "torch.tanh(a) * b", "a + b.abs()", "a.clone() + 1.0"])]
        uses = {a.name} | ({b.name} if b is not None else set())
        size = a.shape[0]
        code = self.size_expr(size, uses) if not size.is_static else None
        if code is not None and rng.random() < 0.5:
            pred = f"{code} > {self.example(size)}"
        else:
            pred = f"{a.name}.sum() > 0"
        v = self.fresh("v")
        self.emit([f"{v} = torch.cond({pred}, {tname}, {fname}, ({a.name}, {b_code}))"], v, uses,
                  helpers={tname, fname}, tag="cond")
        self.add_var(Var(v, list(a.shape), v, contig=a.contig and (b is None or b.contig)))

    # -------------------------------------------------------------- spec
    def make_spec(self, args: list[Arg]) -> tuple[dict, dict]:
        rng = self.rng
        decls: dict[str, str] = {}
        for sym in self.symbols.values():
            if sym.forced_static:
                sym.mode = rng.choice(["static", "static", "auto", "auto", "auto", "dim", "dynamic"])
            else:
                sym.mode = rng.choice(["dim", "dim", "dim", "auto", "dynamic", "static"])
            if sym.mode == "dim":
                lo = rng.choice([None, sym.req_min, rng.randint(sym.req_min, sym.example)])
                if rng.random() < 0.05:
                    lo = rng.choice([0, 1])
                elif rng.random() < 0.08 and sym.req_min > 2:
                    lo = 2  # narrower than the body needs: a wrong spec
                hi = rng.choice([None, sym.example + rng.randint(0, 24)])
                if rng.random() < 0.04:
                    hi = sym.example - 1  # excludes the example: a wrong spec
                if hi is not None and lo is not None and hi <= lo:
                    hi = lo + 1  # torch's Dim refuses an empty or one-point range
                sym.lo, sym.hi = lo, hi
                parts = [f'"{sym.name}"'] + ([f"min={lo}"] if lo is not None else []) + (
                    [f"max={hi}"] if hi is not None else [])
                decls[sym.name] = f"Dim({', '.join(parts)})"
        split_done = False
        specs: dict[str, dict] = {}
        seen: set[str] = set()
        for arg in args:
            for leaf in arg.leaves:
                entry = {}
                for d, size in enumerate(leaf.shape):
                    syms = size.symbols
                    if not syms:
                        r = rng.random()
                        if r < 0.05:
                            entry[d] = "Dim.STATIC"
                        elif r < 0.08:
                            entry[d] = str(size.static_value)
                        elif r < 0.1:
                            entry[d] = "None"
                        elif r < 0.12:
                            entry[d] = "Dim.AUTO"
                        continue
                    sym = self.symbols[next(iter(syms))]
                    plain = size == Size(sym.name)
                    if sym.mode == "dim":
                        if plain:
                            if sym.name in seen and not split_done and rng.random() < 0.06:
                                split_done = True
                                name = f"{sym.name}_other"
                                decls[name] = decls[sym.name].replace(f'"{sym.name}"', f'"{name}"', 1)
                                entry[d] = name
                            else:
                                entry[d] = sym.name
                            seen.add(sym.name)
                        elif rng.random() < 0.7:
                            entry[d] = _size_code(size).replace("*", " * ").replace("+", " + ")
                        else:
                            entry[d] = "Dim.AUTO"
                    elif sym.mode == "auto":
                        entry[d] = "Dim.AUTO"
                    elif sym.mode == "dynamic":
                        entry[d] = "Dim.DYNAMIC" if plain or rng.random() < 0.5 else "Dim.AUTO"
                    else:
                        entry[d] = rng.choice(["None", "Dim.STATIC", str(self.example(size))])
                if entry and rng.random() < 0.15:
                    self.list_form.add(leaf.name)
                specs[leaf.name] = entry
        if split_done:
            self.notes.append("spec: a shared size given two different Dims")
        return specs, decls

    def make_check_sizes(self) -> list[dict]:
        rng = self.rng
        dynamic = [s for s in self.symbols.values() if s.mode != "static" and not s.forced_static]
        if not dynamic:
            return []
        out = []
        for _ in range(2):
            sizes = {}
            for name, sym in sorted(self.symbols.items()):
                if sym.mode == "static" or sym.forced_static:
                    sizes[name] = sym.example
                    continue
                lo = max(sym.req_min, sym.lo if sym.lo is not None else 2)
                hi = sym.hi if sym.hi is not None else sym.example + 6
                hi = min(hi, sym.example + 8)
                sizes[name] = rng.randint(lo, hi) if hi >= lo else sym.example
            if sizes not in out and sizes != {n: s.example for n, s in self.symbols.items()}:
                out.append(sizes)
        return out


def generate(seed: int, n_stmts: tuple[int, int] = (3, 12)) -> Program:
    """A random program, the same for the same seed."""
    gen = _Gen(seed)
    args = gen.make_inputs()
    gen._inputs = {lf.name for a in args for lf in a.leaves}
    target = gen.rng.randint(*n_stmts)
    attempts = 0
    while len(gen.stmts) < target and attempts < target * 10:
        attempts += 1
        gen.step()
    defined = [s.defines for s in gen.stmts if s.defines]
    unused = [n for n in defined if not any(n in s.uses for s in gen.stmts)]
    pool = unused or defined or [lf.name for a in args for lf in a.leaves]
    rng = gen.rng
    outputs = rng.sample(pool, min(len(pool), rng.randint(1, 4)))
    mutated_inputs = [sorted(t.uses & gen._inputs) for t in gen.stmts if t.tag == "input mutation"]
    if mutated_inputs and mutated_inputs[0] and rng.random() < 0.3:
        leaf = mutated_inputs[0][0]
        if leaf not in outputs:
            outputs.append(leaf)
    out_kind = rng.choice(["single", "tuple", "list", "dict", "nested"]) if len(outputs) > 1 else rng.choice(
        ["single", "single", "tuple", "dict"])
    specs, decls = gen.make_spec(args)
    return Program(
        seed=seed,
        symbols=gen.symbols,
        args=args,
        attrs=gen.attrs,
        helpers=gen.helpers,
        stmts=gen.stmts,
        outputs=outputs,
        out_kind=out_kind,
        leaf_specs=specs,
        dim_decls=decls,
        check_sizes=gen.make_check_sizes(),
        list_form=gen.list_form,
        notes=gen.notes,
    )
