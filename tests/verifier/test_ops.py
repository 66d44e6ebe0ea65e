import pytest
import torch

from exporter import VerificationError
from exporter.verifier import verify_functional_ops


def test_exported_program_passes(program):
    verify_functional_ops(program.graph_module)


def _insert_call(gm, target, args_fn, op="call_function"):
    graph = gm.graph
    out = graph.output_node()
    value = out.args[0][-1]
    with graph.inserting_before(out):
        node = graph.create_node(op, target, args_fn(value), {})
    node.meta["val"] = None
    return node


@pytest.mark.parametrize(
    "target, args_fn, match",
    [
        (torch.ops.aten.add_.Tensor, lambda v: (v, v), "mutates its input"),
        (torch.ops.aten.add.out, lambda v: (v, v), "mutates its input"),
        (torch.add, lambda v: (v, v), "neither an ATen op"),
        (torch.ops.aten.add, lambda v: (v, v), "op packet"),
        (print, lambda v: (v,), "neither an ATen op"),
    ],
)
def test_non_functional_calls_are_rejected(parts, target, args_fn, match):
    _insert_call(parts.graph_module, target, args_fn)
    with pytest.raises(VerificationError, match=match) as info:
        verify_functional_ops(parts.graph_module)
    assert info.value.rule == "functional-ops"


def test_call_module_is_rejected(parts):
    parts.graph_module.add_submodule("relu", torch.nn.ReLU())
    _insert_call(parts.graph_module, "relu", lambda v: (v,), op="call_module")
    with pytest.raises(VerificationError, match="call_module node"):
        verify_functional_ops(parts.graph_module)


def test_tensor_get_attr_is_rejected(parts):
    gm = parts.graph_module
    gm.register_buffer("leftover", torch.ones(3))
    _insert_call(gm, "leftover", lambda v: (), op="get_attr")
    with pytest.raises(VerificationError, match="tensors must be lifted to inputs") as info:
        verify_functional_ops(gm)
    assert info.value.rule == "no-tensor-get-attr"


def test_symbolic_and_higher_order_ops_are_allowed(parts):
    import operator

    _insert_call(parts.graph_module, operator.getitem, lambda v: ((v,), 0))
    verify_functional_ops(parts.graph_module)


def test_call_without_val_is_rejected(parts):
    node = next(n for n in parts.graph_module.graph.nodes if n.op == "call_function")
    del node.meta["val"]
    with pytest.raises(VerificationError, match=f"node {node.name} has no 'val' metadata") as info:
        verify_functional_ops(parts.graph_module)
    assert info.value.rule == "val-present"


def test_the_training_ir_allows_writes_and_its_unwrapped_block_markers_only_mid_pipeline(program):
    from exporter._torch_internals import SET_GRAD_ENABLED

    gm = program.graph_module
    _insert_call(gm, torch.ops.aten.add_.Tensor, lambda v: (v, v))
    verify_functional_ops(gm, training=True)
    with pytest.raises(VerificationError, match="mutates its input"):
        verify_functional_ops(gm)
    marker = _insert_call(gm, SET_GRAD_ENABLED, lambda v: (False,))
    verify_functional_ops(gm, training=True, markers=True)
    with pytest.raises(VerificationError, match="neither an ATen op") as info:
        verify_functional_ops(gm, training=True)
    assert info.value.node == marker.name
