import pytest
from torch.export.graph_signature import InputKind

from exporter import VerificationError
from tests.support import node_named
from exporter.verifier import verify_placeholder_names, verify_placeholders_match_specs


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
    with pytest.raises(VerificationError, match="placeholder x_renamed has no input spec: input spec 4 describes 'x'") as info:
        verify_placeholders_match_specs(parts.graph_module, parts.graph_signature.input_specs)
    assert info.value.rule == "input-spec-order"


def test_extra_spec_is_rejected(parts):
    specs = [*parts.graph_signature.input_specs, parts.graph_signature.input_specs[-1]]
    with pytest.raises(VerificationError, match="6 placeholders but the signature 7 input specs") as info:
        verify_placeholders_match_specs(parts.graph_module, specs)
    assert info.value.rule == "input-spec-count"
