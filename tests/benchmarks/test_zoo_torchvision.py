"""benchmarks/zoo_torchvision.py: every torchvision builder as a zoo model type, built with
random weights and the inputs torchvision's model tests give it, and zoo.py running the
family.  Nothing is exported here."""

from __future__ import annotations


import pytest
import torch

from tests.benchmarks.scripts import load_script

pytest.importorskip("torchvision")



@pytest.fixture(scope="module")
def family():
    return load_script("zoo_torchvision")


def test_every_builder_is_a_model_type_of_its_kind(family):
    from torchvision import models

    types = family.model_types()
    assert set(types) == {name for module in (models, models.detection, models.segmentation, models.video,
                                              models.optical_flow) for name in models.list_models(module=module)}
    assert "quantized_resnet18" not in types
    assert family.kind("resnet18") == "classification" and family.kind("maskrcnn_resnet50_fpn") == "detection"
    assert family.kind("fcn_resnet50") == "segmentation" and family.kind("r3d_18") == "video"
    assert [t for t in types if family.kind(t) == "optical flow"] == ["raft_large", "raft_small"]
    assert family.cases("fasterrcnn_resnet50_fpn") == ["FasterRCNN"] and family.cases("raft_small") == ["RAFT"]


def test_the_arguments_and_shapes_are_the_model_tests(family):
    params, shape = family.arguments("keypointrcnn_resnet50_fpn")
    assert params == {"weights": None, "num_classes": 2, "weights_backbone": None, "min_size": 224,
                      "max_size": 224, "box_score_thresh": 0.17}
    assert shape == (3, 224, 224)
    assert family.arguments("inception_v3")[1] == (3, 299, 299)
    assert family.arguments("mvit_v2_s")[1] == (3, 16, 224, 224)
    assert family.arguments("vit_l_16") == ({"weights": None, "num_classes": 50, "image_size": 64}, (3, 64, 64))
    raft, _ = family.arguments("raft_small")
    assert raft["corr_block"].num_levels == 2


def test_inputs_take_the_shape_each_forward_expects(family):
    gen = torch.Generator().manual_seed(0)
    detection = family.inputs(None, "ssd300_vgg16", (3, 300, 300), gen)
    assert [image.shape for image in detection["images"]] == [torch.Size([3, 300, 300])] * family.BATCH
    flow = family.inputs(None, "raft_small", (3, 80, 72), gen)
    assert flow["image1"].shape == flow["image2"].shape == (family.BATCH, 3, 80, 72)


def test_a_model_is_built_in_eval_mode_with_its_eager_output(family):
    built = family.build("lraspp_mobilenet_v3_large", "LRASPP")
    assert not built.model.training
    assert list(built.kwargs) == ["input"]  # LRASPP's forward names its input so
    assert built.output["out"].shape == (family.BATCH, 10, 32, 32)


def test_a_model_that_cannot_be_built_says_why(family, monkeypatch):
    monkeypatch.setitem(family.PARAMS, "resnet18", {"no_such_argument": 1})
    with pytest.raises(family.NotBuilt, match="model init fails: TypeError"):
        family.build("resnet18", "ResNet")


def test_the_zoo_runs_the_family_with_dynamic_batches():
    zoo = load_script("zoo")
    release = zoo.results.release_suffix()
    args = zoo.parse_args(["--family", "torchvision", "--dynamic", "--limit", "3"])
    assert zoo.selected_types(args) == ["alexnet", "convnext_base", "convnext_large"]
    assert zoo.results_name(args) == f"zoo-torchvision-subset-dynamic-{release}"
    assert zoo.results_title(args).startswith("Model zoo (torchvision, subset, dynamic shapes)")
    assert zoo.model_kind("raft_small", "torchvision") == "optical flow"


@pytest.mark.parametrize("model_type", ["ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn"])
def test_a_detector_comes_with_weights_that_find_nothing(family, model_type):
    built = family.build(model_type, family.cases(model_type)[0])
    assert all(len(found["boxes"]) for found in built.output)
    ((how, state),) = built.weights
    assert "no detections" in how
    with torch.no_grad():
        quiet = torch.func.functional_call(built.model, state, (), built.kwargs)
    assert [len(found["boxes"]) for found in quiet] == [0] * family.BATCH
    assert not family.build("resnet18", "ResNet").weights
