"""benchmarks/zoo_timm.py: timm's models up to the size cap as zoo model types, one model per
architecture family first, and zoo.py running the family.  The census of every timm model
(minutes) is stood in for; nothing is exported here."""

from __future__ import annotations

import json

import pytest
import torch

from tests.benchmarks.scripts import load_script

pytest.importorskip("timm")



@pytest.fixture(scope="module")
def family():
    return load_script("zoo_timm")


@pytest.fixture
def census(family, monkeypatch):
    """A census of a few models (resnet's and vision_transformer's, in timm's own order)."""
    entries = {
        "resnet101": family.Census("resnet", "ResNet", 44_500_000, "convnet"),
        "resnet18": family.Census("resnet", "ResNet", 11_700_000, "convnet"),
        "resnet200": family.Census("resnet", "ResNet", 64_700_000, "convnet"),
        "vit_base_patch16_224": family.Census("vision_transformer", "VisionTransformer", 86_600_000, "transformer"),
        "vit_small_patch16_224": family.Census("vision_transformer", "VisionTransformer", 22_100_000, "transformer"),
        "vit_tiny_patch16_224": family.Census("vision_transformer", "VisionTransformer", 5_700_000, "transformer"),
    }
    monkeypatch.setattr(family, "census", lambda: entries)
    family.model_types.cache_clear()
    yield entries
    family.model_types.cache_clear()


def test_model_types_are_under_the_cap_one_per_family_first(family, census):
    assert family.CAP == 60_000_000
    assert family.model_types() == ["resnet101", "vit_small_patch16_224", "resnet18", "vit_tiny_patch16_224"]
    assert family.families() == ["resnet", "vision_transformer"]
    assert family.kind("vit_tiny_patch16_224") == "transformer" and family.cases("resnet18") == ["ResNet"]


class Convnet(torch.nn.Sequential):
    def __init__(self):
        super().__init__(*[torch.nn.Conv2d(3, 3, 3) for _ in range(3)])


class Attention(torch.nn.Module):
    num_heads = 2


@pytest.mark.parametrize(("layers", "kind"), [
    ([Convnet()], "convnet"),
    ([torch.nn.Conv2d(3, 8, 16, stride=16), Attention()], "transformer"),
    ([Convnet(), torch.nn.MultiheadAttention(8, 2)], "hybrid"),
    ([torch.nn.Conv2d(3, 8, 16, stride=16), torch.nn.Linear(8, 8)], "MLP"),
])
def test_a_models_kind_is_read_from_its_layers(family, layers, kind):
    assert family.kind_of(torch.nn.Sequential(*layers)) == kind


def test_the_census_is_read_from_the_cache_of_its_timm_release(family, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = family._cache_file()
    assert path.is_relative_to(tmp_path) and family.timm.__version__ in path.name
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"resnet18": {"family": "resnet", "class_name": "ResNet", "parameters": 11_689_512,
                                             "kind": "convnet", "error": None}}))
    family.census.cache_clear()
    try:
        assert family.census() == {"resnet18": family.Census("resnet", "ResNet", 11_689_512, "convnet")}
    finally:
        family.census.cache_clear()


def test_a_census_entry_is_what_the_meta_device_build_says(family):
    entry = family._census("resnet18", "resnet")
    assert entry == family.Census("resnet", "ResNet", 11_689_512, "convnet")


def test_a_model_takes_a_batch_of_images_at_its_default_size(family):
    built = family.build("test_vit", "VisionTransformer")
    assert not built.model.training
    assert {name: value.shape for name, value in built.kwargs.items()} == {"x": (family.BATCH, 3, 160, 160)}
    assert built.output.shape[0] == family.BATCH


def test_the_zoo_runs_the_family_limited_to_the_first_types(census):
    zoo = load_script("zoo")
    release = zoo.results.release_suffix()
    args = zoo.parse_args(["--family", "timm", "--limit", "2", "--dynamic"])
    assert zoo.selected_types(args) == ["resnet101", "vit_small_patch16_224"]
    assert zoo.results_name(args) == f"zoo-timm-subset-dynamic-{release}"
    with pytest.raises(SystemExit):
        zoo.parse_args(["--family", "timm", "--only", "vit_base_patch16_224"])  # over the cap
