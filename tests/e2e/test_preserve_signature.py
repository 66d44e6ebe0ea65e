"""preserve_module_call_signature: the module call graph torch.export writes, differentially.

For each model the program's module call graph must equal the oracle's
(``torch.export.export(strict=False, preserve_module_call_signature=...)``), and
``torch.export.unflatten`` of the program must rebuild the preserved submodules so that
the unflattened module matches eager, also after a preserved submodule is swapped for an
eager one.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import exporter
from exporter import InputSpecError, TraceError


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x, bias=None, scale=2.0):
        h = self.norm(self.proj(x)) * scale
        if bias is not None:
            h = h + bias
        return h, {"mean": h.mean(-1), "input": x}


class Repeated(torch.nn.Module):
    """One block called twice with keyword arguments, another block once."""

    def __init__(self):
        super().__init__()
        self.block = Block()
        self.other = Block()
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x, bias):
        h, extra = self.block(x, bias=bias)
        h, extra2 = self.block(torch.relu(h), bias=extra["mean"][..., None])
        g, _ = self.other(h, bias=bias)
        return self.head(g) + extra2["mean"][..., None]


class Nested(torch.nn.Module):
    """Preserved modules inside a preserved module."""

    def __init__(self):
        super().__init__()
        self.outer = torch.nn.ModuleDict({"first": Block(), "second": Block()})

    def forward(self, x):
        a, _ = self.outer["first"](x)
        b, info = self.outer["second"](a, scale=0.5)
        return b + info["input"]


class Wrapper(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        return self.inner(*args, **kwargs)


def _inputs(batch=2):
    return torch.randn(batch, 5, 8), torch.randn(batch, 5, 8)


CASES = [
    ("repeated", lambda: Repeated(), _inputs(), ("block", "other"), None),
    ("repeated, one preserved", lambda: Repeated(), _inputs(), ("block",), None),
    ("nested", lambda: Wrapper(Nested()), (_inputs()[0],), ("inner", "inner.outer.first", "inner.outer.second"), None),
    (
        "repeated, dynamic batch",
        lambda: Repeated(),
        _inputs(3),
        ("block", "other"),
        ({0: Dim("batch", max=16)}, {0: Dim("batch", max=16)}),
    ),
]


def _signatures(program):
    return [(entry.fqn, entry.signature) for entry in program.module_call_graph]


def _oracle(model, args, kwargs=None, **options):
    """torch.export's program lowered as exporter's is; where torch's own lowering drops a
    value its call signature names (an output nothing uses: SpecViolationError), the
    program before lowering, whose names are the same otherwise."""
    program = torch.export.export(model, args, kwargs, strict=False, **options)
    try:
        return program.run_decompositions({})
    except Exception as error:  # noqa: BLE001 - torch's verifier error class is private
        assert "does not exist in the graph" in str(error)
        return program


@pytest.mark.parametrize("name, make, args, preserved, spec", CASES, ids=[c[0] for c in CASES])
def test_the_module_call_graph_is_the_oracles_and_unflatten_runs(name, make, args, preserved, spec):
    torch.manual_seed(0)
    model = make().eval()
    program = exporter.export(model, args, dynamic_shapes=spec, preserve_module_call_signature=preserved)
    oracle = _oracle(model, args, dynamic_shapes=spec, preserve_module_call_signature=preserved)
    assert _signatures(program) == _signatures(oracle)
    unflat = torch.export.unflatten(program)
    samples = [args] if spec is None else [args, tuple(torch.randn(7, *a.shape[1:]) for a in args)]
    for sample in samples:
        with torch.no_grad():
            torch.testing.assert_close(unflat(*sample), model(*sample))


def test_a_preserved_submodule_swapped_for_eager_gives_the_same_outputs():
    torch.manual_seed(0)
    model = Repeated().eval()
    args = _inputs()
    program = exporter.export(model, args, preserve_module_call_signature=("block",))
    unflat = torch.export.unflatten(program)
    replacement = Block().eval()
    replacement.load_state_dict(model.block.state_dict())
    unflat.block = replacement
    with torch.no_grad():
        torch.testing.assert_close(unflat(*args), model(*args))
        # and the swapped module is really the one called: change it, the output changes
        # (not by a shift of proj's output: the LayerNorm after it removes any uniform one)
        replacement.norm.bias.add_(torch.arange(8.0))
        assert not torch.allclose(unflat(*args), model(*args))


def test_a_transformers_decoder_layer_keeps_its_signature():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = transformers.LlamaModel(config).eval()
    ids = torch.randint(0, 64, (2, 6))
    preserved = ("layers.0", "layers.1.mlp")
    program = exporter.export(model, (ids,), {"use_cache": False}, preserve_module_call_signature=preserved)
    oracle = _oracle(model, (ids,), {"use_cache": False}, preserve_module_call_signature=preserved)
    assert _signatures(program) == _signatures(oracle)
    unflat = torch.export.unflatten(program)
    with torch.no_grad():
        expected = model(ids, use_cache=False).last_hidden_state
        torch.testing.assert_close(unflat(ids, use_cache=False).last_hidden_state, expected)
        unflat.get_submodule("layers.1").mlp = model.layers[1].mlp
        torch.testing.assert_close(unflat(ids, use_cache=False).last_hidden_state, expected)


def _hooks(model):
    return {name: (dict(m._forward_pre_hooks), dict(m._forward_hooks)) for name, m in model.named_modules()}


def test_the_model_is_left_without_the_recording_hooks():
    model = Repeated().eval()
    before = _hooks(model)
    exporter.export(model, _inputs(), preserve_module_call_signature=("block",))
    assert _hooks(model) == before
    failing = CalledTwoWays().eval()
    before = _hooks(failing)
    with pytest.raises(TraceError):  # raised from inside the recording hook
        exporter.export(failing, (_inputs()[0],), preserve_module_call_signature=("block",))
    assert _hooks(failing) == before


@pytest.mark.parametrize(
    "preserved, message",
    [
        (("blok",), "'blok', which is not a submodule of Repeated"),
        ("block", "sequence of submodule paths"),
        (("",), "'', which is not a submodule"),
        (3, "sequence of submodule paths, got int"),
    ],
)
def test_a_wrong_path_is_named(preserved, message):
    with pytest.raises(InputSpecError, match=message) as info:
        exporter.export(Repeated(), _inputs(), preserve_module_call_signature=preserved)
    assert info.value.hint


class CalledTwoWays(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        h, _ = self.block(x)
        h, _ = self.block(h, bias=x)
        return h


def test_a_module_called_with_two_structures_cannot_be_preserved():
    # torch.export stops with a bare AssertionError (in_spec mismatch)
    with pytest.raises(AssertionError):
        torch.export.export(CalledTwoWays(), (_inputs()[0],), strict=False, preserve_module_call_signature=("block",))
    with pytest.raises(TraceError, match="called with different argument or output structures") as info:
        exporter.export(CalledTwoWays(), (_inputs()[0],), preserve_module_call_signature=("block",))
    assert "same way every time" in info.value.hint


def test_none_preserves_nothing_as_the_empty_tuple_does():
    program = exporter.export(Repeated().eval(), _inputs(), preserve_module_call_signature=None)
    assert [e.fqn for e in program.module_call_graph if e.signature is not None] == [""]


def test_every_torch_export_parameter_is_accepted_under_its_name():
    """A call written for torch.export.export, every argument by keyword, works unchanged:
    each of its parameters is exporter.export's too, of the same kind and default (``args``
    may be left out here), and the program is the oracle's (compared in the training IR,
    where dynamic programs' node names are torch's too)."""
    import inspect

    ours = inspect.signature(exporter.export).parameters
    for name, theirs in inspect.signature(torch.export.export).parameters.items():
        assert name in ours, name
        assert ours[name].kind == theirs.kind, name
        if theirs.default is not inspect.Parameter.empty:
            assert ours[name].default == theirs.default, name
    model, (x, y) = Repeated().eval(), _inputs(3)
    options = dict(
        args=(x,),
        kwargs={"bias": y},
        dynamic_shapes={"x": {0: Dim("batch", max=16)}, "bias": {0: Dim("batch", max=16)}},
        strict=False,
        preserve_module_call_signature=("block",),
        prefer_deferred_runtime_asserts_over_guards=False,
    )
    program = exporter.export(mod=model, **options, ir="training")
    oracle = torch.export.export(mod=model, **options)
    assert _signatures(program) == _signatures(oracle)
    assert program.graph_signature == oracle.graph_signature
    assert str(program.range_constraints) == str(oracle.range_constraints)
    for batch in (3, 5):
        a, b = _inputs(batch)
        torch.testing.assert_close(program.module()(a, bias=b), model(a, bias=b))


def test_strict_true_is_refused_with_what_to_do():
    with pytest.raises(InputSpecError, match="non-strict by design") as info:
        exporter.export(Repeated(), _inputs(), strict=True)
    assert "torch.export.export" in info.value.hint
    assert exporter.export(Repeated().eval(), _inputs(), strict=False) is not None
