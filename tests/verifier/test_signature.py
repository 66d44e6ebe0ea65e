import pytest
from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

from exporter import VerificationError
from exporter.verifier import verify_signature


def test_exported_program_passes(program):
    verify_signature(program)


def _spec(specs, kind):
    return next(s for s in specs if s.kind == kind)


def _drop_first_input_spec(p):
    p.graph_signature.input_specs.pop(0)


def _swap_first_two_inputs(p):
    specs = p.graph_signature.input_specs
    specs[0], specs[1] = specs[1], specs[0]


def _missing_state(p):
    del p.state_dict[_spec(p.graph_signature.input_specs, InputKind.PARAMETER).target]


def _missing_constant(p):
    del p.constants[_spec(p.graph_signature.input_specs, InputKind.CONSTANT_TENSOR).target]


def _drop_output_spec(p):
    p.graph_signature.output_specs.pop()


def _rename_output_spec(p):
    p.graph_signature.output_specs[-1].arg = TensorArgument(name="not_there")


def _user_output_first(p):
    specs = p.graph_signature.output_specs
    specs.insert(0, specs.pop())
    out = p.graph_module.graph.output_node()
    values = list(out.args[0])
    values.insert(0, values.pop())
    out.args = (tuple(values),)


def _mutation_of_unknown_buffer(p):
    _spec(p.graph_signature.output_specs, OutputKind.BUFFER_MUTATION).target = "nope"


def _mutation_of_unknown_input(p):
    _spec(p.graph_signature.output_specs, OutputKind.USER_INPUT_MUTATION).target = "z"


def _buffer_mutation_of_parameter(p):
    spec = _spec(p.graph_signature.output_specs, OutputKind.BUFFER_MUTATION)
    spec.target = _spec(p.graph_signature.input_specs, InputKind.PARAMETER).target


@pytest.mark.parametrize(
    "corrupt, rule, match",
    [
        (_drop_first_input_spec, "input-spec-count", "placeholders but the signature"),
        (_swap_first_two_inputs, "input-spec-order", "is described by another input spec"),
        (_missing_state, "state-target-exists", "missing from the state dict"),
        (_missing_constant, "state-target-exists", "missing from the constants"),
        (_drop_output_spec, "output-spec-count", "returns 3 values"),
        (_rename_output_spec, "output-spec-order", "its spec names 'not_there'"),
        (_user_output_first, "mutations-first", "comes after a user output"),
        (_mutation_of_unknown_buffer, "mutation-target", "'nope', which is not a BUFFER input"),
        (_mutation_of_unknown_input, "mutation-target", "'z', which is not a user input"),
        (_buffer_mutation_of_parameter, "mutation-target", "which is not a BUFFER input"),
    ],
)
def test_signature_rules_reject(parts, corrupt, rule, match):
    corrupt(parts)
    with pytest.raises(VerificationError, match=match) as info:
        verify_signature(parts)
    assert info.value.rule == rule
