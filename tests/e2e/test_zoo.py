"""The model zoo (benchmarks/zoo.py): exporter exports whatever torch.export does.

The default run exports five tiny models (encoder, decoder, seq2seq, vision, audio) with
both tools, each in its own subprocess, and checks both programs against eager; with
diffusers installed, three of its models (a UNet, a VAE, a transformer) too. The full
zoo, every model type transformers registers (about an hour on 2 cores), runs with
``python -m pytest -m zoo tests/e2e/test_zoo.py``.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
import time

import pytest
import torch

import exporter

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers")

ZOO = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "zoo.py"
FAST_TYPES = ("bert", "llama", "t5", "vit", "wav2vec2")
DIFFUSERS_TYPES = ("unet_2d_condition", "autoencoder_kl", "flux")


@pytest.fixture(scope="module")
def zoo():
    spec = importlib.util.spec_from_file_location("zoo", ZOO)
    module = importlib.util.module_from_spec(spec)
    sys.modules["zoo"] = module
    spec.loader.exec_module(module)
    return module


def run(zoo, types, **settings):
    settings = zoo.Settings(**settings)
    return zoo.run_zoo(zoo.plan(types, settings.classes, settings.family), settings)


def describe(zoo, rows):
    return "\n".join(zoo.progress_line(row, i + 1, len(rows)) for i, row in enumerate(rows))


@pytest.mark.slow
def test_fast_models_export_with_both_tools_and_match_eager(zoo):
    rows = run(zoo, FAST_TYPES, classes="first", jobs=2, timeout=120)
    assert [row.model_type for row in rows] == list(FAST_TYPES)
    for row in rows:
        assert row.built, f"{row.model_type}: {row.reason}"
        exporter, torch_export = row.results["exporter"], row.results["torch"]
        assert exporter.ok or not torch_export.ok, describe(zoo, [row])
        assert "mismatch" not in (exporter.outcome, torch_export.outcome), describe(zoo, [row])
    assert all(row.verdict == "both ok" for row in rows), describe(zoo, rows)
    assert [row.model_type for row in rows if row.signature_difference] == [], describe(zoo, rows)


def test_the_training_ir_is_held_to_torch_exports_own_program(zoo):
    """With ir="training" the oracle is torch.export.export alone; the signatures compare
    entry by entry (names included) and the summary lists the models where they differ."""
    built = zoo.zoo_models.build("deberta", "DebertaForMaskedLM")
    mine = zoo.run_tool("exporter", built, {"ir": "training"})
    theirs = zoo.run_tool("torch", built, {"ir": "training"})
    assert mine.ok and theirs.ok
    assert theirs.signature == mine.signature  # tensors made in a submodule's forward, named under it
    assert any(row[2] == "deberta.encoder.layer.0.attention.self.lifted_tensor_0" for row in mine.signature)
    row = zoo.Row("deberta", "DebertaForMaskedLM", built=True, results={"exporter": mine, "torch": theirs})
    assert row.signature_difference is None
    mine.signature = [*mine.signature[:-1], ["USER_OUTPUT", "renamed", None, None]]
    assert "exporter ['USER_OUTPUT', 'renamed'" in row.signature_difference
    assert zoo.summarize([row])["signatures_differ"] == ["deberta"]


def test_a_program_that_differs_from_eager_is_a_mismatch(zoo):
    expected = {"logits": torch.ones(2, 3), "hidden": (torch.zeros(2),)}
    assert zoo.compare(expected, {"logits": torch.ones(2, 3), "hidden": (torch.zeros(2),)})[0] is None
    difference, worst = zoo.compare(expected, {"logits": torch.ones(2, 3) + 1e-2, "hidden": (torch.zeros(2),)})
    assert "output 0 differs" in difference and worst == pytest.approx(1e-2)
    assert "1 tensors, eager 2" in zoo.compare(expected, {"logits": torch.ones(2, 3)})[0]


def test_a_model_output_is_compared_field_by_field(zoo):
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    output = BaseModelOutputWithPooling(last_hidden_state=torch.ones(1, 2), pooler_output=torch.zeros(1))
    assert [t.shape for t in zoo.tensor_leaves(output)] == [torch.Size([1, 2]), torch.Size([1])]


def test_exporter_kwargs_reach_exporter_export(zoo):
    built = zoo.zoo_models.build("bert", "BertModel")
    result = zoo.run_tool("exporter", built, {"no_such_option": True})
    assert result.outcome == "fails" and "no_such_option" in result.error


class _TracedPathDiffers(torch.nn.Module):
    """Takes a shortcut in eager only, which computes something else."""

    def forward(self, x):
        if not torch.compiler.is_exporting() and (x > 0).all():
            return x * 3
        return x + 1


def test_a_program_that_differs_from_eager_is_exported_again_with_the_eager_path(zoo):
    x = torch.ones(2, 3)
    model = _TracedPathDiffers()
    built = zoo.zoo_models.Built(model=model, kwargs={"x": x}, output=model(x), note="")
    result = zoo.run_tool("exporter", built, {})
    assert result.ok and result.how == "tracing_checks='eager'" and "tracing_checks='eager'" in result.describe()
    torch_result = zoo.run_tool("torch", built, {})
    assert torch_result.outcome == "mismatch" and torch_result.how is None


class _MaskGate(torch.nn.Module):
    """A shortcut while nothing is masked: the example takes it, a padded batch does not."""

    def __init__(self):
        super().__init__()
        self.scale = 1.0

    def forward(self, x, attention_mask):
        if attention_mask.all():
            return x * 2
        return x * attention_mask[..., None] * self.scale


def test_a_program_with_a_cond_is_held_to_eager_on_inputs_that_take_the_other_side(zoo):
    model = _MaskGate()
    kwargs = {"x": torch.randn(2, 4, 3), "attention_mask": torch.ones(2, 4, dtype=torch.long)}
    built = zoo.zoo_models.Built(model=model, kwargs=kwargs, output=model(**kwargs), note="")
    result = zoo.run_tool("exporter", built, {})
    assert result.ok and "other side matches eager on" in result.sides
    assert "other side matches eager" in result.describe()
    # the check finds a program wrong on the other side: here eager changed after the export
    program = exporter.export(model, (), kwargs)
    model.scale = 3.0
    sides = zoo.zoo_sides.other_sides(model, kwargs, program, zoo.compare)
    assert sides.conds == 1 and sides.other >= 1 and "attention_mask" in sides.mismatch


class _Finds(torch.nn.Module):
    """A detector in small: what scores over the threshold is kept, and an empty find has its
    own path. Any input scores over it with these weights; a lowered bias finds nothing."""

    def __init__(self):
        super().__init__()
        self.score = torch.nn.Linear(3, 1)
        with torch.no_grad():
            self.score.weight.zero_()
            self.score.bias.fill_(1.0)

    def forward(self, x):
        kept = x[self.score(x)[:, 0] > 0]
        if kept.numel() == 0:
            return torch.zeros(1, 3)
        return kept.sum(0, keepdim=True)


def test_other_weights_hold_the_program_to_eager_where_no_input_takes_the_other_side(zoo):
    model, kwargs = _Finds(), {"x": torch.randn(5, 3)}
    program = exporter.export(model, (), kwargs)
    assert zoo.zoo_sides.other_sides(model, kwargs, program, zoo.compare).other == 0
    weights = (("score lowered", {"score.bias": model.score.bias.detach() - 2}),)  # the rest the model's own
    before = {k: v.clone() for k, v in model.state_dict().items()}
    sides = zoo.zoo_sides.other_sides(model, kwargs, program, zoo.compare, weights)
    assert sides.other == 1 and sides.mismatch is None
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # eager kept its weights
    assert torch.equal(program.state_dict["score.bias"], before["score.bias"])  # so did the program
    # a program that differs from eager there is caught: eager changed after the export
    model.forward = lambda x: _Finds.forward(model, x) + (model.score.bias < 0)
    sides = zoo.zoo_sides.other_sides(model, kwargs, program, zoo.compare, weights)
    assert sides.mismatch is not None and sides.mismatch.startswith("score lowered")


class _NestedGate(torch.nn.Module):
    """A branch inside another's side: only the inner one goes the other way on a changed input."""

    def forward(self, x):
        if x.abs().sum() >= 0:  # every input: the outer cond always takes this side
            if x[0] > 0:
                return x * 2
            return x - 1
        return x


def test_a_cond_inside_the_side_taken_counts_when_it_goes_the_other_way(zoo):
    model, kwargs = _NestedGate(), {"x": torch.rand(4) + 0.5}
    program = exporter.export(model, (), kwargs)
    _, taken = zoo.zoo_sides.decisions_taken(program.module(), kwargs)
    _, negated = zoo.zoo_sides.decisions_taken(program.module(), {"x": -kwargs["x"]})
    assert taken[0] == negated[0] and taken != negated  # the outer the same, the inner not
    sides = zoo.zoo_sides.other_sides(model, kwargs, program, zoo.compare)
    assert sides.conds == 1 and sides.other >= 1 and sides.mismatch is None


def test_a_program_without_conds_has_no_other_side(zoo):
    built = zoo.zoo_models.build("bert", "BertModel")
    result = zoo.run_tool("exporter", built, {})
    assert result.ok and result.sides is None
    rows = [zoo.Row("gate", "Gate", built=True, results={"exporter": zoo.ToolResult("ok", 1.0, sides="1 cond(s), other side matches eager on 2 input(s)")})]
    assert zoo.summarize(rows)["other_sides"]["matches eager"] == ["gate"]


def test_a_build_over_its_time_is_not_built(zoo, monkeypatch):
    monkeypatch.setattr(zoo.zoo_models, "build", lambda *args: time.sleep(60))
    (row,) = run(zoo, ["bert"], classes="first", timeout=1, warm_up=False)
    assert not row.built and row.reason.startswith("build timeout"), row.reason
    assert row.verdict == "not built"


@pytest.mark.slow
def test_a_build_only_run_builds_and_exports_nothing(zoo):
    rows = run(zoo, ["bert", "gpt2"], classes="first", tools=(), warm_up=False, timeout=120)
    assert [(row.model_type, row.verdict, row.results) for row in rows] == [("bert", "built", {}), ("gpt2", "built", {})]
    assert all(row.inputs and row.parameters for row in rows)
    summary = zoo.summarize(rows)
    assert summary["counts"]["built"] == 2 and summary["counts"]["both ok"] == 0
    args = zoo.parse_args(["--tool", "none", "--classes", "first"])
    assert zoo.results_name(args).startswith("zoo-builds-torch-") and "builds only" in zoo.results_title(args)


@pytest.mark.slow
def test_a_tool_that_hangs_or_crashes_is_charged_and_the_other_still_runs(zoo, monkeypatch):
    # The children are forked, so they run these stand-ins.
    monkeypatch.setitem(zoo.EXPORTERS, "exporter", lambda *args: time.sleep(60))
    monkeypatch.setitem(zoo.EXPORTERS, "torch", lambda *args: os._exit(3))
    (row,) = run(zoo, ["llama"], classes="first", timeout=15, warm_up=False)
    assert row.built, row.reason
    assert row.results["exporter"].outcome == "timeout"
    assert row.results["torch"].outcome == "crash" and "code 3" in row.results["torch"].error
    assert row.verdict == "both fail"


@pytest.mark.zoo
def test_no_model_exports_with_torch_export_only(zoo):
    rows = run(zoo, zoo.zoo_models.model_types(), jobs=2)
    only_torch = [row for row in rows if row.verdict == "only torch.export ok"]
    assert not only_torch, describe(zoo, only_torch)


@pytest.mark.slow
def test_dynamic_runs_give_both_tools_auto_dims_and_check_grown_inputs(zoo):
    """``--dynamic``: batch and sequence ``Dim.AUTO`` for both tools, the kept dimensions and
    their ranges in the compared signature, and the program held to eager on grown inputs."""
    built = zoo.zoo_models.build("bert", "BertForSequenceClassification")
    shapes = zoo.dynamic_inputs(built.kwargs)
    assert shapes["input_ids"] == {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO}
    images = {"images": [torch.rand(3, 5, 5), torch.rand(3, 6, 6)], "scale": 2.0}
    assert zoo.dynamic_inputs(images) == {"images": [None, None], "scale": None}  # as torch.export wants a list's
    mine = zoo.run_tool("exporter", built, {}, dynamic=True)
    theirs = zoo.run_tool("torch", built, {}, dynamic=True)
    assert mine.ok and theirs.ok, (mine.describe(), theirs.describe())
    dynamic = [row for row in mine.signature if row[0] == "DYNAMIC"]
    assert [(row[1], row[2]) for row in dynamic] == [("input_ids", 0), ("input_ids", 1), ("attention_mask", 0), ("attention_mask", 1)]
    assert dynamic == [row for row in theirs.signature if row[0] == "DYNAMIC"]
    program = exporter.export(built.model, (), built.kwargs, dynamic_shapes=shapes)
    grown = zoo.grown_inputs(built.kwargs, program)
    assert grown["input_ids"].shape == (3, 11) and grown["attention_mask"].shape == (3, 11)
    assert torch.equal(grown["input_ids"][:2, :8], built.kwargs["input_ids"])


def test_a_non_tensor_input_is_in_the_signature_with_no_dimensions(zoo):
    """diffusers' forwards take ints, flags and None beside tensors (``num_frames=3``):
    the signature holds them as values, with no placeholder to read dimensions from."""

    class Frames(torch.nn.Module):
        def forward(self, sample, num_frames, flag=None):
            return sample.reshape(num_frames, -1, *sample.shape[1:]).mean(0)

    built = zoo.zoo_models.Built(Frames(), {"sample": torch.randn(6, 4), "num_frames": 3, "flag": None})
    built = zoo.zoo_models.Built(built.model, built.kwargs, built.model(**built.kwargs))
    mine, theirs = zoo.run_tool("exporter", built, {}), zoo.run_tool("torch", built, {})
    assert mine.ok and theirs.ok, (mine.describe(), theirs.describe())
    assert mine.signature == theirs.signature
    assert [row[1] for row in mine.signature if row[0] == "USER_INPUT"] == ["sample", "num_frames", "flag"]
    assert zoo.dynamic_dims(torch.export.export(built.model, (), built.kwargs)) == []
    assert zoo._describe_input([torch.ones(2, dtype=torch.bool), 3]) == "[bool[2], 3]"


def test_an_error_location_in_a_library_is_given_from_the_package_on(zoo):
    """Results files are the same on every machine: no venv path in them."""
    site = os.path.dirname(os.path.dirname(torch.__file__))
    location = os.path.join(site, "torch", "nn", "modules", "linear.py") + ":125"
    assert zoo.in_package(location) == "torch/nn/modules/linear.py:125"
    assert zoo.in_package("<string>:3") == "<string>:3" and zoo.in_package(None) is None


def test_the_diffusers_family_names_its_results_and_takes_static_shapes_only(zoo):
    pytest.importorskip("diffusers")
    release = zoo.results.release_suffix()
    args = zoo.parse_args(["--family", "diffusers"])
    assert zoo.results_name(args) == f"zoo-diffusers-{release}"
    assert zoo.results_title(args).startswith("Model zoo (diffusers)")
    assert zoo.selected_types(args)[:2] == ["unet_2d_condition", "unet_2d"]
    assert zoo.results_name(zoo.parse_args(["--family", "diffusers", "--fast"])) == f"zoo-diffusers-fast-{release}"
    with pytest.raises(SystemExit):
        zoo.parse_args(["--family", "diffusers", "--dynamic"])
    with pytest.raises(SystemExit):
        zoo.parse_args(["--family", "diffusers", "--only", "bert"])


@pytest.mark.slow
def test_diffusers_models_export_with_both_tools_and_match_eager(zoo):
    pytest.importorskip("diffusers")
    rows = run(zoo, DIFFUSERS_TYPES, family="diffusers", timeout=120)
    assert [(row.model_type, row.class_name) for row in rows] == [
        ("unet_2d_condition", "UNet2DConditionModel"), ("autoencoder_kl", "AutoencoderKL"),
        ("flux", "FluxTransformer2DModel"),
    ]
    for row in rows:
        assert row.built, f"{row.model_type}: {row.reason}"
    assert all(row.verdict == "both ok" for row in rows), describe(zoo, rows)
    assert [row.model_type for row in rows if row.signature_difference] == [], describe(zoo, rows)
    assert "diffusers model types" in zoo.markdown(rows, zoo.Settings(family="diffusers"), zoo.summarize(rows))
