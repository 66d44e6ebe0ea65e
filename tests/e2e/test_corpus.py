"""exporter.export against eager execution and the torch.export oracle, over the model corpus."""

from __future__ import annotations

import copy
import os
import re

import pytest
import torch
import torch.nn as nn

import exporter

from . import harness
from .cases import CASES, CASES_BY_NAME, TRANSFORMER_CASES, Case

# Cases whose un-lowered op multiset may differ from oracle.run_decompositions({}):
# {case name: reason, with the observed difference}.  A listed case that matches fails,
# so the list cannot rot.
KNOWN_OP_DIFFERENCES: dict[str, str] = {
}


# E2E_EXPORT_FN=oracle runs the corpus with the oracle as the exporter, to validate the harness.
ORACLE_MODE = os.environ.get("E2E_EXPORT_FN") == "oracle"


def export_fn(model, args, kwargs):
    """The exporter under test."""
    if ORACLE_MODE:
        return harness.oracle_export(model, args, kwargs)
    return exporter.export(model, args, kwargs)


def run_check(check: str, case: Case, fn=export_fn):
    """Run one harness check, honouring the case's declared skips."""
    if check in case.skip:
        pytest.skip(case.skip[check])
    return harness.CHECKS[check](case, fn)


def assert_unlowered_ops(case: Case, known: dict[str, str], fn=export_fn) -> None:
    """Un-lowered op multiset equals the oracle's, unless the case is a declared known difference."""
    diff = harness.unlowered_op_difference(case, fn)
    reason = None if ORACLE_MODE else known.get(case.name) or case.known_op_difference
    harness.assert_op_difference_as_declared(case.name, diff, reason)


cases = pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)


@cases
def test_matches_eager(case):
    run_check("matches_eager", case)


@cases
def test_signature_matches_oracle(case):
    run_check("signature_matches_oracle", case)


@cases
def test_values_match_oracle(case):
    run_check("values_match_oracle", case)


@cases
def test_core_aten_ops_match_oracle(case):
    run_check("ops_match_oracle", case)


@cases
def test_unlowered_ops_match_oracle(case):
    assert_unlowered_ops(case, KNOWN_OP_DIFFERENCES)


@cases
def test_module_stack_matches_oracle(case):
    run_check("module_stack_matches_oracle", case)


@cases
def test_model_unchanged(case):
    run_check("model_unchanged", case)


@cases
def test_vals_match_real_run(case):
    run_check("vals_match_real_run", case)


@cases
def test_save_load_roundtrip(case):
    run_check("save_load_roundtrip", case)


def test_corpus_registry_is_consistent():
    assert len(CASES) >= 32
    for name in KNOWN_OP_DIFFERENCES:
        assert name in CASES_BY_NAME, f"KNOWN_OP_DIFFERENCES names unknown case {name!r}"
    for case in CASES:
        assert set(case.skip) <= set(harness.CHECKS), f"{case.name}: skip names unknown checks {set(case.skip)}"
        assert all(case.skip.values()), f"{case.name}: every skip needs a reason"


# -- the model is unchanged when export fails --------------------------------------------------


class _RaisesMidway(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        self.cache = x
        self.eval()
        h = self.lin(x)
        raise RuntimeError(f"forward gave up after computing {tuple(h.shape)}")


class _BranchesOnDataMidway(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.cache = x
        self.eval()
        self.steps.add_(1)
        self.lin.register_forward_hook(lambda mod, args, out: out * 2)
        self.register_buffer("scratch", x.detach())
        self.extra = nn.Linear(3, 3)
        h = self.lin(x)
        for _ in range(h.gt(0).sum()):  # as many times as the data says: not exportable
            h = h * 0.5
        return h


@pytest.mark.parametrize("cls", [_RaisesMidway, _BranchesOnDataMidway], ids=lambda c: c.__name__.lstrip("_"))
def test_model_unchanged_when_export_fails(cls):
    torch.manual_seed(0)
    model = cls().train()
    before = harness.snapshot_model(model)
    x = torch.randn(2, 3)
    with pytest.raises(exporter.ExportError):
        exporter.export(model, (x,))
    harness.assert_model_unchanged(model, before)
    assert model.training and all(m.training for m in model.modules())
    assert "cache" not in vars(model)


# -- the harness itself catches broken exporters -----------------------------------------------


def _oracle_leaving_eval(model, args, kwargs):
    ep = harness.oracle_export(model, args, kwargs)
    model.eval()
    return ep


def _oracle_leaving_attribute(model, args, kwargs):
    ep = harness.oracle_export(model, args, kwargs)
    model.leftover = [torch.zeros(1)]
    return ep


def _oracle_on_perturbed_weights(model, args, kwargs):
    model = copy.deepcopy(model)
    with torch.no_grad():
        next(model.parameters()).add_(0.1)
    return harness.oracle_export(model, args, kwargs)


def _oracle_lowered(model, args, kwargs):
    return harness.oracle_export(model, args, kwargs).run_decompositions()


def _oracle_in_eval_mode(model, args, kwargs):
    return harness.oracle_export(copy.deepcopy(model).eval(), args, kwargs)


def _oracle_with_extra_op(model, args, kwargs):
    model = copy.deepcopy(model)
    model.register_forward_hook(lambda mod, args, out: out * 1)
    return harness.oracle_export(model, args, kwargs)


def _oracle_with_frozen_parameters(model, args, kwargs):
    model = copy.deepcopy(model).requires_grad_(False)
    return harness.oracle_export(model, args, kwargs)


def _oracle_with_extra_buffer(model, args, kwargs):
    model = copy.deepcopy(model)
    model.register_buffer("extra", torch.zeros(1))
    return harness.oracle_export(model, args, kwargs)


@pytest.mark.parametrize(
    "check, bad_export_fn, case_name",
    [
        ("model_unchanged", _oracle_leaving_eval, "conv_bn_train"),
        ("model_unchanged", _oracle_leaving_attribute, "mlp"),
        ("matches_eager", _oracle_on_perturbed_weights, "mlp"),
        ("matches_eager", _oracle_in_eval_mode, "conv_bn_train"),
        ("module_stack_matches_oracle", _oracle_lowered, "mlp"),
        ("ops_match_oracle", _oracle_with_extra_op, "mlp"),
        ("signature_matches_oracle", _oracle_with_extra_buffer, "nested_pytree_io"),
        ("values_match_oracle", _oracle_with_frozen_parameters, "mlp"),
    ],
    ids=["eval-left-on", "attribute-left-on", "wrong-weights", "train-mode-lost", "lowered-ops",
         "extra-op", "extra-buffer-signature", "frozen-parameter-values"],
)
def test_harness_detects_broken_exporter(check, bad_export_fn, case_name):
    with pytest.raises(AssertionError):
        harness.CHECKS[check](CASES_BY_NAME[case_name], bad_export_fn)


def test_harness_detects_unlowered_op_difference():
    diff = harness.unlowered_op_difference(CASES_BY_NAME["mlp"], _oracle_lowered)
    assert "aten.linear.default" in diff and diff["aten.linear.default"][0] == 0


def test_grad_mode_region_keeps_module_paths_where_the_oracle_drops_them():
    """The one declared module-stack deviation, pinned exactly (see the grad_mode_regions case)."""
    case = CASES_BY_NAME["grad_mode_regions"]
    ours = harness._module_stack_counter(harness._export(case, export_fn))
    ref = harness._module_stack_counter(harness.oracle_program(case))
    diff = harness.counter_difference(ours, ref)
    if ORACLE_MODE:
        assert not diff
        return
    assert diff == {
        ("aten.linear.default", ("", "a")): (1, 0),
        ("aten.linear.default", ("",)): (0, 1),
    }, harness.format_counts(diff)


def _graph_fingerprint(gm: torch.fx.GraphModule) -> list[tuple]:
    """Everything about every node, subgraphs included; generated-code file numbers masked."""

    def trace(node):
        return re.sub(r"<eval_with_key>\.\d+", "<eval_with_key>", node.meta.get("stack_trace") or "")

    rows = []
    for module_name, module in gm.named_modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        rows += [
            (
                module_name,
                n.op,
                n.name,
                str(n.target),
                str(n.args),
                str(n.kwargs),
                trace(n),
                tuple((n.meta.get("nn_module_stack") or {}).items()),
                str(n.meta.get("val")),
            )
            for n in module.graph.nodes
        ]
    return rows


@pytest.mark.skipif(ORACLE_MODE, reason="checks exporter's own tracer")
@pytest.mark.parametrize("case", CASES + TRANSFORMER_CASES, ids=lambda c: c.name)
def test_trace_without_functionalization_only_when_it_changes_nothing(case):
    """The first, unfunctionalized trace is kept only when it equals the functionalized one."""
    from exporter.inputs import bind_inputs
    from exporter.trace import trace

    model = case.make_model()
    bound = bind_inputs(model, *case.make_inputs(0))
    fast = trace(model, bound)
    functional = trace(model, bound, always_functionalize=True)
    assert _graph_fingerprint(fast.gm) == _graph_fingerprint(functional.gm)
    assert [(s.kind, s.target) for s in fast.output_specs] == [(s.kind, s.target) for s in functional.output_specs]
