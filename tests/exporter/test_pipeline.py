"""The pass runner names the failing pass; the verifier can run after every pass."""

import pytest
import torch

import exporter
from exporter import Category, PassError, TraceError, VerificationError
from exporter.inputs import bind_inputs
from exporter._pipeline import run_passes
from exporter.trace import trace
from exporter.passes import DEFAULT_PASSES, eliminate_dead_code, lift_constants
from tests.passes.test_lift_constants import AliasesParameter


def _state():
    model = torch.nn.Linear(2, 2)
    return trace(model, bind_inputs(model, (torch.randn(1, 2),), None))


def test_a_crashing_pass_is_named_with_the_passes_before_it():
    def broken_pass(state):
        raise KeyError("oops")

    with pytest.raises(PassError, match=r"pass broken_pass failed \(after eliminate_dead_code, lift_constants\): KeyError") as info:
        run_passes(_state(), (eliminate_dead_code, lift_constants, broken_pass))
    assert info.value.pass_name == "broken_pass"
    assert info.value.completed == ("eliminate_dead_code", "lift_constants")


def test_a_problem_with_the_model_found_in_a_pass_stays_the_users_error():
    # a constant sharing memory with a parameter is the model's problem, not exporter's bug
    with pytest.raises(TraceError, match=r"'weight_t' shares memory with 'lin.weight'") as info:
        exporter.export(AliasesParameter(), (torch.randn(2, 3),))
    assert type(info.value) is TraceError and info.value.category is Category.CONSTANT


def test_an_invariant_a_pass_finds_broken_is_a_pass_error_named_with_its_pass():
    def breaks_a_target(state):
        state.input_specs[0].target = "nowhere"
        return True

    with pytest.raises(PassError, match=r"pass restore_fqns failed \(after breaks_a_target\): input arg0_1 targets 'nowhere', which is not a parameter of Linear") as info:
        run_passes(_state(), (breaks_a_target, exporter.passes.restore_fqns))
    assert info.value.pass_name == "restore_fqns" and info.value.completed == ("breaks_a_target",)


def test_verify_each_pass_catches_a_pass_that_breaks_the_ir(monkeypatch):
    def adds_in_place(state):
        graph = state.gm.graph
        x = next(n for n in graph.nodes if n.op == "placeholder")
        with graph.inserting_after(x):
            graph.call_function(torch.ops.aten.add_.Tensor, (x, x))
        return True

    monkeypatch.setenv("EXPORTER_VERIFY_EACH_PASS", "1")
    with pytest.raises(VerificationError, match=r"after pass adds_in_place: node \w+ calls aten.add_.Tensor, which mutates its input"):
        run_passes(_state(), (*DEFAULT_PASSES, adds_in_place))
    # without the flag the per-pass check is off (the final verifier still runs on export)
    monkeypatch.delenv("EXPORTER_VERIFY_EACH_PASS")
    run_passes(_state(), (*DEFAULT_PASSES, adds_in_place))


def test_default_pipeline_order_is_visible():
    assert [p.__name__ for p in DEFAULT_PASSES] == [
        "remove_state_copies", "insert_runtime_asserts", "functionalize_constant_writes", "lift_constants",
        "eliminate_dead_code", "pin_variable_layouts", "restore_fqns",
        "order_inputs", "name_placeholders", "normalize_module_stack",
    ]


class _Scratch(torch.nn.Module):
    def forward(self, x):
        scratch = torch.tensor([1.0, 2.0])
        scratch.add_(1)  # a write nothing reads: dead once functional
        return x * torch.tensor(0.5)


class WritesAScratchTensor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Scratch()

    def forward(self, x):
        return self.inner(x)


def test_constants_are_lifted_before_dead_code_goes_as_torch_export_lifts_them():
    """torch.export lifts constants in its training IR, then run_decompositions drops the
    dead ops but keeps their inputs: a constant made in forward whose every use is dead
    still numbers the ones after it (``inner.lifted_tensor_1``), and stays an input."""
    x = torch.randn(2, 3)
    program = exporter.export(WritesAScratchTensor(), (x,))
    oracle = torch.export.export(WritesAScratchTensor(), (x,)).run_decompositions({})
    assert program.graph_signature == oracle.graph_signature
    assert [s.target for s in program.graph_signature.input_specs] == ["inner.lifted_tensor_0", "inner.lifted_tensor_1", None]
    torch.testing.assert_close(program.module()(x), WritesAScratchTensor()(x))


def test_program_is_a_genuine_exported_program_that_round_trips(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).eval()
    x = torch.randn(5, 3)
    ep = exporter.export(model, (x,))
    assert type(ep) is torch.export.ExportedProgram
    assert ep.state_dict["0.weight"] is model[0].weight, "state is the user's tensors, not copies"
    path = tmp_path / "m.pt2"
    torch.export.save(ep, path)
    loaded = torch.export.load(path)
    torch.testing.assert_close(loaded.module()(x), model(x))
    torch.testing.assert_close(ep.module()(x), model(x))
    # downstream lowering accepts it unchanged
    core = ep.run_decompositions()
    torch.testing.assert_close(core.module()(x), model(x))


class WritesBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("seen", torch.zeros(3))

    def forward(self, x):
        self.seen.add_(x.sum(0))
        return self.lin(x).relu()


def test_the_programs_graph_module_makes_its_code_when_first_used(monkeypatch, tmp_path):
    """Building the program generates no Python code for its graph; calling the graph module,
    reading ``.code``, printing, copying and saving all work and make it then."""
    import copy

    coded = []
    python_code = torch.fx.Graph.python_code

    def spy(graph, *args, **kwargs):
        coded.append(graph)
        return python_code(graph, *args, **kwargs)

    monkeypatch.setattr(torch.fx.Graph, "python_code", spy)
    model, x = WritesBuffer(), torch.randn(4, 3)
    ep = exporter.export(model, (x,))
    assert not any(graph is ep.graph for graph in coded)

    state = [ep.state_dict.get(s.target, ep.constants.get(s.target)) for s in ep.graph_signature.input_specs[:-1]]
    seen = model.seen.clone()
    new_seen, out = ep.graph_module(*state, x)
    assert any(graph is ep.graph for graph in coded)
    torch.testing.assert_close(new_seen, seen + x.sum(0))
    torch.testing.assert_close(out, model.lin(x).relu())
    assert "def forward" in ep.graph_module.code and "aten.linear.default" in str(ep)

    fresh = exporter.export(model, (x,))  # never used: copied and saved before any call
    copied = copy.deepcopy(fresh)
    torch.testing.assert_close(copied.graph_module(*state, x)[1], out)
    torch.export.save(fresh, tmp_path / "m.pt2")
    torch.testing.assert_close(torch.export.load(tmp_path / "m.pt2").module()(x), model.lin(x).relu())
    torch.testing.assert_close(fresh.run_decompositions().module()(x), model.lin(x).relu())


def test_export_timed_returns_the_program_the_stages_inputs_and_dim_names():
    import torch
    from torch.export import Dim

    from exporter._options import ExportOptions
    from exporter._pipeline import export_timed
    from exporter.inputs import bind_inputs

    model, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    bound = bind_inputs(model, (x,), None)
    result = export_timed(model, (x,), None, ExportOptions(dynamic_shapes=({0: Dim("rows", max=64)},)), bound=bound)
    assert result.inputs is bound and result.plan is not None
    assert set(result.timings) >= {"inputs", "trace", "passes", "program"}
    assert list(result.dim_names().values()) == ["rows"]
    assert str(next(iter(result.dim_names()))) in {str(s) for s in result.program.range_constraints}
