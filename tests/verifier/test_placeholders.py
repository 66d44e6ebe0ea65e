import pytest
from torch.export.graph_signature import InputKind

from exporter import VerificationError
from tests.support import node_named
from verifier import verify_placeholder_names


def test_exported_program_passes(program):
    verify_placeholder_names(program.graph_module, program.graph_signature.input_specs)


@pytest.mark.parametrize("kind, bad", [(InputKind.PARAMETER, "w_lin_weight"), (InputKind.BUFFER, "steps"), (InputKind.CONSTANT_TENSOR, "p_table")])
def test_wrong_prefix_is_rejected(parts, kind, bad):
    spec = next(s for s in parts.graph_signature.input_specs if s.kind == kind)
    node_named(parts.graph_module, spec.arg.name).name = bad
    spec.arg.name = bad
    with pytest.raises(VerificationError, match=f"placeholder {bad} is a {kind.name} input") as info:
        verify_placeholder_names(parts.graph_module, parts.graph_signature.input_specs)
    assert info.value.rule == "placeholder-prefix"


def test_placeholder_without_spec_is_rejected(parts):
    node_named(parts.graph_module, "x").name = "x_renamed"
    with pytest.raises(VerificationError, match="placeholder x_renamed has no input spec"):
        verify_placeholder_names(parts.graph_module, parts.graph_signature.input_specs)
