"""transformers' experts_implementation switch: named in the hint of the failure it avoids, applied
for an export on request, the program held to the model as configured, the model restored."""

import pytest
import torch

import exporter
from exporter import Category, InputSpecError, TraceError, VerificationError
from exporter.experts import check_against_unswitched, experts_blocks

transformers = pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _mixtral(implementation="eager", experts=4):
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=48, num_local_experts=experts, num_experts_per_tok=2, experts_implementation=implementation,
    )
    return transformers.MixtralForCausalLM(config).eval(), torch.randint(0, 100, (2, 8))


def test_the_experts_loop_fails_both_tools_and_the_hint_names_the_switch():
    model, ids = _mixtral()
    assert [name for name, _ in experts_blocks(model)] == ["model.layers.0.mlp.experts"]
    with pytest.raises(Exception, match="data-dependent"):
        torch.export.export(model, (ids,), strict=False)
    with pytest.raises(TraceError) as info:
        exporter.export(model, (ids,), branches="refuse")
    assert info.value.category is Category.DATA_DEPENDENT_CONTROL_FLOW
    assert info.value.location.endswith("modeling_mixtral.py:81")
    assert info.value.hint.startswith("this is a transformers mixture-of-experts block running its experts loop")
    assert "experts_implementation='batched_mm'" in info.value.hint and "--experts-implementation" in info.value.hint


@pytest.mark.parametrize("implementation", ["batched_mm", "grouped_mm"])
def test_the_switch_exports_matches_the_model_as_configured_and_is_undone(implementation):
    model, ids = _mixtral()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    program = exporter.export(model, (ids,), experts_implementation=implementation)
    assert model.get_experts_implementation() == {"": "eager"}
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    other = torch.randint(0, 100, (2, 8))
    torch.testing.assert_close(program.module()(other).logits, model(other).logits, rtol=1e-4, atol=1e-5)


def test_a_program_that_differs_from_the_model_as_configured_is_refused():
    model, ids = _mixtral()
    program = exporter.export(model, (ids,), experts_implementation="batched_mm")
    other, _ = _mixtral()
    torch.manual_seed(1)
    other.lm_head.weight.data.normal_()  # same structure, other numbers
    with pytest.raises(VerificationError, match="differs from the model as configured") as info:
        check_against_unswitched(program, other, (ids,), {}, "batched_mm")
    assert info.value.rule == "switched-numerics"


def test_a_program_whose_output_has_another_shape_is_refused():
    model, ids = _mixtral()
    program = exporter.export(model, (ids,), experts_implementation="batched_mm")
    wider, _ = _mixtral()
    wider.lm_head = torch.nn.Linear(32, 120, bias=False)  # logits of another width
    with pytest.raises(VerificationError, match=r"output 0 has shape \(2, 8, 100\), the model as configured gives \(2, 8, 120\)"):
        check_against_unswitched(program, wider, (ids,), {}, "batched_mm")


def test_the_switch_is_refused_for_a_model_without_experts_blocks_and_for_a_loop_name():
    with pytest.raises(InputSpecError, match="no transformers mixture-of-experts block"):
        exporter.export(torch.nn.Linear(2, 2), (torch.ones(2),), experts_implementation="batched_mm")
    model, ids = _mixtral()
    with pytest.raises(InputSpecError, match="not one that exports"):
        exporter.export(model, (ids,), experts_implementation="loop")


@pytest.mark.slow
def test_eager_captures_the_experts_loop_itself_and_matches_on_other_routes():
    model, ids = _mixtral(implementation="batched_mm")
    program = exporter.export(model, (ids,), experts_implementation="eager")
    assert model.get_experts_implementation() == {"": "batched_mm"}
    (loop,) = program.branch_report.loops
    assert loop.code == "for expert_idx in expert_hit:"
    (skip,) = program.branch_report.decisions
    assert skip.code == "if expert_idx == self.num_experts:"
    targets = [n.target for m in program.graph_module.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes]
    assert torch.ops.higher_order.while_loop in targets and torch.ops.higher_order.cond in targets
    model.set_experts_implementation("eager")
    for seed in range(4):
        other = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(program.module()(other).logits, model(other).logits, rtol=1e-5, atol=1e-6)


def test_eager_needs_branch_capture():
    model, ids = _mixtral()
    with pytest.raises(InputSpecError, match="only branch capture can export"):
        exporter.export(model, (ids,), experts_implementation="eager", branches="refuse")


def test_a_model_already_on_an_implementation_that_exports_gets_no_switch_hint():
    model, ids = _mixtral("batched_mm")
    program = exporter.export(model, (ids,))
    torch.testing.assert_close(program.module()(ids).logits, model(ids).logits, rtol=1e-4, atol=1e-5)


def test_a_looping_experts_block_is_switched_by_default_and_matches_eager_on_other_routes():
    model, ids = _mixtral(experts=32)
    program = exporter.export(model, (ids,))
    assert model.get_experts_implementation() == {"": "eager"}
    (note,) = program.notes
    assert note.kind is exporter.NoteKind.EXPERTS_SWITCHED and "batched_mm" in note.message
    routes = set()  # the experts each input's tokens go to, as the eager loop visits them
    hook = model.model.layers[0].mlp.experts.register_forward_pre_hook(
        lambda _, args: routes.add(tuple(sorted(set(args[1].flatten().tolist()))))
    )
    try:
        for seed in range(6):
            torch.manual_seed(seed)
            other = torch.randint(0, 100, (2, 8))
            torch.testing.assert_close(program.module()(other).logits, model(other).logits, rtol=1e-4, atol=1e-5)
    finally:
        hook.remove()
    assert len(routes) > 1 and all(len(route) < 32 for route in routes)  # some experts idle, others not


def test_the_automatic_switch_is_off_where_the_user_chose_how_branches_export():
    model, ids = _mixtral()
    with pytest.raises(TraceError, match="data-dependent"):
        exporter.export(model, (ids,), branches="refuse")
    drafted = exporter.export(model, (ids,), draft=True)
    assert drafted.notes == () and drafted.draft_report.assumptions
