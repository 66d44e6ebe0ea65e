"""Runs that meet again where one side's values are a special case of the other's.

A branch that returns ``torch.empty((0,))`` when nothing is left (torchvision's batched NMS)
gives a tensor of size 0 on one side and one of a data-decided size ``u`` on the other.
Forward after the branch is the same code on both sides, but it is traced differently: the
side that knows the size computes no sizes, reshapes with ``view`` where the other copies,
and settles later tests of that size (``if boxes.numel() == 0:``) without asking.  The runs
never agree node by node, so the region would run to the end of forward, and every later
decision would be traced once per side.

Here the two runs' continuations are compared as *general* and *special*: the general run
holds a symbol where the special run holds a number, and its nodes, with each of its symbols
replaced by what the special run holds (``Generality.values``), compute what the special
run's compute.  Size arithmetic only the general run needs, and copies only one run makes,
are passed over; sizes are compared by what they compute.  A later decision only the general
run asks must come out, in the special run's values, as the general run took it; where it
does not, the general run is traced again holding it that way (``Adjust``).  The program then
continues with the general run's nodes: they are right for both sides' values.
"""

from __future__ import annotations

import operator
from typing import Any

import attrs
import sympy
import torch

from .._torch_internals import HigherOrderOperator, OpOverload, free_unbacked_symbols

__all__ = ["Adjust", "Generality", "bound_alike", "compose", "facts", "is_copy", "is_size", "same_view", "unify"]

_SIZE_OPS = (
    torch.ops.aten.sym_size.int,
    torch.ops.aten.sym_numel.default,
    torch.ops.aten.sym_stride.int,
    torch.ops.aten.sym_storage_offset.default,
)
_SYMBOLIC = (torch.SymInt, torch.SymBool, torch.SymFloat)
_COPIES = (torch.ops.aten.clone.default,)
_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default)


class Adjust(Exception):
    """The general run took a later decision the other way from what the special run's values
    settle it to: trace it again holding ``args``: (which run, ``'a'`` or ``'b'``, site, value)."""


@attrs.define(eq=False)
class Generality:
    """What the general run's symbols are in the special run, for a comparison of the two."""

    general: str
    """Which run of the comparison is general: ``'a'`` or ``'b'``."""
    values: dict[sympy.Symbol, sympy.Basic] = attrs.field(factory=dict)
    """A data-decided symbol of the general run -> what the same value is in the special run."""
    aliases: dict[torch.fx.Node, torch.fx.Node] = attrs.field(factory=dict)
    """A copy one run made that the other did not -> the value it copies."""
    first: int | None = None
    """The first node of the first run (``a``) past which the runs were compared loosely."""
    facts: dict[sympy.Symbol, sympy.Basic] = attrs.field(factory=dict)
    """What the special run's decisions fixed its symbols to (``Eq(u0, 0)`` held: ``u0`` is 0)."""

    def mark(self, i: int) -> None:
        if self.first is None or i < self.first:
            self.first = i

    def resolve(self, node: Any) -> Any:
        while isinstance(node, torch.fx.Node) and node in self.aliases:
            node = self.aliases[node]
        return node

    def in_special(self, expr: sympy.Basic, *, settle: bool = True) -> sympy.Basic | None:
        """The general run's ``expr`` in the special run's values (None: a symbol not known);
        ``settle``: with what the special run's decisions fixed put in."""
        replace = {}
        for symbol in expr.free_symbols:
            if symbol in self.values:
                replace[symbol] = self.values[symbol]
            elif symbol in set(free_unbacked_symbols(symbol)):
                return None  # a data-decided value of the general run the comparison never met
        expr = expr.xreplace(replace) if replace else expr
        return expr.xreplace(self.facts) if self.facts and settle else expr

    def same(self, general: sympy.Basic, special: sympy.Basic) -> bool:
        """Whether the general run's ``general`` is the special run's ``special``; binds a
        symbol of the general run met for the first time."""
        special = special.xreplace(self.facts) if self.facts else special
        if isinstance(general, sympy.Symbol) and general not in self.values and general in set(free_unbacked_symbols(general)):
            self.values[general] = special
            return True
        translated = self.in_special(general)
        if translated is None:
            return False
        if translated == special:
            return True
        try:
            return bool(sympy.expand(translated - special) == 0)
        except (TypeError, ValueError, AttributeError):
            return False

    def tainted(self) -> set[sympy.Symbol]:
        """The general run's symbols that are a number, or another expression, in the special run."""
        return {s for s, v in self.values.items() if not isinstance(v, sympy.Symbol)}


def facts(decisions: Any) -> dict[sympy.Symbol, sympy.Basic]:
    """The values ``decisions`` fix symbols to: ``Eq(4*u0, 0)`` held (or ``Ne`` not) gives ``u0: 0``."""
    found: dict[sympy.Symbol, sympy.Basic] = {}
    for decision in decisions:
        expr = decision.expression
        if not (isinstance(expr, sympy.Eq) and decision.value or isinstance(expr, sympy.Ne) and not decision.value):
            continue
        if len(expr.free_symbols) != 1:
            continue
        (symbol,) = expr.free_symbols
        difference = expr.lhs - expr.rhs
        if not isinstance(symbol, sympy.Symbol) or not difference.is_polynomial(symbol):
            continue
        slope = sympy.expand(difference).coeff(symbol, 1)
        rest = sympy.expand(difference - slope * symbol)
        if slope.is_number and slope != 0 and rest.is_number:
            found[symbol] = -rest / slope  # a*u + b == 0 (solving in general can take minutes)
    return found


def expression(value: Any) -> sympy.Basic | None:
    """What a size node (by its value) or a number computes."""
    if isinstance(value, torch.fx.Node):
        if value.op not in ("call_function", "placeholder"):
            return None
        value = value.meta.get("val")
    if isinstance(value, _SYMBOLIC):
        return value.node.expr
    if isinstance(value, bool):
        return sympy.true if value else sympy.false
    if isinstance(value, (int, float)):
        return sympy.sympify(value)
    return None


def is_size(node: Any) -> bool:
    """Whether ``node`` computes a number from sizes: a tensor's size, or arithmetic on numbers."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or not isinstance(node.meta.get("val"), _SYMBOLIC):
        return False
    if node.target in _SIZE_OPS:
        return True
    return not isinstance(node.target, (OpOverload, HigherOrderOperator)) and node.target is not operator.getitem


def is_number(value: Any) -> bool:
    """A number an op reads: a constant or a node that holds one."""
    if isinstance(value, torch.fx.Node):
        return isinstance(value.meta.get("val"), _SYMBOLIC)
    return isinstance(value, (int, float, bool)) and not isinstance(value, torch.Tensor)


def is_copy(node: Any) -> bool:
    """Whether ``node`` only copies a tensor (the copy a reshape of a tensor of symbolic size makes)."""
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in _COPIES


def is_view(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in _VIEWS


def unify(gen: Generality, x: torch.fx.Node, y: torch.fx.Node) -> bool:
    """Whether the values of ``x`` (first run) and ``y`` (second) agree, the general one's
    symbols standing for the special one's values (bound here on first meeting)."""
    vx, vy = x.meta.get("val"), y.meta.get("val")
    general, special = (vx, vy) if gen.general == "a" else (vy, vx)
    return _unify_values(gen, general, special)


def _unify_values(gen: Generality, general: Any, special: Any) -> bool:
    if isinstance(general, (list, tuple)) and isinstance(special, (list, tuple)):
        return len(general) == len(special) and all(_unify_values(gen, p, q) for p, q in zip(general, special))
    if isinstance(general, torch.Tensor) and isinstance(special, torch.Tensor):
        if general.dtype != special.dtype or general.dim() != special.dim():
            return False
        return all(_unify_number(gen, p, q) for p, q in zip(general.shape, special.shape))
    if is_number(general) or is_number(special):
        return _unify_number(gen, general, special)
    return type(general) is type(special)


def _unify_number(gen: Generality, general: Any, special: Any) -> bool:
    eg, es = expression(general), expression(special)
    if eg is None or es is None:
        return False
    return gen.same(eg, es)


def same_number(gen: Generality, x: Any, y: Any) -> bool:
    """Whether number ``x`` of the first run and ``y`` of the second are one value."""
    ex, ey = expression(x), expression(y)
    if ex is None or ey is None:
        return False
    return gen.same(ex, ey) if gen.general == "a" else gen.same(ey, ex)


def same_view(pair: Any, gen: Generality, a: torch.fx.Node, b: torch.fx.Node) -> bool:
    """Whether ``a`` and ``b`` reshape one value to one shape (``view``, or a copy's
    ``_unsafe_view``: which one a run makes depends on what it knows of the sizes)."""
    return bool(a.args and b.args) and pair(a.args[0], b.args[0]) and unify(gen, a, b)


def bound_alike(pairs: Any) -> dict[sympy.Symbol, sympy.Symbol]:
    """For pairs of nodes two runs made alike, ``(mine, theirs)``: each symbol ``mine`` binds
    -> the one ``theirs`` binds at the same place in its value."""
    found: dict[sympy.Symbol, sympy.Symbol] = {}
    for mine, theirs in pairs:
        by_path = {str(path): symbol for symbol, path in (theirs.meta.get("unbacked_bindings") or {}).items()}
        for symbol, path in (mine.meta.get("unbacked_bindings") or {}).items():
            if str(path) in by_path:
                found.setdefault(symbol, by_path[str(path)])
    return found


def compose(outer: dict[sympy.Symbol, sympy.Basic], inner: dict[sympy.Symbol, sympy.Basic]) -> dict[sympy.Symbol, sympy.Basic]:
    """``inner`` (a run's symbols -> another run's values) followed by ``outer`` (that run's
    symbols -> a third run's values); a symbol whose value ``outer`` cannot say is left out."""
    composed = {}
    for symbol, value in inner.items():
        replace = {}
        known = True
        for s in value.free_symbols:
            if s in outer:
                replace[s] = outer[s]
            elif s in set(free_unbacked_symbols(s)):
                known = False
                break
        if known:
            composed[symbol] = value.xreplace(replace) if replace else value
    return composed
