"""Branch capture: export time and graph size against the number of decisions.

Run from the repository root:

    python benchmarks/branches.py                    # L = 1, 2, 4, 8, 16; 3 repeats
    python benchmarks/branches.py --layers 1 2 4 --repeats 1 --no-results

Each model is a stack of L layers, in two families:

- ``local``: each layer branches on a value of its own (``if h.abs().max() > 1:``): L
  decisions, which should cost L + 1 runs of forward and one cond per layer;
- ``shared``: one flag computed before the layers and tested in each of them: one decision,
  two runs, a cond per layer;
- ``helper``: ``local``'s branch in a plain function the root's forward calls after each
  layer: L decisions in one module call, which should cost L + 1 runs too (the branch ends
  where the function returns);
- ``experts``: a mixture of L experts that skips an idle expert (``if tokens.numel() == 0:
  continue``) in a fixed loop: L decisions whose sides meet at the next step, L + 1 runs.

exporter exports the plain Python model. torch.export cannot (it stops at the branch), so
the oracle is torch.export on the same model written with ``torch.cond`` by hand, the
rewrite a user would otherwise make; the time ratio is exporter's over that.  For
``experts`` the oracle is torch.export on the same layer without the test (each expert runs
on its tokens, none included), and the row also gives exporter's own time on that layer
(``exporter s, no branch``). Both run in
this one process, alternating, after one untimed warm-up each; the table shows medians.
Every exporter program is checked against eager on inputs that take each side.

The table and rows are written through ``results.write`` to
``docs/results/branches-torch-<release>.md`` and ``.json`` (``--no-results`` only prints).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import torch

# results.py sits beside this file, which is run as a script.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results

import exporter

nn = torch.nn
WIDTH = 16


class LocalLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        h = self.lin(x)
        if h.abs().max() > 1:
            h = h / h.abs().max()
        return h


class LocalLayerCond(LocalLayer):
    def forward(self, x):
        h = self.lin(x)
        return torch.cond(h.abs().max() > 1, lambda h: h / h.abs().max(), lambda h: h.clone(), (h,))


class SharedLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(WIDTH, WIDTH)

    def forward(self, x, shift):
        h = self.lin(x)
        return h + 1 if shift else h


class SharedLayerCond(SharedLayer):
    def forward(self, x, shift):
        h = self.lin(x)
        return torch.cond(shift, lambda h: h + 1, lambda h: h.clone(), (h,))


class Stack(nn.Module):
    def __init__(self, layer: type[nn.Module], n: int, shared: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layer() for _ in range(n))
        self.shared = shared

    def forward(self, x):
        shift = x.mean() > 0 if self.shared else None
        for layer in self.layers:
            x = layer(x, shift) if self.shared else layer(x)
        return x


def bounded(h):
    """The ``local`` family's branch in a function of its own, called after each layer."""
    if h.abs().max() > 1:
        return h / h.abs().max()
    return h


def bounded_cond(h):
    return torch.cond(h.abs().max() > 1, lambda h: h / h.abs().max(), lambda h: h.clone(), (h,))


class HelperStack(nn.Module):
    def __init__(self, helper: Any, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(n))
        self.helper = helper

    def forward(self, x):
        for layer in self.layers:
            x = self.helper(layer(x))
        return x


class Experts(nn.Module):
    """L experts in a fixed loop; ``skip``: an idle expert is skipped (a branch per step)."""

    def __init__(self, n: int, skip: bool) -> None:
        super().__init__()
        self.gate = nn.Linear(WIDTH, n, bias=False)
        with torch.no_grad():  # rows of one length: each expert is the choice of a token along its row
            self.gate.weight /= self.gate.weight.norm(dim=1, keepdim=True)
        self.experts = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(n))
        self.skip = skip

    def forward(self, x):
        choice = self.gate(x).argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tokens = torch.where(choice == e)[0]
            if self.skip and tokens.numel() == 0:
                continue
            out = out.index_add(0, tokens, expert(x[tokens]))
        return out


FAMILIES = {
    "local": (LocalLayer, LocalLayerCond, False),
    "shared": (SharedLayer, SharedLayerCond, True),
    "helper": (bounded, bounded_cond, None),
    "experts": (Experts, Experts, "experts"),
}


def models(family: str, layers: int) -> tuple[nn.Module, nn.Module]:
    """The plain model and its hand-written ``torch.cond`` twin, with the same weights."""
    plain_part, cond_part, shared = FAMILIES[family]
    torch.manual_seed(0)
    if shared == "experts":
        plain, twin = Experts(layers, True).eval(), Experts(layers, False).eval()
    elif shared is None:  # the branch is in a function the root's forward calls
        plain, twin = HelperStack(plain_part, layers).eval(), HelperStack(cond_part, layers).eval()
    else:
        plain, twin = Stack(plain_part, layers, shared).eval(), Stack(cond_part, layers, shared).eval()
    twin.load_state_dict(plain.state_dict())
    return plain, twin


def side_inputs(family: str = "local", model: nn.Module | None = None) -> list[torch.Tensor]:
    """Inputs that take each side: small and large values, positive and negative means; for
    ``experts`` (the layer, ``model``, decides which expert a token goes to), a batch with one
    token along each expert's gate row, which that expert takes, then batches of 1 to 7
    tokens, which leave most experts idle."""
    torch.manual_seed(1)
    if family == "experts":
        every = model.gate.weight.detach() * 3
        return [every, *(torch.randn(n, WIDTH) for n in (1, 2, 3, 7, 1, 1, 2))]
    return [scale * sign * (torch.rand(2, WIDTH) + 0.05) for scale in (0.01, 4.0) for sign in (1.0, -1.0)]


def _conds_and_nodes(program: torch.export.ExportedProgram) -> tuple[int, int]:
    graphs = [m for m in program.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]
    nodes = [n for g in graphs for n in g.graph.nodes]
    return sum(n.target is torch.ops.higher_order.cond for n in nodes), len(nodes)


def _timed(fn) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def measure(family: str, layers: int, repeats: int) -> dict[str, Any]:
    """One row: exporter on the plain model and torch.export on the cond twin, medians of
    ``repeats`` alternating runs after a warm-up of each."""
    plain, twin = models(family, layers)
    experts = family == "experts"
    example = (torch.randn(6 if experts else 2, WIDTH),)
    options: dict[str, Any] = {}
    if experts:  # each step's test is a decision of its own: one run per expert and one
        options = {"dynamic_shapes": ({0: torch.export.Dim.AUTO},), "max_branch_runs": max(32, layers + 1)}
    ours = lambda: exporter.export(plain, example, **options)
    plain_twin = lambda: exporter.export(twin, example, **options)
    oracle = lambda: torch.export.export(twin, example, strict=False, **({"dynamic_shapes": options["dynamic_shapes"]} if experts else {})).run_decompositions({})
    ours(), oracle()
    if experts:
        plain_twin()
    ours_times, oracle_times, twin_times = [], [], []
    program = oracle_program = None
    for _ in range(repeats):
        seconds, program = _timed(ours)
        ours_times.append(seconds)
        seconds, oracle_program = _timed(oracle)
        oracle_times.append(seconds)
        if experts:
            twin_times.append(_timed(plain_twin)[0])
    runner = program.module()
    inputs = side_inputs(family, plain)
    matches = all(torch.allclose(runner(x), plain(x), rtol=1e-5, atol=1e-6) for x in inputs)
    if experts:  # every step's test took both sides among the inputs
        from exporter.testing import assert_every_side

        assert_every_side(program, [(x,) for x in inputs])
    report = program.branch_report
    conds, nodes = _conds_and_nodes(program)
    oracle_conds, oracle_nodes = _conds_and_nodes(oracle_program)
    ours_s, oracle_s = statistics.median(ours_times), statistics.median(oracle_times)
    return {
        "family": family, "layers": layers,
        "decisions": len(report.decisions) if report else 0, "runs": report.runs if report else 1,
        "conds": conds, "nodes": nodes, "oracle_conds": oracle_conds, "oracle_nodes": oracle_nodes,
        "exporter_s": ours_s, "torch_export_s": oracle_s, "ratio": ours_s / oracle_s,
        "exporter_no_branch_s": statistics.median(twin_times) if twin_times else None,
        "matches_eager": matches,
    }


HEADER = ["family", "layers", "decisions", "runs", "conds", "nodes", "torch.cond by hand: conds", "nodes",
          "exporter s", "torch.export s", results.TIME_RATIO, "exporter s, no branch", "matches eager on every side"]


def render(rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The page body from the rows (``results.py render``)."""
    table = [[r["family"], str(r["layers"]), str(r["decisions"]), str(r["runs"]), str(r["conds"]), str(r["nodes"]),
              str(r["oracle_conds"]), str(r["oracle_nodes"]), f"{r['exporter_s']:.3f}", f"{r['torch_export_s']:.3f}",
              f"{r['ratio']:.2f}", "" if r.get("exporter_no_branch_s") is None else f"{r['exporter_no_branch_s']:.3f}",
              "yes" if r["matches_eager"] else "NO"] for r in rows]
    text = (
        "exporter exports the plain model, whose layers branch on tensor values; torch.export exports "
        "the same model written with `torch.cond` by hand (it cannot export the plain one). Nodes count "
        f"every graph, cond branches included. The [time ratio]({results.TIME_RATIO_DOC}) is exporter's "
        "median over torch.export's, in one process, warm. For `experts` torch.export and the last time "
        "column export the same layer without the idle-expert test.\n\n" + results.markdown_table(HEADER, table)
    )
    return text, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 4, 8, 16], metavar="L")
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--repeats", type=int, default=3)
    results.add_arguments(parser)
    args = parser.parse_args(argv)
    results.require_clean(args)
    rows = []
    for family in args.families:
        for layers in args.layers:
            if family == "experts" and layers < 2:
                continue  # one expert takes every token: its test is never true, so no input checks that side
            row = measure(family, layers, args.repeats)
            rows.append(row)
            print(f"{family:<6} L={layers:<3} decisions {row['decisions']:<3} runs {row['runs']:<3} conds {row['conds']:<3} "
                  f"nodes {row['nodes']:<5} exporter {row['exporter_s']:.3f} s  torch.export "
                  f"({'without the test' if family == 'experts' else 'cond by hand'}) "
                  f"{row['torch_export_s']:.3f} s  ratio {row['ratio']:.2f}"
                  + (f"  exporter, no branch {row['exporter_no_branch_s']:.3f} s" if row["exporter_no_branch_s"] is not None else "")
                  + f"  matches eager: {row['matches_eager']}", flush=True)
    markdown, data = render(rows)
    results.write_from_args(args, f"branches-{results.release_suffix()}", markdown=markdown, data=data,
                            argv=results.script_argv(__file__, argv), title="Branch capture: cost against decisions")
    return 0 if all(r["matches_eager"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
