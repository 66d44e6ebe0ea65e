"""``exporter.export(..., ir="training")`` against torch.export's training IR and eager.

The oracle is ``torch.export.export(model, args, kwargs, strict=False)`` itself (no
``run_decompositions``): pre-dispatch ATen with writes kept in place and grad-mode/autocast
blocks as higher-order-op regions.  Over the static and dynamic e2e corpora each program
must have the oracle's signature, op multiset (subgraphs included) and module paths,
reproduce eager through ``ep.module()``, and lower with ``run_decompositions({})`` to what
``exporter.export`` returns by default.  Two downstream flows that start from the training
IR close the file: a fine-tuning step and pt2e quantization (torchao, ``-m downstream``).
"""

from __future__ import annotations

import copy
import operator

import pytest
import torch
import torch.nn as nn
from torch.export import ExportedProgram

import exporter
from tests.support import value_differences

from . import harness
from .cases import CASES, Case
from .dynamic_cases import DYNAMIC_CASES, DynamicCase
from .test_dynamic import _ranges, _tensor_ops, _unnumbered
from .test_dynamic import check_matches_eager as check_dynamic_matches_eager


def training_export(model: nn.Module, args: tuple, kwargs: dict) -> ExportedProgram:
    return exporter.export(model, args, kwargs, ir="training")


def dynamic_training_export(model: nn.Module, args: tuple, kwargs: dict, dynamic_shapes) -> ExportedProgram:
    return exporter.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, ir="training")


_REGION_OPS = (torch.ops.higher_order.wrap_with_set_grad_enabled, torch.ops.higher_order.wrap_with_autocast)


def _region_outputs_unnamed(ep: ExportedProgram, specs: list[tuple]) -> list[tuple]:
    """Output specs with the name of a value read out of a grad/autocast region replaced by
    ``<region output>``: torch.export names those after its own intermediate passes
    (``getitem_7``, or the op's name, ``mm_1``), which carry no meaning."""
    from_regions = {
        node.name
        for node in ep.graph.nodes
        if node.op == "call_function"
        and node.target is operator.getitem
        and isinstance(node.args[0], torch.fx.Node)
        and node.args[0].target in _REGION_OPS
    }
    return [(kind, "<region output>" if name in from_regions else name, *rest) for kind, name, *rest in specs]


def _assert_matches_training_oracle(name: str, ours: ExportedProgram, ref: ExportedProgram, *, stacks: bool) -> None:
    assert ours.dialect == ref.dialect == "TRAINING"
    ours_in, ours_out = harness._signature(ours)
    ref_in, ref_out = harness._signature(ref)
    harness.assert_same_signature(
        name, (ours_in, _region_outputs_unnamed(ours, ours_out)), (ref_in, _region_outputs_unnamed(ref, ref_out))
    )
    diff = harness.counter_difference(harness.op_counter(ours), harness.op_counter(ref))
    assert not diff, f"{name}: op counts differ from torch.export's training IR:\n{harness.format_counts(diff)}"
    problems, _ = value_differences(ours, ref)
    assert not problems, f"{name}: placeholder or output values differ from torch.export's training IR:\n" + "\n".join(problems)
    if stacks:
        diff = harness.counter_difference(harness._module_stack_counter(ours), harness._module_stack_counter(ref))
        assert not diff, f"{name}: (op, module paths) counts differ:\n{harness.format_counts(diff)}"


def _oracle_training(case: Case) -> ExportedProgram:
    args, kwargs = harness.clone_inputs(case.make_inputs(0))
    return torch.export.export(case.make_model(), args, kwargs, strict=False)


cases = pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)


@cases
def test_corpus(case):
    """One training-IR export per case, checked four ways: the model is left as it was; the
    program matches torch.export's training IR; ``run_decompositions({})`` of it is the
    program exporter makes by default; ``ep.module()`` reproduces eager (last: running it
    updates the program's buffers)."""
    model = case.make_model()
    before = harness.snapshot_model(model)
    args, kwargs = harness.clone_inputs(case.make_inputs(0))
    ours = training_export(model, args, kwargs)
    harness.assert_model_unchanged(model, before, f"{case.name}: ")

    _assert_matches_training_oracle(
        case.name, ours, _oracle_training(case), stacks="module_stack_matches_oracle" not in case.skip
    )

    lowered = ours.run_decompositions({})
    args, kwargs = harness.clone_inputs(case.make_inputs(0))
    default = exporter.export(case.make_model(), args, kwargs)
    assert lowered.dialect == default.dialect == "ATEN"
    harness.assert_same_signature(case.name, harness._signature(lowered), harness._signature(default))
    diff = harness.counter_difference(harness.op_counter(lowered), harness.op_counter(default))
    assert not diff, f"{case.name}: run_decompositions({{}}) differs from the default IR:\n{harness.format_counts(diff)}"

    if "matches_eager" not in case.skip:
        harness.check_matches_eager(case, lambda *_: ours)


dynamic_cases = pytest.mark.parametrize("case", DYNAMIC_CASES, ids=lambda c: c.name)


@dynamic_cases
def test_dynamic_matches_the_training_oracle_and_eager(case: DynamicCase):
    args, kwargs = harness.clone_inputs(case.make_inputs(case.example, 0))
    ours = dynamic_training_export(case.make_model(), args, kwargs, case.make_dynamic_shapes())
    args, kwargs = harness.clone_inputs(case.make_inputs(case.example, 0))
    ref = torch.export.export(case.make_model(), args, kwargs, dynamic_shapes=case.make_dynamic_shapes(), strict=False)
    assert _ranges(ours) == _ranges(ref), f"{case.name}: range_constraints differ"
    ours_in, ours_out = harness._signature(ours)
    ref_in, ref_out = harness._signature(ref)
    harness.assert_same_signature(case.name, (ours_in, _unnumbered(ours_out)), (ref_in, _unnumbered(ref_out)))
    # Size arithmetic may be spelled differently (see test_dynamic._tensor_ops).
    diff = harness.counter_difference(_tensor_ops(harness.op_counter(ours)), _tensor_ops(harness.op_counter(ref)))
    assert not diff, f"{case.name}: op counts differ:\n{harness.format_counts(diff)}"
    if "values_match_oracle" not in case.skip:
        problems, _ = value_differences(ours, ref)
        assert not problems, f"{case.name}: placeholder or output values differ:\n" + "\n".join(problems)
    if "matches_eager" not in case.skip:
        check_dynamic_matches_eager(case, lambda *_: ours)  # at every in-range size the case lists


# -- what the training IR keeps ---------------------------------------------------------------


class _Regions(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.0)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls += 1
        h = self.bn(self.lin(x))
        with torch.no_grad():
            frozen = h * 2
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = torch.mm(h, h.t())
            with torch.autocast("cpu", enabled=False):
                high = torch.mm(h, h.t())
        x.mul_(2)
        return self.drop(h) + frozen, low, high, x.view(-1)


class _Holds(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b2", torch.ones(3))
        self.c2 = torch.full((3,), 2.0)  # a plain tensor attribute: a constant input
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x * self.c2 + self.b2 + self.w * torch.tensor(0.5)  # a tensor made here


class _OnlyBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", torch.full((3,), 0.25), persistent=False)

    def forward(self, x):
        return x * self.inv_freq


class ConstantsAmongState(nn.Module):
    """Constants on the root and on two children, buffers on all of them (one child has
    nothing else, and comes first), tensors made in forward at several depths, one of them
    unused: the IRs order and name state inputs each in their own way."""

    def __init__(self):
        super().__init__()
        self.pos = _OnlyBuffers()
        self.c1 = torch.full((3,), 3.0)
        self.sub = _Holds()
        self.register_buffer("b1", torch.ones(3))
        self.sub2 = _Holds()

    def forward(self, x=None):
        unused = torch.tensor(3)  # noqa: F841 - torch.export drops it, constant and all
        h = self.sub2(self.sub(self.pos(x if x is not None else self.b1))) + self.c1
        return h + self.b1 * torch.tensor(2.0)


@pytest.mark.parametrize("ir", ["training", "inference"])
@pytest.mark.parametrize("args", [(torch.randn(3),), ()], ids=["user input", "no user input"])
def test_state_inputs_are_ordered_and_named_as_the_oracle_has_them(args, ir):
    """Training IR: parameters, buffers (as the module lists them), then constants as first
    read, then user inputs; with no user input the constants come first.  The default IR
    keeps a module's buffers and constants together, as run_decompositions does.  In both,
    a tensor made in a submodule's forward is named under that submodule
    (``sub.lifted_tensor_0``)."""
    ours = exporter.export(ConstantsAmongState(), args, ir=ir)
    oracle = torch.export.export(ConstantsAmongState(), args)
    if ir == "inference":
        oracle = oracle.run_decompositions({})
    assert "sub.lifted_tensor_0" in ours.constants
    assert ours.graph_signature == oracle.graph_signature
    assert [n.name for n in ours.graph.nodes if n.op == "placeholder"] == [
        n.name for n in oracle.graph.nodes if n.op == "placeholder"
    ]
    torch.testing.assert_close(ours.module()(*args), ConstantsAmongState()(*args))


def test_regions_writes_and_composites_are_kept_as_torch_export_keeps_them():
    torch.manual_seed(0)
    model = _Regions().train()
    x = torch.randn(3, 4)
    ours = exporter.export(model, (x.clone(),), ir="training")
    ref = torch.export.export(copy.deepcopy(model), (x.clone(),), strict=False)
    _assert_matches_training_oracle("regions", ours, ref, stacks=True)
    targets = {str(n.target) for n in ours.graph.nodes if n.op == "call_function"}
    assert {"aten.linear.default", "aten.batch_norm.default", "aten.dropout.default", "aten.mul_.Tensor"} <= targets
    assert {"wrap_with_set_grad_enabled", "wrap_with_autocast"} <= targets
    assert all(spec.kind.name == "USER_OUTPUT" for spec in ours.graph_signature.output_specs)
    # ep.module() runs it, writes included: the buffer counts calls, the input is doubled.
    eager = copy.deepcopy(model)
    unlifted = ours.module()
    a, b = x.clone(), x.clone()
    expected, got = eager(a), unlifted(b)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(b, a)
    assert unlifted.calls.item() == eager.calls.item() == 1


def test_a_program_saved_and_loaded_stays_training_ir(tmp_path):
    torch.manual_seed(0)
    model = _Regions().eval()
    x = torch.randn(3, 4)
    ep = exporter.export(model, (x.clone(),), ir="training")
    torch.export.save(ep, tmp_path / "p.pt2")
    loaded = torch.export.load(tmp_path / "p.pt2")
    assert loaded.dialect == "TRAINING"
    for e, g in zip(model(x.clone()), loaded.module()(x.clone())):
        torch.testing.assert_close(g, e)


def test_an_unknown_ir_is_refused_with_the_choices():
    with pytest.raises(exporter.InputSpecError, match="ir='inference'.*ir='training'"):
        exporter.export(nn.Linear(2, 2), (torch.randn(1, 2),), ir="pre-dispatch")


# -- downstream ---------------------------------------------------------------------------------


def test_fine_tuning_from_the_training_ir_follows_eager():
    """Train ``ep.module()`` a few steps: losses and weights follow the eager model's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2)).train()
    x = torch.randn(6, 8)
    eager = copy.deepcopy(model)
    tuned = exporter.export(model, (x,), ir="training").module()
    opt_eager = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_tuned = torch.optim.SGD(tuned.parameters(), lr=0.1)
    for step in range(3):
        batch = torch.randn(6, 8, generator=torch.Generator().manual_seed(step))
        target = torch.randint(0, 2, (6,), generator=torch.Generator().manual_seed(100 + step))
        losses = []
        for net, opt in ((eager, opt_eager), (tuned, opt_tuned)):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(batch), target)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0])
    for (name, p_eager), (_, p_tuned) in zip(eager.state_dict().items(), tuned.state_dict().items()):
        torch.testing.assert_close(p_tuned, p_eager, msg=lambda m: f"{name}: {m}")


class _ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


@pytest.mark.downstream
def test_pt2e_quantization_of_the_training_ir_equals_torch_exports():
    """torchao's pt2e prepare/calibrate/convert gives the same quantized model from our
    training IR as from torch.export's, and it stays close to the float model."""
    pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")

    def quantize(ep: ExportedProgram) -> torch.fx.GraphModule:
        quantizer = x86.X86InductorQuantizer()
        quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
        prepared = pt2e.prepare_pt2e(ep.module(), quantizer)
        for seed in range(4):
            prepared(torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed)))
        return pt2e.convert_pt2e(prepared)

    torch.manual_seed(0)
    model = _ConvNet().eval()
    x = torch.randn(2, 3, 8, 8)
    ours = quantize(exporter.export(model, (x,), ir="training"))
    ref = quantize(torch.export.export(model, (x,), strict=False))

    def ops(gm):
        return sorted(str(n.target) for n in gm.graph.nodes if n.op == "call_function")

    assert ops(ours) == ops(ref)
    assert "quantized_decomposed.quantize_per_tensor.default" in ops(ours)
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=0)
    torch.testing.assert_close(ours(x), model(x), rtol=0.05, atol=0.05)


class _FoldedLinear(nn.Module):
    """A linear over an expanded slice of a dynamic input (fuzz seed 3781): matmul's
    decomposition only checks strides (guarding on the dynamic size) when the weight does
    not require grad, which in an autograd-visible trace it does."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x):
        return self.lin(x[:, :, :1].expand(-1, -1, 5, -1))


def test_the_training_ir_is_traced_autograd_visible_as_torch_exports_is():
    torch.manual_seed(0)
    model = _FoldedLinear()
    x = torch.randn(3, 3, 4, 5, requires_grad=True)
    spec = ({2: torch.export.Dim("s", min=2)},)
    ours = exporter.export(model, (x,), dynamic_shapes=spec, ir="training")
    ref = torch.export.export(model, (x,), dynamic_shapes=spec, strict=False)
    assert _ranges(ours) == _ranges(ref)

    def requires_grad(ep):
        return [n.meta["val"].requires_grad for n in ep.graph.nodes if n.op == "placeholder"]

    assert requires_grad(ours) == requires_grad(ref) == [True, True, True]
    y = torch.randn(3, 3, 7, 5)
    torch.testing.assert_close(ours.module()(y), model(y))


class _Vmapped(nn.Module):
    """torch.vmap inside forward: the training IR keeps functorch's level and batch-dim calls."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.vmap(lambda row: self.lin(row).sin())(x) + 1


def test_vmap_in_the_model_is_kept_as_torch_export_keeps_it():
    torch.manual_seed(0)
    model, x = _Vmapped(), torch.randn(3, 4)
    ours = exporter.export(model, (x,), ir="training")
    _assert_matches_training_oracle("vmap", ours, torch.export.export(model, (x,), strict=False), stacks=False)
    assert any("vmap_increment_nesting" in str(n.target) for n in ours.graph.nodes)
    torch.testing.assert_close(ours.module()(x), model(x))
    lowered, default = ours.run_decompositions({}), exporter.export(model, (x,))
    assert not harness.counter_difference(harness.op_counter(lowered), harness.op_counter(default))
