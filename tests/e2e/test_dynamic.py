"""exporter.export with ``dynamic_shapes`` against eager execution and the torch.export oracle.

Every check takes a ``DynamicCase`` and an
``export_fn(model, args, kwargs, dynamic_shapes) -> ExportedProgram``, so the same checks run
against any exporter; ``E2E_EXPORT_FN=oracle`` runs them with the oracle itself, which is how
the checks are validated.  The oracle is ``torch.export.export(model, args, kwargs,
dynamic_shapes=..., strict=False).run_decompositions({})``, computed once per case name per
process.  One program is exported on the example sizes and then run at every size the case
lists: a program that is right only at the example sizes fails.
"""

from __future__ import annotations

import copy
import os
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.utils._pytree as pytree
from torch.export import Dim, ExportedProgram
from torch.export.graph_signature import InputKind

import exporter

from tests.support import value_differences

from . import harness
from .dynamic_cases import DYNAMIC_CASES, DYNAMIC_CASES_BY_NAME, VAR_KWARGS_CASE, DynamicCase

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DynamicExportFn = Callable[[nn.Module, tuple, dict, Any], ExportedProgram]

# Cases whose un-lowered op multiset may differ from oracle.run_decompositions({}):
# {case name: reason, with the observed difference}.  A listed case that matches fails.
KNOWN_OP_DIFFERENCES: dict[str, str] = {
    "frames_folded_into_batch_auto": (
        "size arithmetic only (floordiv: ours 1, oracle 3; mul: ours 0, oracle 1): torch.export's "
        "fake view kernel gives the folded batch as an expression of the one before "
        "((s//3)*(s//(s//3))), which the next layer divides again; exporter's view has the size "
        "the model asked for, so every layer reuses the batch's one s//3"
    ),
}

# E2E_EXPORT_FN=oracle runs the checks with the oracle as the exporter, to validate them.
ORACLE_MODE = os.environ.get("E2E_EXPORT_FN") == "oracle"


def oracle_export(model: nn.Module, args: tuple, kwargs: dict, dynamic_shapes: Any) -> ExportedProgram:
    """The reference export: torch.export non-strict with ``dynamic_shapes``, functional ATen."""
    program = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    return program.run_decompositions({})


def export_fn(model: nn.Module, args: tuple, kwargs: dict, dynamic_shapes: Any) -> ExportedProgram:
    """The exporter under test."""
    if ORACLE_MODE:
        return oracle_export(model, args, kwargs, dynamic_shapes)
    return exporter.export(model, args, kwargs, dynamic_shapes=dynamic_shapes)


# -- checks ------------------------------------------------------------------------------------

_ORACLE_CACHE: dict[str, ExportedProgram] = {}
_LOWERED_CACHE: dict[str, ExportedProgram] = {}


def oracle_program(case: DynamicCase) -> ExportedProgram:
    """The oracle's program for ``case`` on its example inputs (cached by case name)."""
    if case.name not in _ORACLE_CACHE:
        args, kwargs = case.make_inputs(case.example, 0)
        _ORACLE_CACHE[case.name] = oracle_export(case.make_model(), args, kwargs, case.make_dynamic_shapes())
    return _ORACLE_CACHE[case.name]


def _oracle_lowered(case: DynamicCase) -> ExportedProgram:
    if case.name not in _LOWERED_CACHE:
        _LOWERED_CACHE[case.name] = oracle_program(case).run_decompositions()
    return _LOWERED_CACHE[case.name]


def _export(case: DynamicCase, fn: DynamicExportFn, model: nn.Module | None = None) -> ExportedProgram:
    model = case.make_model() if model is None else model
    args, kwargs = harness.clone_inputs(case.make_inputs(case.example, 0))
    ep = fn(model, args, kwargs, case.make_dynamic_shapes())
    assert isinstance(ep, ExportedProgram), f"{case.name}: export returned {type(ep).__name__}"
    return ep


_PROGRAM_CACHE: dict[tuple[DynamicExportFn, str], ExportedProgram] = {}


def _exported(case: DynamicCase, fn: DynamicExportFn) -> ExportedProgram:
    """``fn``'s program for ``case``, shared (per process) by the checks that compare no values.

    Dynamic exports are slow.  Running a program may update its buffers, so the check that
    compares values with eager gets a fresh export of its own.
    """
    if (fn, case.name) not in _PROGRAM_CACHE:
        _PROGRAM_CACHE[fn, case.name] = _export(case, fn)
    return _PROGRAM_CACHE[fn, case.name]


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


def _shapes(inputs: Any) -> list[tuple[int, ...]]:
    return [tuple(v.shape) for v in pytree.tree_leaves(inputs) if isinstance(v, torch.Tensor)]


def check_matches_eager(case: DynamicCase, fn: DynamicExportFn) -> None:
    """One program, exported on the example, reproduces eager at the example and every in-range size.

    Runs ``ep.module()`` and a deep copy of the pre-export model on separate clones of the
    same fresh inputs, one assignment after another (buffer updates accumulate in both);
    compares outputs, inputs after the call and buffers.
    """
    model = case.make_model()
    eager = copy.deepcopy(model)
    unlifted = _export(case, fn, model).module()
    runs = [(case.example, 0), (case.example, 1)]
    runs += [(case.sizes(override), 2 + i) for i, override in enumerate(case.in_range)]
    for sizes, seed in runs:
        inputs = case.make_inputs(sizes, seed)
        ours_args, ours_kwargs = harness.clone_inputs(inputs)
        ref_args, ref_kwargs = harness.clone_inputs(inputs)
        ref_out = eager(*ref_args, **ref_kwargs)
        try:
            ours_out = unlifted(*ours_args, **ours_kwargs)
        except Exception as e:
            raise AssertionError(
                f"{case.name}: ep.module() failed at in-range sizes {sizes} (input shapes {_shapes(inputs)}): "
                f"{_first_line(e)}"
            ) from e
        at = f"[sizes {sizes}, seed {seed}]"
        harness._assert_trees_close(ours_out, ref_out, case, f"{at} output")
        harness._assert_trees_close((ours_args, ours_kwargs), (ref_args, ref_kwargs), case, f"{at} input after call")
        ours_bufs, ref_bufs = dict(unlifted.named_buffers()), dict(eager.named_buffers())
        assert sorted(ours_bufs) == sorted(ref_bufs), (
            f"{case.name}: {at} buffer names differ: ep.module() has {sorted(ours_bufs)}, eager has {sorted(ref_bufs)}"
        )
        for name, ref in ref_bufs.items():
            harness._assert_trees_close(ours_bufs[name], ref, case, f"{at} buffer '{name}' after call")


def check_rejects_out_of_range(case: DynamicCase, fn: DynamicExportFn) -> None:
    """``ep.module()`` refuses the out-of-range sizes with a message naming the input (or the size)."""
    sizes = case.sizes(case.out_of_range)
    inputs = case.make_inputs(sizes, 1)
    unlifted = _exported(case, fn).module()
    try:
        unlifted(*inputs[0], **inputs[1])
    except Exception as e:
        assert re.search(case.rejection, str(e)), (
            f"{case.name}: out-of-range sizes {sizes} were rejected, but the message does not match "
            f"/{case.rejection}/: {_first_line(e)}"
        )
        return
    raise AssertionError(
        f"{case.name}: ep.module() accepted out-of-range sizes {sizes} (input shapes {_shapes(inputs)})"
    )


def _ranges(ep: ExportedProgram) -> dict[str, tuple[Any, Any]]:
    return {str(sym): (vr.lower, vr.upper) for sym, vr in ep.range_constraints.items()}


def _format_ranges(ranges: dict[str, tuple[Any, Any]]) -> str:
    return "{" + ", ".join(f"{k}: [{lo}, {hi}]" for k, (lo, hi) in sorted(ranges.items())) + "}"


def check_range_constraints_match_oracle(case: DynamicCase, fn: DynamicExportFn) -> None:
    """``range_constraints`` equal the oracle's: the same symbol names with the same bounds."""
    ours, ref = _ranges(_exported(case, fn)), _ranges(oracle_program(case))
    assert ours == ref, (
        f"{case.name}: range_constraints differ:\n  ours:   {_format_ranges(ours)}\n  oracle: {_format_ranges(ref)}"
    )


def _unnumbered(specs: list[tuple]) -> list[tuple]:
    """Output specs with the node name's counter dropped (``sub_6`` -> ``sub``)."""
    return [(kind, re.sub(r"_\d+$", "", name), *rest) for kind, name, *rest in specs]


def check_signature_matches_oracle(case: DynamicCase, fn: DynamicExportFn) -> None:
    """Input and output specs equal the oracle's, in order: (kind, name, target, persistent).

    Output names are compared without their counter: FX numbers a node after every earlier
    node of the same op, symbolic size arithmetic included, and the oracle re-traces in
    ``run_decompositions({})`` with its own count of those (``sub_6`` there, ``sub`` here).
    """
    ours_in, ours_out = harness._signature(_exported(case, fn))
    ref_in, ref_out = harness._signature(oracle_program(case))
    harness.assert_same_signature(case.name, (ours_in, _unnumbered(ours_out)), (ref_in, _unnumbered(ref_out)))


def unlowered_op_difference(case: DynamicCase, fn: DynamicExportFn, ep: ExportedProgram | None = None) -> dict:
    """Op-count difference between our program and ``oracle.run_decompositions({})``."""
    ep = _exported(case, fn) if ep is None else ep
    return harness.counter_difference(harness.op_counter(ep), harness.op_counter(oracle_program(case)))


def _tensor_ops(counts: Counter) -> Counter:
    """``counts`` without Python size arithmetic (``operator.floordiv`` ...).

    Lowering re-traces the shape expressions each program carries; equal expressions in
    different forms (``12*s27*s77`` vs ``(3*s77)*s27*4 // s77``) re-trace to different
    arithmetic.  The un-lowered comparison still counts it.
    """
    return Counter({op: n for op, n in counts.items() if not op.startswith("<built-in function")})


def check_ops_match_oracle(case: DynamicCase, fn: DynamicExportFn) -> dict[str, tuple[int, int]]:
    """After lowering both programs to core ATen, the op multisets (subgraphs included) are equal.

    Returns the un-lowered difference ``{op: (ours, oracle)}``.
    """
    ep = _exported(case, fn)
    lowered = harness.counter_difference(
        _tensor_ops(harness.op_counter(harness.without_layout_pins(ep).run_decompositions())), _tensor_ops(harness.op_counter(_oracle_lowered(case)))
    )
    assert not lowered, (
        f"{case.name}: core ATen op counts differ after run_decompositions():\n{harness.format_counts(lowered)}"
    )
    return unlowered_op_difference(case, fn, ep)


def _user_input_shapes(ep: ExportedProgram) -> list[tuple[str, str]]:
    placeholders = {node.name: node for node in ep.graph.nodes if node.op == "placeholder"}
    shapes = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            val = placeholders[spec.arg.name].meta.get("val")
            shapes.append((spec.arg.name, str(val.shape) if isinstance(val, torch.Tensor) else repr(val)))
    return shapes


def check_placeholder_shapes_match_oracle(case: DynamicCase, fn: DynamicExportFn) -> None:
    """Each user-input placeholder's fake value has the oracle's symbolic shape (``[s17, s27, 8]``)."""
    ours, ref = _user_input_shapes(_exported(case, fn)), _user_input_shapes(oracle_program(case))
    assert ours == ref, f"{case.name}: user-input placeholder shapes differ:\n{harness._diff(ours, ref)}"


def check_values_match_oracle(case: DynamicCase, fn: DynamicExportFn) -> None:
    """Every placeholder's and output's ``val`` has the oracle's symbolic shape and strides,
    dtype, device and requires_grad, but for ``KNOWN_VALUE_DIFFERENCES``."""
    problems, _ = value_differences(_exported(case, fn), oracle_program(case))
    assert not problems, f"{case.name}: placeholder or output values differ from the oracle's:\n" + "\n".join(problems)


CHECKS = {
    "matches_eager": check_matches_eager,
    "rejects_out_of_range": check_rejects_out_of_range,
    "range_constraints_match_oracle": check_range_constraints_match_oracle,
    "signature_matches_oracle": check_signature_matches_oracle,
    "ops_match_oracle": check_ops_match_oracle,
    "placeholder_shapes_match_oracle": check_placeholder_shapes_match_oracle,
    "values_match_oracle": check_values_match_oracle,
}


def run_check(check: str, case: DynamicCase, fn: DynamicExportFn = export_fn):
    """Run one check, honouring the case's declared skips."""
    if check in case.skip:
        pytest.skip(case.skip[check])
    return CHECKS[check](case, fn)


# -- the corpus --------------------------------------------------------------------------------

cases = pytest.mark.parametrize("case", DYNAMIC_CASES, ids=lambda c: c.name)


@cases
def test_matches_eager(case):
    run_check("matches_eager", case)


@cases
def test_rejects_out_of_range(case):
    run_check("rejects_out_of_range", case)


@cases
def test_range_constraints_match_oracle(case):
    run_check("range_constraints_match_oracle", case)


@cases
def test_signature_matches_oracle(case):
    run_check("signature_matches_oracle", case)


@cases
def test_core_aten_ops_match_oracle(case):
    run_check("ops_match_oracle", case)


@cases
def test_unlowered_ops_match_oracle(case):
    diff = unlowered_op_difference(case, export_fn)
    reason = None if ORACLE_MODE else KNOWN_OP_DIFFERENCES.get(case.name)
    harness.assert_op_difference_as_declared(case.name, diff, reason)


@cases
def test_placeholder_shapes_match_oracle(case):
    run_check("placeholder_shapes_match_oracle", case)


@cases
def test_values_match_oracle(case):
    run_check("values_match_oracle", case)


def test_registry_is_consistent():
    assert len(DYNAMIC_CASES) >= 16
    assert set(KNOWN_OP_DIFFERENCES) <= set(DYNAMIC_CASES_BY_NAME)
    for case in [*DYNAMIC_CASES, VAR_KWARGS_CASE]:
        assert set(case.skip) <= set(CHECKS), f"{case.name}: skip names unknown checks {set(case.skip)}"
        assert all(case.skip.values()), f"{case.name}: every skip needs a reason"
        assert len(case.in_range) >= 3, f"{case.name}: needs at least three in-range assignments"
        for override in (*case.in_range, case.out_of_range):
            assert set(override) <= set(case.example), f"{case.name}: {override} names sizes the example lacks"
        # Sizes that do not change any input shape would make "runs at other sizes" vacuous.
        example_shapes = _shapes(case.make_inputs(case.example, 0))
        for override in case.in_range:
            assert _shapes(case.make_inputs(case.sizes(override), 0)) != example_shapes, (
                f"{case.name}: in-range sizes {override} give the example's input shapes"
            )


# -- sizes each within range, but inconsistent with the spec ----------------------------------


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _nested_with_unequal_seq() -> tuple[tuple, dict]:
    batch = {"feats": _randn(2, 4), "seqs": [_randn(2, 3, 3), torch.ones(2, 4)]}
    return (batch,), {}


# (case, inputs, what the message must name).  Eager fails on most of these too, but with
# a message that names no input: a match shows the program's own input check refused them.
INCONSISTENT_INPUTS = [
    ("shared_batch_two_inputs", lambda: ((_randn(3, 8), _randn(4, 4)), {}), r"(?<!\w)[xy]\b"),
    ("derived_dims", lambda: ((_randn(3, 4), _randn(7, 4), _randn(4, 4)), {}), r"(?<!\w)[xy]\b"),
    ("derived_dims", lambda: ((_randn(3, 4), _randn(6, 4), _randn(5, 4)), {}), r"(?<!\w)[xz]\b"),
    ("static_none_and_int_entries", lambda: ((_randn(4, 5), _randn(4, 5), _randn(4, 5)), {}), r"(?<!\w)y\b"),
    ("gru_dynamic_batch_auto_seq", lambda: ((_randn(2, 5, 4), _randn(1, 3, 6)), {}), r"(?<!\w)(x|h0)\b"),
    ("nested_dict_list_inputs", _nested_with_unequal_seq, r"\bbatch\['seqs'\]"),
]


@pytest.mark.parametrize(
    "case_name, make_inputs, names",
    INCONSISTENT_INPUTS,
    ids=["unequal-shared-batch", "not-twice-d", "not-d-plus-1", "static-input-resized", "gru-h0-batch",
         "nested-unequal-seq"],
)
def test_rejects_inconsistent_sizes(case_name, make_inputs, names):
    unlifted = _exported(DYNAMIC_CASES_BY_NAME[case_name], export_fn).module()
    args, kwargs = make_inputs()
    with pytest.raises(Exception, match=names):
        unlifted(*args, **kwargs)


# -- a dynamic input that lands in **kwargs: the oracle cannot export it -----------------------


def test_oracle_cannot_export_dynamic_var_kwargs():
    """Pins the torch.export limitation that keeps VAR_KWARGS_CASE out of the corpus: torch 2.13
    refuses the spec, 2.14 and 2.15 export and then fail in ``run_decompositions``.

    When this starts failing, torch.export handles it: move the case into DYNAMIC_CASES.
    """
    with pytest.raises((AssertionError, NameError), match="Must provide a tree_name|name 'L' is not defined"):
        oracle_program(VAR_KWARGS_CASE)


@pytest.mark.skipif(ORACLE_MODE, reason="the oracle cannot export this case")
@pytest.mark.parametrize("check", ["matches_eager", "rejects_out_of_range"])
def test_dynamic_var_kwargs_input(check):
    run_check(check, VAR_KWARGS_CASE)


# -- the checks themselves catch broken exporters ----------------------------------------------


def _oracle_static(model, args, kwargs, dynamic_shapes):
    return harness.oracle_export(model, args, kwargs)


def _oracle_unbounded(model, args, kwargs, dynamic_shapes):
    unbounded = pytree.tree_map(lambda v: Dim.DYNAMIC if isinstance(v, Dim) else v, dynamic_shapes)
    return oracle_export(model, args, kwargs, unbounded)


def _oracle_with_extra_op(model, args, kwargs, dynamic_shapes):
    model = copy.deepcopy(model)
    model.register_forward_hook(lambda mod, args, out: pytree.tree_map(lambda t: t * 1, out))
    return oracle_export(model, args, kwargs, dynamic_shapes)


def _oracle_with_extra_buffer(model, args, kwargs, dynamic_shapes):
    model = copy.deepcopy(model)
    model.register_buffer("extra", torch.zeros(1))
    return oracle_export(model, args, kwargs, dynamic_shapes)


def _oracle_on_perturbed_weights(model, args, kwargs, dynamic_shapes):
    model = copy.deepcopy(model)
    with torch.no_grad():
        next(model.parameters()).add_(0.1)
    return oracle_export(model, args, kwargs, dynamic_shapes)


def _oracle_with_seq_specialized(model, args, kwargs, dynamic_shapes):
    dynamic_shapes = copy.copy(dynamic_shapes)
    dynamic_shapes["x"] = {0: dynamic_shapes["x"][0]}
    return oracle_export(model, args, kwargs, dynamic_shapes)


@pytest.mark.parametrize(
    "check, bad_export_fn, case_name",
    [
        ("matches_eager", _oracle_static, "shared_batch_two_inputs"),
        ("matches_eager", _oracle_on_perturbed_weights, "causal_sdpa_dynamic_seq"),
        ("rejects_out_of_range", _oracle_unbounded, "shared_batch_two_inputs"),
        ("range_constraints_match_oracle", _oracle_static, "shared_batch_two_inputs"),
        ("range_constraints_match_oracle", _oracle_unbounded, "shared_batch_two_inputs"),
        ("placeholder_shapes_match_oracle", _oracle_with_seq_specialized, "causal_sdpa_dynamic_seq"),
        ("values_match_oracle", _oracle_with_seq_specialized, "causal_sdpa_dynamic_seq"),
        ("signature_matches_oracle", _oracle_with_extra_buffer, "nested_dict_list_inputs"),
        ("ops_match_oracle", _oracle_with_extra_op, "derived_dims"),
    ],
    ids=["static-program", "wrong-weights", "no-upper-bound", "no-ranges", "wrong-ranges", "specialized-seq",
         "specialized-seq-values", "extra-buffer", "extra-op"],
)
def test_checks_detect_broken_exporter(check, bad_export_fn, case_name):
    with pytest.raises(AssertionError):
        CHECKS[check](DYNAMIC_CASES_BY_NAME[case_name], bad_export_fn)
