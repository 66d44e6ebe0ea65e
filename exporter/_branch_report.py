"""What branch capture did: each decision a program makes at run time, where it came from.

Where forward branches on a tensor's value, exporter traces each side and joins them with
``torch.cond``.  The program carries a ``BranchReport`` as ``ep.branch_report``: one
``BranchDecision`` per value the program branches on, with the user's line, the predicate
and the symbols it reads, and how many conds it became."""

from __future__ import annotations

import attrs

__all__ = ["RAISES_HERE", "BranchDecision", "BranchLoop", "BranchReport", "branch_report", "raises_here"]

RAISES_HERE = "forward() raises for this input"
"""How a program's assert begins where an input takes a side of a decision on which forward
raises (an input check): the program runs only the other side."""


def raises_here(location: str | None, code: str | None, raised: str | None = None) -> str:
    """The whole message of such an assert, naming the user's line that decided and, where
    known, what forward raised on that side (``ValueError: negative input, at model.py:14``)."""
    line = f" (`{code}`)" if code else ""
    error = f": {raised}" if raised else ""
    return f"{RAISES_HERE} at {location or 'an unknown line'}{line}{error}; the program runs only the side that does not"


@attrs.frozen
class BranchDecision:
    """One value the program branches on."""

    location: str | None
    """``file.py:LINE`` of the user's code that first asked for it."""
    code: str | None
    """That line's source (``if x.sum() > 0:``)."""
    predicate: str
    """The condition the program computes, over the symbols it reads (``Eq(u0, 1)``)."""
    symbols: tuple[str, ...]
    """Where each symbol of ``predicate`` comes from: ``u0 = aten._local_scalar_dense at file:line``."""
    module: str
    """The module call it was asked in (``encoder.layers.0.attn``; empty for the model itself)."""
    uses: int
    """How many times forward asked for it in the run that took its first value (a flag read
    in every layer is one decision with a use per layer)."""
    conds: int
    """How many ``torch.cond`` regions it became (one per place the two sides part)."""
    within: tuple[str, ...] = ()
    """The decisions (``file.py:LINE``) whose branch it lies in, outermost first."""

    def to_json(self) -> dict:
        """The decision as the JSON report writes it."""
        return attrs.asdict(self, recurse=False, value_serializer=lambda _, __, v: list(v) if isinstance(v, tuple) else v)

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        code = f": `{self.code}`" if self.code else ""
        inside = f", inside the branch at {self.within[-1]}" if self.within else ""
        return (
            f"branch{where}{code}\n    on {self.predicate} ({'; '.join(self.symbols) or 'no symbols'}), "
            f"{self.uses} use(s), {self.conds} cond(s){inside}"
        )


@attrs.frozen
class BranchLoop:
    """One loop over a tensor whose length only the data decides, made a ``torch.while_loop``."""

    location: str | None
    """``file.py:LINE`` of the ``for`` statement."""
    code: str | None
    module: str
    """The module call it runs in (empty for the model itself)."""
    carried: int
    """How many values each step hands on to the next (the step count among them)."""
    bounded: int | None = None
    """With ``max_iterations``: the loop is that many conds in a row, and the program asserts
    that the data asks for no more steps; None: a ``torch.while_loop``."""
    breaks: str | None = None
    """``file.py:LINE`` of the branch inside a step on one side of which the step breaks out
    (a flag the loop carries ends it); None where every step goes on."""
    lists: tuple[str, ...] = ()
    """The lists the steps append to, each carried as a buffer and a count."""

    def to_json(self) -> dict:
        """The loop as the JSON report writes it."""
        return attrs.asdict(self, recurse=False)

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        code = f": `{self.code}`" if self.code else ""
        form = "torch.while_loop" if self.bounded is None else f"{self.bounded} torch.cond step(s) (max_iterations)"
        breaks = f"\n    a step breaks out at {self.breaks}" if self.breaks else ""
        lists = f"\n    builds {', '.join(f'`{n}`' for n in self.lists)} as a buffer and a count" if self.lists else ""
        return f"loop{where}{code}\n    as {form}, carrying {self.carried} value(s){breaks}{lists}"


@attrs.frozen
class BranchReport:
    """Every value the program branches on, and how many runs of forward it took to capture them."""

    decisions: tuple[BranchDecision, ...] = ()
    runs: int = 1
    """Runs of forward traced: one, and one more for each decision's other value."""
    checked: tuple[str, ...] = ()
    """Lines (``file.py:LINE``) of branches whose other side raises (an input check): the
    program takes the side that does not and asserts it when it runs, so an input that would
    raise in eager fails the program's check instead."""
    loops: tuple[BranchLoop, ...] = ()
    """Loops over tensors whose length only the data decides, each a ``torch.while_loop``."""

    def to_json(self) -> dict:
        """``{"runs": ..., "decisions": [...], "checked": [...], "loops": [...]}``, as the JSON report writes it."""
        return {
            "runs": self.runs, "decisions": [d.to_json() for d in self.decisions], "checked": list(self.checked),
            "loops": [loop.to_json() for loop in self.loops],
        }

    def __str__(self) -> str:
        lines = []
        if self.decisions:
            lines = [f"{len(self.decisions)} branch(es) on tensor values, captured as torch.cond from {self.runs} runs"]
            lines += [f"{i}. {d}" for i, d in enumerate(self.decisions, 1)]
        if self.loops:
            form = "torch.while_loop" if all(loop.bounded is None for loop in self.loops) else "bounded steps"
            lines.append(f"{len(self.loops)} loop(s) over data-sized tensors, captured as {form}")
            lines += [f"{i}. {loop}" for i, loop in enumerate(self.loops, 1)]
        lines += [f"checked at run time (the other side raises): {where}" for where in self.checked]
        return "\n".join(lines) or "no branch on tensor values"


def branch_report(program: object) -> BranchReport | None:
    """The report branch capture attached to ``program`` (None where nothing was captured)."""
    return getattr(program, "branch_report", None)
