"""Differential checks of an exporter against eager execution and the torch.export oracle.

Every check takes a ``Case`` and an ``export_fn(model, args, kwargs) -> ExportedProgram``,
so the same checks run against any exporter (including the oracle itself, which is how
the harness is validated).  The oracle is
``torch.export.export(model, args, kwargs, strict=False).run_decompositions({})``,
computed once per case name per process.
"""

from __future__ import annotations

import copy
import difflib
import io
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.export import ExportedProgram
from torch.export.graph_signature import ConstantArgument, InputKind

from passes import layout_pin_nodes
from tests.support import value_differences

from .cases import Case

__all__ = [
    "ExportFn",
    "oracle_export",
    "oracle_program",
    "clone_inputs",
    "check_matches_eager",
    "check_signature_matches_oracle",
    "check_values_match_oracle",
    "check_ops_match_oracle",
    "unlowered_op_difference",
    "op_counter",
    "without_layout_pins",
    "counter_difference",
    "format_counts",
    "check_module_stack_matches_oracle",
    "snapshot_model",
    "assert_model_unchanged",
    "check_model_unchanged",
    "check_save_load_roundtrip",
    "CHECKS",
]

ExportFn = Callable[[torch.nn.Module, tuple, dict], ExportedProgram]


def oracle_export(model: torch.nn.Module, args: tuple, kwargs: dict) -> ExportedProgram:
    """The reference export: torch.export non-strict, decomposed to functional ATen."""
    return torch.export.export(model, args, kwargs, strict=False).run_decompositions({})


_ORACLE_CACHE: dict[str, ExportedProgram] = {}
_LOWERED_CACHE: dict[str, ExportedProgram] = {}


def oracle_program(case: Case) -> ExportedProgram:
    """The oracle's program for ``case`` on its seed-0 inputs (cached by case name)."""
    if case.name not in _ORACLE_CACHE:
        args, kwargs = case.make_inputs(0)
        _ORACLE_CACHE[case.name] = oracle_export(case.make_model(), args, kwargs)
    return _ORACLE_CACHE[case.name]


def _oracle_lowered(case: Case) -> ExportedProgram:
    if case.name not in _LOWERED_CACHE:
        _LOWERED_CACHE[case.name] = oracle_program(case).run_decompositions()
    return _LOWERED_CACHE[case.name]


def clone_inputs(value: Any) -> Any:
    """A copy of a pytree of inputs with every tensor cloned (other leaves shared)."""
    return pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, value)


def _export(case: Case, export_fn: ExportFn, model: torch.nn.Module | None = None) -> ExportedProgram:
    model = case.make_model() if model is None else model
    args, kwargs = clone_inputs(case.make_inputs(0))
    ep = export_fn(model, args, kwargs)
    assert isinstance(ep, ExportedProgram), f"{case.name}: export returned {type(ep).__name__}"
    return ep


def _path(keypath) -> str:
    return pytree.keystr(keypath) or "<root>"


def _assert_trees_close(ours: Any, ref: Any, case: Case, what: str) -> None:
    """Same pytree structure; tensors close (dtype and shape equal), other leaves equal."""
    ours_leaves, ours_spec = pytree.tree_flatten_with_path(ours)
    ref_leaves, ref_spec = pytree.tree_flatten_with_path(ref)
    assert ours_spec == ref_spec, f"{case.name}: {what} structure differs:\n  ours: {ours_spec}\n  ref:  {ref_spec}"
    for (path, a), (_, b) in zip(ours_leaves, ref_leaves):
        where = f"{case.name}: {what}{_path(path)}"
        if isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"{where}: expected a tensor, got {type(a).__name__}: {a!r}"
            torch.testing.assert_close(
                a, b, rtol=case.rtol, atol=case.atol, equal_nan=True, msg=lambda m: f"{where}: {m}"
            )
        else:
            assert type(a) is type(b) and a == b, f"{where}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"


def _buffers(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(module.named_buffers())


def check_matches_eager(case: Case, export_fn: ExportFn, seeds: tuple[int, ...] = (0, 1, 2)) -> None:
    """``ep.module()`` reproduces eager outputs, input mutations and buffer mutations.

    Exports on the seed-0 inputs, then runs ``ep.module()`` and a deep copy of the
    pre-export model on separate clones of each seed's inputs, one seed after another.
    """
    model = case.make_model()
    eager = copy.deepcopy(model)
    ep = _export(case, export_fn, model)
    # ep.module() shares (and mutates) ep's state; ep is private to this check.  No
    # deepcopy: it would turn the unlifted module's constant attributes into buffers.
    unlifted = ep.module()
    # One module of each kind over all seeds: buffer updates accumulate as in real use.
    for seed in seeds:
        inputs = case.make_inputs(seed)
        ours_args, ours_kwargs = clone_inputs(inputs)
        ref_args, ref_kwargs = clone_inputs(inputs)
        ref_out = eager(*ref_args, **ref_kwargs)
        ours_out = unlifted(*ours_args, **ours_kwargs)
        _assert_trees_close(ours_out, ref_out, case, f"[seed {seed}] output")
        _assert_trees_close((ours_args, ours_kwargs), (ref_args, ref_kwargs), case, f"[seed {seed}] input after call")
        ours_bufs, ref_bufs = _buffers(unlifted), _buffers(eager)
        assert sorted(ours_bufs) == sorted(ref_bufs), (
            f"{case.name}: [seed {seed}] buffer names differ: ep.module() has {sorted(ours_bufs)}, "
            f"eager has {sorted(ref_bufs)}"
        )
        for name, ref in ref_bufs.items():
            _assert_trees_close(ours_bufs[name], ref, case, f"[seed {seed}] buffer '{name}' after call")


def _spec_tuple(spec) -> tuple:
    if isinstance(spec.arg, ConstantArgument):
        return (spec.kind.name, spec.arg.name, spec.arg.value)
    return (spec.kind.name, spec.arg.name, spec.target, getattr(spec, "persistent", None))


def _signature(ep: ExportedProgram) -> tuple[list[tuple], list[tuple]]:
    sig = ep.graph_signature
    return [_spec_tuple(s) for s in sig.input_specs], [_spec_tuple(s) for s in sig.output_specs]


def _diff(ours: list, ref: list) -> str:
    return "\n".join(
        difflib.unified_diff([repr(t) for t in ref], [repr(t) for t in ours], "oracle", "ours", lineterm="")
    )


def check_signature_matches_oracle(case: Case, export_fn: ExportFn) -> None:
    """Input and output specs equal the oracle's, in order: (kind, name, target, persistent)."""
    assert_same_signature(case.name, _signature(_export(case, export_fn)), _signature(oracle_program(case)))


def assert_same_signature(name: str, ours: tuple[list, list], ref: tuple[list, list]) -> None:
    """``(input rows, output rows)`` equal, else a diff of each side that differs."""
    problems = [
        f"{side} differ:\n{_diff(mine, theirs)}"
        for side, mine, theirs in zip(("input_specs", "output_specs"), ours, ref)
        if mine != theirs
    ]
    assert not problems, f"{name}: " + "\n".join(problems)


def check_values_match_oracle(case: Case, export_fn: ExportFn) -> None:
    """Every placeholder's and output's ``val`` has the oracle's shape, strides, dtype, device
    and requires_grad, but where ``KNOWN_VALUE_DIFFERENCES`` says exporter differs by design."""
    problems, _ = value_differences(_export(case, export_fn), oracle_program(case))
    assert not problems, f"{case.name}: placeholder or output values differ from the oracle's:\n" + "\n".join(problems)


def _graph_modules(ep: ExportedProgram) -> list[torch.fx.GraphModule]:
    return [m for m in ep.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]


def compared_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The call_function nodes of ``gm`` a comparison with the oracle counts: all but the
    layout pins exporter adds by design so its programs lower (``layout_pin_nodes``)."""
    pins = layout_pin_nodes(gm.graph)
    return [node for node in gm.graph.nodes if node.op == "call_function" and node not in pins]


def without_layout_pins(ep: ExportedProgram) -> ExportedProgram:
    """A copy of ``ep`` with exporter's layout pins taken out, as torch.export writes it.

    A pin changes the layout the ops after it see once a lowering decomposes the composite
    before it (a linear then takes a dense input, so ``addmm`` rather than ``bmm``).  The
    core-ATen comparison lowers this copy, so it compares everything but the pins."""
    ep = copy.deepcopy(ep)
    graph = ep.graph_module.graph
    pins = layout_pin_nodes(graph)
    for back in [n for n in graph.nodes if n in pins and n.args[0] in pins and n.args[0].args[0] in pins]:
        back.replace_all_uses_with(back.args[0].args[0].args[0])
        for spec in ep.graph_signature.output_specs:
            if getattr(spec.arg, "name", None) == back.name:
                spec.arg.name = back.args[0].args[0].args[0].name
    graph.eliminate_dead_code()
    ep.graph_module.recompile()
    return ep


def op_counter(ep: ExportedProgram) -> Counter:
    """Multiset of ``str(target)`` of compared nodes in the graph and all subgraphs."""
    return Counter(str(node.target) for gm in _graph_modules(ep) for node in compared_nodes(gm))


def counter_difference(ours: Counter, ref: Counter) -> dict[str, tuple[int, int]]:
    """``{op: (ours, oracle)}`` for every op whose counts differ."""
    return {op: (ours[op], ref[op]) for op in sorted(set(ours) | set(ref)) if ours[op] != ref[op]}


def format_counts(diff: dict) -> str:
    """One ``key: ours N, oracle M`` line per entry of a ``counter_difference`` result."""
    return "\n".join(f"  {op}: ours {a}, oracle {b}" for op, (a, b) in diff.items())


def assert_op_difference_as_declared(name: str, diff: dict, reason: str | None) -> None:
    """No un-lowered op difference, unless ``reason`` declares one (which must then still exist)."""
    if reason is None:
        assert not diff, f"{name}: op counts differ from oracle.run_decompositions({{}}):\n{format_counts(diff)}"
    else:
        assert diff, f"{name} is declared a known op difference ({reason}) but now matches the oracle; remove it"


def unlowered_op_difference(case: Case, export_fn: ExportFn, ep: ExportedProgram | None = None) -> dict:
    """Op-count difference between our program and ``oracle.run_decompositions({})``."""
    ep = _export(case, export_fn) if ep is None else ep
    return counter_difference(op_counter(ep), op_counter(oracle_program(case)))


def check_ops_match_oracle(case: Case, export_fn: ExportFn) -> dict[str, tuple[int, int]]:
    """After lowering both programs to core ATen, the op multisets are equal.

    Returns the un-lowered difference (``{op: (ours, oracle)}``), which should be empty
    unless the case declares a known op difference.
    """
    ep = _export(case, export_fn)
    lowered = counter_difference(
        op_counter(without_layout_pins(ep).run_decompositions()), op_counter(_oracle_lowered(case))
    )
    assert not lowered, f"{case.name}: core ATen op counts differ after run_decompositions():\n{format_counts(lowered)}"
    return unlowered_op_difference(case, export_fn, ep)


def _module_stack_counter(ep: ExportedProgram) -> Counter:
    counts: Counter = Counter()
    for node in compared_nodes(ep.graph_module):
        stack = node.meta.get("nn_module_stack") or {}
        counts[(str(node.target), tuple(v[0] for v in stack.values()))] += 1
    return counts


def check_module_stack_matches_oracle(case: Case, export_fn: ExportFn) -> None:
    """Top-level call_function nodes carry the same module paths as the oracle's, op by op."""
    ours = _module_stack_counter(_export(case, export_fn))
    ref = _module_stack_counter(oracle_program(case))
    diff = counter_difference(ours, ref)
    assert not diff, f"{case.name}: (op, module paths) counts differ:\n{format_counts(diff)}"


# -- model unchanged -------------------------------------------------------------------------

_TRACING_TYPES = (FakeTensor, FunctionalTensor, torch.fx.Proxy)
_HOOK_TABLES = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_pre_hooks_with_kwargs",
)


def snapshot_model(model: torch.nn.Module) -> dict[str, Any]:
    """Everything about ``model`` an export must leave alone."""
    modules = dict(model.named_modules(remove_duplicate=False))
    return {
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()},
        "parameters": {k: id(v) for k, v in model.named_parameters(remove_duplicate=False)},
        "buffers": {k: id(v) for k, v in model.named_buffers(remove_duplicate=False)},
        "modules": {k: id(m) for k, m in modules.items()},
        "training": {k: m.training for k, m in modules.items()},
        "hooks": {
            k: {t: [(h, id(f)) for h, f in getattr(m, t).items()] for t in _HOOK_TABLES} for k, m in modules.items()
        },
        "attributes": {k: sorted(vars(m)) for k, m in modules.items()},
        "tensor_attributes": {
            k: {a: id(v) for a, v in vars(m).items() if isinstance(v, torch.Tensor)} for k, m in modules.items()
        },
    }


def _leaked_tracing_values(model: torch.nn.Module) -> list[str]:
    found = []

    def visit(value: Any, path: str, depth: int) -> None:
        if isinstance(value, _TRACING_TYPES):
            found.append(f"{path}: {type(value).__name__}")
        elif depth < 2 and isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                visit(item, f"{path}[{i}]", depth + 1)
        elif depth < 2 and isinstance(value, dict):
            for key, item in value.items():
                visit(item, f"{path}[{key!r}]", depth + 1)

    for name, module in model.named_modules(remove_duplicate=False):
        for attr, value in vars(module).items():
            visit(value, f"{name + '.' if name else ''}{attr}", 0)
    return found


def assert_model_unchanged(model: torch.nn.Module, before: dict[str, Any], label: str = "") -> None:
    """``model`` matches ``snapshot_model`` output ``before`` and holds no tracing values."""
    after = snapshot_model(model)
    for key in ("parameters", "buffers", "modules", "training", "hooks", "attributes", "tensor_attributes"):
        if after[key] != before[key]:
            changed = sorted(
                k for k in set(after[key]) | set(before[key]) if after[key].get(k) != before[key].get(k)
            )
            details = "; ".join(f"{k!r}: {before[key].get(k)} -> {after[key].get(k)}" for k in changed[:5])
            raise AssertionError(f"{label}model {key} changed by export: {details}")
    assert sorted(after["state_dict"]) == sorted(before["state_dict"]), f"{label}state_dict keys changed by export"
    for k, v in before["state_dict"].items():
        now = after["state_dict"][k]
        assert now.dtype == v.dtype and now.shape == v.shape and torch.equal(now, v), (
            f"{label}state_dict['{k}'] changed by export"
        )
    leaked = _leaked_tracing_values(model)
    assert not leaked, f"{label}tracing values left on the model: {leaked}"


def check_model_unchanged(case: Case, export_fn: ExportFn) -> None:
    """Exporting leaves the model (state, identities, modes, hooks, attributes) and the inputs as they were."""
    model = case.make_model()
    before = snapshot_model(model)
    args, kwargs = case.make_inputs(0)
    inputs_before = clone_inputs((args, kwargs))
    export_fn(model, args, kwargs)
    assert_model_unchanged(model, before, f"{case.name}: ")
    _assert_trees_close((args, kwargs), inputs_before, case, "example input changed by export: ")


def check_save_load_roundtrip(case: Case, export_fn: ExportFn) -> None:
    """torch.export.save/load keeps the program: same signature and outputs on the example inputs."""
    ep = _export(case, export_fn)
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    assert _signature(loaded) == _signature(ep), (
        f"{case.name}: signature changed by save/load:\n"
        f"{_diff(_signature(loaded)[0] + _signature(loaded)[1], _signature(ep)[0] + _signature(ep)[1])}"
    )
    inputs = case.make_inputs(0)
    ours_args, ours_kwargs = clone_inputs(inputs)
    ref_args, ref_kwargs = clone_inputs(inputs)
    _assert_trees_close(
        loaded.module()(*ours_args, **ours_kwargs), ep.module()(*ref_args, **ref_kwargs), case, "loaded output"
    )


def _program_inputs(ep: ExportedProgram, args: tuple, kwargs: dict) -> list[Any]:
    """Values for the graph's placeholders: state from the program, user inputs flattened."""
    users = iter(pytree.tree_leaves((args, kwargs)))
    values = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            values.append(next(users))
        elif spec.target in ep.state_dict:
            values.append(ep.state_dict[spec.target].detach().clone())
        else:
            values.append(ep.constants[spec.target].detach().clone())
    return values


def check_vals_match_real_run(case: Case, export_fn: ExportFn) -> None:
    """Each node's ``val`` (its fake output) has the shape, dtype and strides of the real output.

    Running the graph node by node on real tensors catches fake propagation that disagrees
    with the kernels that will actually run (a wrong stride changes later view/copy choices).
    """
    ep = _export(case, export_fn)
    mismatches = []

    class Checker(torch.fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            val = node.meta.get("val")
            if node.op == "call_function" and isinstance(out, torch.Tensor) and isinstance(val, torch.Tensor):
                real = (tuple(out.shape), out.dtype, out.stride() if out.numel() > 1 else None)
                fake = (tuple(val.shape), val.dtype, val.stride() if val.numel() > 1 else None)
                if real != fake:
                    mismatches.append(f"{node.name} ({node.target}): real {real}, val {fake}")
            return out

    args, kwargs = clone_inputs(case.make_inputs(0))
    with torch.no_grad():
        Checker(ep.graph_module).run(*_program_inputs(ep, args, kwargs))
    assert not mismatches, f"{case.name}: node vals disagree with the real run:\n" + "\n".join(mismatches[:10])


CHECKS = {
    "matches_eager": check_matches_eager,
    "signature_matches_oracle": check_signature_matches_oracle,
    "values_match_oracle": check_values_match_oracle,
    "ops_match_oracle": check_ops_match_oracle,
    "module_stack_matches_oracle": check_module_stack_matches_oracle,
    "model_unchanged": check_model_unchanged,
    "save_load_roundtrip": check_save_load_roundtrip,
    "vals_match_real_run": check_vals_match_real_run,
}
