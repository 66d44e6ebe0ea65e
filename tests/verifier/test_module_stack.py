import pytest

from exporter import VerificationError
from tests.support import node_named
from exporter.verifier import verify_module_stack, verify_stack_traces


def test_exported_program_passes(program):
    verify_module_stack(program.graph_module)
    verify_stack_traces(program.graph_module)


def _first_call(gm):
    return next(n for n in gm.graph.nodes if n.op == "call_function")


@pytest.mark.parametrize(
    "corrupt, rule, match",
    [
        (lambda gm: _first_call(gm).meta.pop("nn_module_stack"), "nn_module_stack-present", "has no nn_module_stack"),
        (lambda gm: _first_call(gm).meta.update(nn_module_stack={"L__self__": ("",)}), "nn_module_stack-format", "malformed"),
        (lambda gm: _first_call(gm).meta.update(nn_module_stack=[("", "M")]), "nn_module_stack-format", "malformed"),
        (lambda gm: node_named(gm, "x").meta.update(nn_module_stack={"L__self__": ("", "M")}), "nn_module_stack-absent", "placeholder node x"),
        (lambda gm: gm.graph.output_node().meta.update(nn_module_stack={"k": ("", "M")}), "nn_module_stack-absent", "output node"),
    ],
)
def test_module_stack_rules_reject(parts, corrupt, rule, match):
    corrupt(parts.graph_module)
    with pytest.raises(VerificationError, match=match) as info:
        verify_module_stack(parts.graph_module)
    assert info.value.rule == rule


@pytest.mark.parametrize(
    "corrupt, rule",
    [
        (lambda gm: node_named(gm, "x").meta.update(stack_trace='File "m.py", line 1'), "stack_trace-absent"),
        (lambda gm: _first_call(gm).meta.update(stack_trace=["m.py:1"]), "stack_trace-format"),
    ],
)
def test_stack_trace_rules_reject(parts, corrupt, rule):
    corrupt(parts.graph_module)
    with pytest.raises(VerificationError) as info:
        verify_stack_traces(parts.graph_module)
    assert info.value.rule == rule
    assert info.value.node is not None
