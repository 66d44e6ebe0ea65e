"""Tracing: error categories with the user's source line, mutations, and global state."""

import operator
import json
import warnings

import pytest
import torch
from torch.export.graph_signature import OutputKind

import exporter
from exporter import TraceError
from tests.support import value_differences

HERE = __file__


@torch.library.custom_op("exporter_tests::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


class BranchOnData(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # line-marker: branch
            return x + 1
        return x - 1


class LoopsOnData(torch.nn.Module):
    def forward(self, x):
        for _ in range(x.gt(0).sum()):  # line-marker: loop
            x = x * 0.5
        return x


class SizeFromData(torch.nn.Module):
    def forward(self, x):
        return x[: operator.index(x.max().long())]  # line-marker: item


class CustomOpWithoutFake(torch.nn.Module):
    def forward(self, x):
        return no_fake(x) + 1  # line-marker: custom


class Raises(torch.nn.Module):
    def forward(self, x):
        raise ValueError("bad config")  # line-marker: raise


class TransposesInput(torch.nn.Module):
    def forward(self, x):
        x.transpose_(0, 1)  # line-marker: transpose_
        return x + 1


class ReplacesBufferShape(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(3))

    def forward(self, x):
        self.buf = torch.cat([self.buf, x])  # line-marker: grows
        return x


class ReplacesBufferDtype(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(2))

    def forward(self, x):
        self.buf = self.buf + x  # line-marker: dtype
        return x


class Prints(torch.nn.Module):
    def forward(self, x):
        torch.ops.aten._print("called")  # line-marker: print
        return x + 1


def _line(marker):
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if f"line-marker: {marker}" in line:
                return f"{HERE}:{i}"
    raise AssertionError(marker)


@pytest.mark.parametrize(
    "model, options, category, marker, match",
    [
        # a branch on a value is captured as torch.cond unless refused
        (BranchOnData(), {"branches": "refuse"}, "data-dependent control flow", "branch",
         r"needs the value of a tensor to decide what to do \(`if x.sum\(\) > 0:  # line-marker: branch`\)"),
        (LoopsOnData(), {}, "data-dependent control flow", "loop",
         r"needs the value of a tensor to decide what to do \(`for _ in range\(x.gt\(0\).sum\(\)\):  # line-marker: loop`\)"),
        (SizeFromData(), {}, "data-dependent control flow", "item", "needs the value of a tensor"),
        (CustomOpWithoutFake(), {}, "unsupported operator", "custom", "cannot run on fake tensors"),
    ],
)
def test_failures_name_category_and_user_line(model, options, category, marker, match):
    with pytest.raises(TraceError, match=match) as info:
        exporter.export(model, (torch.randn(2, 2),), **options)
    assert info.value.category.value == category
    assert info.value.location == _line(marker)
    assert info.value.hint


@pytest.mark.parametrize(
    "model, x, match, marker, hint",
    [
        (TransposesInput(), torch.randn(2, 3),
         r"changed the shape, strides or storage of args\[0\] in place \(`x.transpose_\(0, 1\)", "transpose_",
         "out-of-place op"),
        (ReplacesBufferShape(), torch.randn(2),
         r"replaced buffer 'buf' \(\(3,\) torch.float32\) with \(5,\) torch.float32", "grows",
         "allocate the buffer at its largest shape"),
        (ReplacesBufferDtype(), torch.randn(2, dtype=torch.float64),
         r"replaced buffer 'buf' \(\(2,\) torch.float32\) with \(2,\) torch.float64", "dtype",
         "new.to(self.buf.dtype)"),
    ],
)
def test_mutations_a_program_cannot_express_are_refused_at_the_users_line(model, x, match, marker, hint):
    with pytest.raises(TraceError, match=match) as info:
        exporter.export(model, (x,))
    assert info.value.category.value == "unsupported mutation"
    assert info.value.location == _line(marker)
    assert hint in info.value.hint


def test_a_side_effectful_operator_is_named_at_the_users_line():
    with pytest.raises(TraceError, match=r"side-effectful operator \(aten._print.default\) \(`torch.ops.aten._print") as info:
        exporter.export(Prints(), (torch.randn(2),))
    assert info.value.category.value == "unsupported operator"
    assert info.value.location == _line("print")
    assert "out of forward()" in info.value.hint and "custom ops" not in info.value.hint


class Reassigns(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.total = self.total + x
        self.count.add_(1)
        x[:1].mul_(10)
        return x.sum()


def test_buffer_reassignment_and_input_view_mutation_become_outputs_and_replay():
    model = Reassigns()
    ep = exporter.export(model, (torch.ones(3),))
    kinds = [(s.kind, s.target) for s in ep.graph_signature.output_specs]
    assert kinds == [
        (OutputKind.BUFFER_MUTATION, "total"),
        (OutputKind.BUFFER_MUTATION, "count"),
        (OutputKind.USER_INPUT_MUTATION, "x"),
        (OutputKind.USER_OUTPUT, None),
    ]
    assert torch.equal(model.total, torch.zeros(3)), "exporting must not run the update"

    eager, program = Reassigns(), ep.module()
    for _ in range(2):
        a = torch.randn(3)
        b = a.clone()
        torch.testing.assert_close(program(b), eager(a))
        torch.testing.assert_close(b, a)
    torch.testing.assert_close(program.total, eager.total)
    assert int(program.count) == int(eager.count) == 2


class TouchesGlobals(torch.nn.Module):
    seen = {}

    def forward(self, x):
        TouchesGlobals.seen = {
            "compiling": torch.compiler.is_compiling(),
            "exporting": torch.compiler.is_exporting(),
            "mkldnn": torch.backends.mkldnn.enabled,
        }
        torch.set_grad_enabled(False)
        return x * 2


def test_tracing_environment_is_set_during_forward_and_restored_after():
    mkldnn_before = torch.backends.mkldnn.enabled
    with torch.enable_grad():
        exporter.export(TouchesGlobals(), (torch.randn(2),))
        assert torch.is_grad_enabled(), "grad mode switched off in forward must not leak"
    assert TouchesGlobals.seen == {"compiling": True, "exporting": True, "mkldnn": False}
    assert not torch.compiler.is_compiling() and not torch.compiler.is_exporting()
    assert torch.backends.mkldnn.enabled == mkldnn_before


class NeedsSixteen(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 4)
        self.bn = torch.nn.BatchNorm1d(16)

    def forward(self, x):
        return self.lin(self.bn(x))


def test_inputs_the_model_cannot_take_even_eagerly_are_an_input_error():
    model = NeedsSixteen().train()
    stats = model.bn.running_mean.clone()
    with pytest.raises(exporter.InputSpecError, match="fails on the example inputs even when run eagerly") as info:
        exporter.export(model, (torch.randn(4, 3),))
    assert info.value.location and info.value.location.endswith(".py:" + info.value.location.rsplit(":", 1)[1])
    assert isinstance(info.value.__cause__, TraceError)
    torch.testing.assert_close(model.bn.running_mean, stats), "the eager check must not update buffers"


def test_a_model_that_fails_eagerly_too_is_blamed_with_its_line():
    with pytest.raises(exporter.InputSpecError, match="even when run eagerly.*ValueError: bad config") as info:
        exporter.export(Raises(), (torch.randn(2, 2),))
    assert info.value.location == _line("raise")


class NeedsRealValues(torch.nn.Module):
    def forward(self, x):
        return x * len(json.dumps(x.tolist()))  # line-marker: json


def test_an_export_only_failure_says_the_model_runs_eagerly():
    with pytest.raises(TraceError, match="raised .* while running on fake tensors") as info:
        exporter.export(NeedsRealValues(), (torch.randn(4),))
    assert info.value.category.value == "model error"
    assert info.value.location == _line("json")
    assert "the model runs eagerly on these inputs, so this is an export problem" in info.value.hint


def test_tensor_subclass_state_is_traced_as_its_inner_tensors():
    from torch.testing._internal.two_tensor import TwoTensor

    class SubclassWeight(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Module()
            self.inner.weight = torch.nn.Parameter(TwoTensor(torch.ones(3), torch.full((3,), 2.0)))

        def forward(self, x):
            return x + (x * self.inner.weight).a

    model = SubclassWeight()
    ep = exporter.export(model, (torch.randn(3),))
    assert [s.target for s in ep.graph_signature.input_specs[:2]] == [
        "inner.parametrizations.weight.original0",
        "inner.parametrizations.weight.original1",
    ]
    assert type(ep.state_dict["inner.parametrizations.weight.original0"]) is torch.nn.Parameter
    x = torch.randn(3)
    torch.testing.assert_close(ep.module()(x), model(x))
    assert isinstance(model.inner.weight, TwoTensor) and isinstance(model.inner.weight, torch.nn.Parameter)


class _Counted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3))
        self.inner = torch.nn.Module()
        self.inner.register_buffer("last", torch.zeros(3))

    def forward(self, x):
        self.total += x  # assigns the same tensor: torch.export's training IR writes it back
        self.inner.last = x * 2  # a new tensor on a submodule
        return self.total + self.inner.last


def test_the_training_trace_keeps_writes_and_writes_reassigned_buffers_back():
    from exporter.trace import trace
    from exporter.inputs import bind_inputs

    model = _Counted()
    state = trace(model, bind_inputs(model, (torch.ones(3),), None), training=True)
    assert state.training
    placeholders = {n.name: n for n in state.gm.graph.nodes if n.op == "placeholder"}
    by_target = {spec.target: placeholders[spec.arg.name] for spec in state.input_specs if spec.target}
    copies = [n for n in state.gm.graph.nodes if n.target is torch.ops.aten.copy_.default]
    assert [c.args[0] for c in copies] == [by_target["total"], by_target["inner.last"]]
    assert copies[0].args[1].target is torch.ops.aten.add_.Tensor
    assert copies[1].args[1].target is torch.ops.aten.mul.Tensor
    assert copies[-1].next.op == "output"
    assert [spec.kind.name for spec in state.output_specs] == ["USER_OUTPUT"]

    ep = exporter.export(_Counted(), (torch.ones(3),), ir="training")
    unlifted, eager = ep.module(), _Counted()
    for _ in range(2):
        torch.testing.assert_close(unlifted(torch.ones(3)), eager(torch.ones(3)))
    torch.testing.assert_close(unlifted.total, eager.total)
    torch.testing.assert_close(unlifted.inner.last, eager.inner.last)
    # torch.export's training IR writes back only the root module's buffers: its program
    # keeps the submodule's old value (the one deliberate difference, listed in the training IR guide)
    oracle = torch.export.export(_Counted(), (torch.ones(3),), strict=False).module()
    oracle(torch.ones(3))
    assert torch.equal(oracle.inner.last, torch.zeros(3))


class _Regrown(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2))

    def forward(self, x):
        self.cache = torch.cat([self.cache, x])
        return self.cache.sum()


def test_the_training_trace_refuses_a_buffer_replaced_with_another_shape():
    with pytest.raises(exporter.TraceError, match=r"replaced buffer 'cache' \(\(2,\)"):
        exporter.export(_Regrown(), (torch.ones(1),), ir="training")


class WritesInputPassedTwice(torch.nn.Module):
    def forward(self, x, y):
        x.add_(1)
        return x + y


class WritesBufferOfTwoNames(torch.nn.Module):
    def __init__(self):
        super().__init__()
        shared = torch.zeros(4)
        self.register_buffer("a", shared)
        self.register_buffer("b", shared)

    def forward(self, x):
        self.a.add_(x)
        return self.b * 2


@pytest.mark.parametrize("ir", ["inference", "training"])
def test_a_write_to_one_tensor_under_two_names_updates_both(ir):
    """torch.export's default IR fails on these (an internal AssertionError); exporter's
    default IR gave both updates one node, which torch's signature cannot name twice, and
    its own check rejected the program.  The second update now reads an alias."""
    t = torch.randn(2, 3)
    ep = exporter.export(WritesInputPassedTwice(), (t, t), ir=ir)
    oracle = torch.export.export(WritesInputPassedTwice(), (t, t), strict=False)
    if ir == "training":
        assert ep.graph_signature == oracle.graph_signature
    else:
        assert [s.kind for s in ep.graph_signature.output_specs] == [
            OutputKind.USER_INPUT_MUTATION, OutputKind.USER_INPUT_MUTATION, OutputKind.USER_OUTPUT]
    mine, eager = t.clone(), t.clone()
    torch.testing.assert_close(ep.module()(mine, mine), WritesInputPassedTwice()(eager, eager))
    torch.testing.assert_close(mine, eager)

    x = torch.randn(4)
    model, program = WritesBufferOfTwoNames(), exporter.export(WritesBufferOfTwoNames(), (x,), ir=ir)
    module = program.module()
    for _ in range(2):
        torch.testing.assert_close(module(x), model(x))
    torch.testing.assert_close(module.a, model.a)
    assert module.a.data_ptr() == module.b.data_ptr()


class _Averaged(torch.nn.Module):
    """A buffer that forward writes a value requiring grad into (a running average of a
    weight), one it writes a constant into, and a frozen parameter."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.frozen = torch.nn.Parameter(torch.ones(4), requires_grad=False)
        self.register_buffer("ema", torch.zeros(4))
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x, y):
        self.ema.mul_(0.9).add_(self.lin.weight.sum(0) * 0.1)
        self.steps.add_(1)
        return self.lin(x) + self.ema * self.frozen + y


def _averaged_programs(ir: str, grad: bool):
    args = (torch.randn(3, 4), torch.randn(4, requires_grad=True))
    with torch.set_grad_enabled(grad):
        ours = exporter.export(_Averaged(), args, ir=ir)
        oracle = torch.export.export(_Averaged(), args, strict=False)
        return ours, oracle.run_decompositions({}) if ir == "inference" else oracle


def _placeholder_requires_grad(ep, key: str = "val") -> dict[str, bool]:
    return {n.name: n.meta[key].requires_grad for n in ep.graph.nodes if n.op == "placeholder"}


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("ir", ["inference", "training"])
def test_a_placeholder_requires_grad_as_its_input_does_when_passed(ir, grad):
    ours, oracle = _averaged_programs(ir, grad)
    received = {
        "p_lin_weight": True, "p_lin_bias": True, "p_frozen": False, "b_ema": False, "b_steps": False, "x": False, "y": True,
    }
    assert _placeholder_requires_grad(ours) == received
    assert _placeholder_requires_grad(ours, "tensor_meta") == _placeholder_requires_grad(oracle, "tensor_meta") == received
    # torch.export's values agree, but for the buffer forward writes a value requiring grad
    # into in grad mode: its value is the fake as forward left it
    assert _placeholder_requires_grad(oracle) == {**received, "b_ema": grad}
    problems, known = value_differences(ours, oracle)
    assert problems == []
    assert known == (["input 3 (BUFFER ema): requires_grad False (oracle True): requires_grad of an input forward writes to"] if grad else [])


def _placeholder_values(ep) -> list:
    return [n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder"]


_LEAF_WRITTEN = "a leaf Variable that requires grad is being used in an in-place operation"


def test_the_training_ir_runs_on_its_own_placeholder_values_where_torch_exports_cannot():
    """Why exporter differs (``KNOWN_VALUE_DIFFERENCES``): torch.export's ``ema`` placeholder
    is a leaf that requires grad, so its graph's ``mul_`` on it fails in grad mode."""
    ours, oracle = _averaged_programs("training", grad=True)
    with torch.enable_grad():
        values = _placeholder_values(ours)
        with values[0].fake_mode:
            torch.fx.Interpreter(ours.graph_module).run(*values)
        values = _placeholder_values(oracle)
        with values[0].fake_mode, pytest.raises(RuntimeError, match=_LEAF_WRITTEN):
            torch.fx.Interpreter(oracle.graph_module).run(*values)


def test_a_buffer_update_can_be_written_back_into_its_placeholder_where_torch_exports_cannot():
    """Why exporter differs in the default IR: a write-back of ``ema``'s update into its
    placeholder value (as ExecuTorch makes it) fails in grad mode on torch.export's."""

    def write_back(ep) -> None:
        placeholder = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == "b_ema")
        index = next(i for i, s in enumerate(ep.graph_signature.output_specs) if s.target == "ema")
        update = ep.graph.output_node().args[0][index].meta["val"]
        with update.fake_mode:
            placeholder.meta["val"].copy_(update)

    ours, oracle = _averaged_programs("inference", grad=True)
    with torch.enable_grad():
        write_back(ours)
        with pytest.raises(RuntimeError, match=_LEAF_WRITTEN):
            write_back(oracle)


class RelativePositions(torch.nn.Module):
    """A relative-position table rebuilt for the input's length, as vision models do."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.zeros(4, 4))

    def forward(self, x):
        n = x.shape[1]
        if self.table.shape[0] != n:
            idx = torch.arange(n)
            self.table = (idx[:, None] - idx[None, :]).float()  # line-marker: rebuilt
        return x + self.table.sum(0)


class HoldsRelativePositions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.rel = RelativePositions()

    def forward(self, x):
        return self.rel(self.proj(x))


@pytest.mark.parametrize("holder", [RelativePositions, HoldsRelativePositions], ids=["root", "submodule"])
@pytest.mark.parametrize("ir", ["inference", "training"])
def test_a_buffer_replaced_with_another_shape_is_computed_and_not_written_back(holder, ir):
    model = holder().eval()
    x = torch.randn(2, 8, 8)
    ep = exporter.export(model, (x,), ir=ir)
    prefix = "" if holder is RelativePositions else "rel."
    assert [n.kind for n in ep.notes] == [exporter.NoteKind.BUFFER_NOT_WRITTEN_BACK]
    (note,) = ep.notes
    assert f"replaced buffer '{prefix}table' (4, 4) float32 with (8, 8) float32" in note.message
    assert note.location == _line("rebuilt")
    assert [s.kind for s in ep.graph_signature.output_specs] == [OutputKind.USER_OUTPUT]
    program, eager = ep.module(), holder().eval()
    eager.load_state_dict(model.state_dict())
    for _ in range(2):  # the next call of the same size too, where eager keeps the rebuilt table
        fresh = torch.randn(2, 8, 8)
        torch.testing.assert_close(program(fresh), eager(fresh))
    assert eager.get_buffer(f"{prefix}table").shape == (8, 8) and model.get_buffer(f"{prefix}table").shape == (4, 4)


def test_a_replaced_buffer_matches_torch_exports_signature():
    model, x = HoldsRelativePositions().eval(), torch.randn(2, 8, 8)
    ours = exporter.export(model, (x,))
    theirs = torch.export.export(model, (x,), strict=False).run_decompositions({})
    assert ours.graph_signature == theirs.graph_signature


def test_a_buffer_replaced_with_a_value_made_from_itself_is_refused():
    with pytest.raises(exporter.TraceError, match=r"replaced buffer 'cache' \(\(2,\) torch.float32\) with \(3,\) "
                       r"torch.float32 computed from the buffer itself"):
        exporter.export(_Regrown(), (torch.ones(1),))


@torch.library.custom_op("exporter_tests::above_half", mutates_args=())
def above_half(x: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(x > 0.5).flatten()


@above_half.register_fake
def _above_half_fake(x):
    # the deprecated spelling torchvision's nms still uses: its default bound is "at least 2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        count = torch.library.get_ctx().create_unbacked_symint()
    return x.new_empty(count, dtype=torch.long)


class KeepsAboveHalf(torch.nn.Module):
    def forward(self, x):
        keep = above_half(x)
        return x[keep] * 2, keep


@pytest.mark.parametrize("ir", ["inference", "training"])
def test_a_custom_ops_data_sized_result_may_hold_one_value_or_none(ir):
    # A fake kernel that allocates its size with ctx.create_unbacked_symint() and no ``min``
    # would make the program assert a size of at least 2 and refuse these inputs.
    model = KeepsAboveHalf()
    ep = exporter.export(model, (torch.tensor([0.9, 0.1, 0.7, 0.6]),), ir=ir)
    for values in ([0.9, 0.1, 0.7, 0.6], [0.1, 0.9, 0.2, 0.3], [0.1, 0.2, 0.3, 0.4], [0.8, 0.9, 0.7, 0.6]):
        x = torch.tensor(values)
        got, want = ep.module()(x), model(x)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)
