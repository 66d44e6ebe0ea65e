"""torchvision's models for the zoo: every builder of ``torchvision.models``, random weights.

A model type is one builder name (``torchvision.models.list_models``): the classifiers,
detectors, segmenters, video classifiers and optical-flow models, each built with
``weights=None`` (and ``weights_backbone=None``), in eval mode, with the arguments and input
shapes torchvision's own model tests use (``test/test_models.py`` in the torchvision
repository), at a batch of 2: a detector takes a list of two 3xHxW images, RAFT two image
batches, a video model B,C,T,H,W clips. The tests' large models run at 64x64 images, so the
zoo runs on a CPU in reasonable time. Nothing is downloaded.

``model_types()``, ``kind(model_type)``, ``cases(model_type)`` and ``build(model_type,
class_name)`` answer as ``zoo_models`` does for transformers, so ``zoo.py --family
torchvision`` runs these models the way it runs the transformers zoo.
"""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Any

import torch
from torchvision import models
from zoo_models import Built, NotBuilt

BATCH = 2
"""Images per example: a batch dimension, or the length of a detector's list of images."""


# What a model takes, by the subpackage its builder is registered in.
KINDS = (
    ("classification", models),
    ("detection", models.detection),
    ("segmentation", models.segmentation),
    ("video", models.video),
    ("optical flow", models.optical_flow),
)

# Builder arguments and input shape (one sample) for each kind, then per model: the values of
# torchvision's model tests.
DEFAULTS: dict[str, dict[str, Any]] = {
    "classification": {"num_classes": 50, "input_shape": (3, 224, 224)},
    "detection": {"num_classes": 50, "weights_backbone": None, "input_shape": (3, 300, 300)},
    "segmentation": {"num_classes": 10, "weights_backbone": None, "input_shape": (3, 32, 32)},
    "video": {"num_classes": 50, "input_shape": (3, 4, 112, 112)},
    "optical flow": {"input_shape": (3, 80, 72)},
}
_DETECTION_224 = {"min_size": 224, "max_size": 224, "input_shape": (3, 224, 224)}
PARAMS: dict[str, dict[str, Any]] = {
    "inception_v3": {"input_shape": (3, 299, 299), "init_weights": True},
    "googlenet": {"init_weights": True},
    "vit_h_14": {"image_size": 56, "input_shape": (3, 56, 56)},
    "retinanet_resnet50_fpn": {"num_classes": 20, "score_thresh": 0.01, **_DETECTION_224},
    "retinanet_resnet50_fpn_v2": {"num_classes": 20, "score_thresh": 0.01, **_DETECTION_224},
    "keypointrcnn_resnet50_fpn": {"num_classes": 2, "box_score_thresh": 0.17, **_DETECTION_224},
    "fasterrcnn_resnet50_fpn": {"num_classes": 20, **_DETECTION_224},
    "fasterrcnn_resnet50_fpn_v2": {"num_classes": 20, **_DETECTION_224},
    "fcos_resnet50_fpn": {"num_classes": 2, "score_thresh": 0.05, **_DETECTION_224},
    "maskrcnn_resnet50_fpn": {"num_classes": 10, **_DETECTION_224},
    "maskrcnn_resnet50_fpn_v2": {"num_classes": 10, **_DETECTION_224},
    "fasterrcnn_mobilenet_v3_large_fpn": {"box_score_thresh": 0.02076},
    "fasterrcnn_mobilenet_v3_large_320_fpn": {
        "box_score_thresh": 0.02076, "rpn_pre_nms_top_n_test": 1000, "rpn_post_nms_top_n_test": 1000,
    },
    "mvit_v1_b": {"input_shape": (3, 16, 224, 224)},
    "mvit_v2_s": {"input_shape": (3, 16, 224, 224)},
    "s3d": {"input_shape": (3, 16, 224, 224)},
}
# The tests' slow models run at 64x64; the zoo adds the other classifiers of 30 GFLOPs and up.
SMALL_IMAGES = (
    "convnext_base", "convnext_large", "resnext101_32x8d", "resnext101_64x4d", "wide_resnet101_2",
    "efficientnet_b6", "efficientnet_b7", "efficientnet_v2_m", "efficientnet_v2_l", "regnet_y_16gf",
    "regnet_y_32gf", "regnet_y_128gf", "regnet_x_16gf", "regnet_x_32gf", "swin_t", "swin_s", "swin_b",
    "swin_v2_t", "swin_v2_s", "swin_v2_b",
)
VIT_SMALL_IMAGES = ("vit_l_16", "vit_l_32")
"""ViTs whose position embedding is sized by ``image_size``: built for 64x64 images too."""
for _name in SMALL_IMAGES:
    PARAMS[_name] = {"input_shape": (3, 64, 64)}
for _name in VIT_SMALL_IMAGES:
    PARAMS[_name] = {"image_size": 64, "input_shape": (3, 64, 64)}


@functools.cache
def _kinds() -> dict[str, str]:
    return {name: kind for kind, module in KINDS for name in models.list_models(module=module)}


def model_types() -> list[str]:
    """Every builder: classifiers, then detectors, segmenters, video and optical-flow models."""
    return list(_kinds())


def kind(model_type: str) -> str:
    """classification, detection, segmentation, video or optical flow."""
    return _kinds()[model_type]


def cases(model_type: str) -> list[str]:
    """The class the builder returns (``ResNet``): one per model type."""
    returns = typing.get_type_hints(models.get_model_builder(model_type)).get("return")
    return [getattr(returns, "__name__", model_type)]


def arguments(model_type: str) -> tuple[dict[str, Any], tuple[int, ...]]:
    """The builder's keyword arguments and one sample's input shape."""
    params = {**DEFAULTS[kind(model_type)], **PARAMS.get(model_type, {})}
    shape = params.pop("input_shape")
    if kind(model_type) == "optical flow":
        # RAFT's correlation pyramid at the tests' small images: fewer levels, or it pools them to nothing
        params["corr_block"] = models.optical_flow.raft.CorrBlock(num_levels=2, radius=2)
    return {"weights": None, **params}, shape


def inputs(model: torch.nn.Module, model_type: str, shape: tuple[int, ...], gen: torch.Generator) -> dict[str, Any]:
    """Keyword inputs as the model's forward names them, ``BATCH`` samples of ``shape``."""
    if kind(model_type) == "detection":
        return {"images": [torch.rand(shape, generator=gen) for _ in range(BATCH)]}
    if kind(model_type) == "optical flow":
        return {"image1": torch.rand((BATCH, *shape), generator=gen), "image2": torch.rand((BATCH, *shape), generator=gen)}
    name = next(iter(inspect.signature(model.forward).parameters))  # x, or LRASPP's input
    return {name: torch.rand((BATCH, *shape), generator=gen)}


def build(model_type: str, class_name: str, seed: int = 0) -> Built:
    """``model_type`` with random weights in eval mode, and inputs its eager forward accepts."""
    params, shape = arguments(model_type)
    torch.manual_seed(seed)
    try:
        model = models.get_model(model_type, **params).eval()
    except Exception as e:
        raise NotBuilt(f"model init fails: {type(e).__name__}: {_headline(e)}") from e
    kwargs = inputs(model, model_type, shape, torch.Generator().manual_seed(seed))
    try:
        with torch.no_grad():
            output = model(**kwargs)
    except Exception as e:
        raise NotBuilt(f"eager forward fails on the inputs: {type(e).__name__}: {_headline(e)}") from e
    return Built(model, kwargs, output, weights=_quiet(model))


def _quiet(model: torch.nn.Module) -> tuple[tuple[str, dict[str, torch.Tensor]], ...]:
    """A detector's weights with its class scores lowered far below its score threshold, so
    it finds nothing in any image: its NMS steps then take their empty side, which random
    weights on random images never do.  Empty for a model that is not a detector."""
    own = model.state_dict()
    state: dict[str, torch.Tensor] = {}  # the biases changed, by name

    def changed(name: str) -> torch.Tensor:
        state[name] = own[name].clone()
        return state[name]

    if hasattr(model, "roi_heads"):  # Faster, Mask and Keypoint R-CNN: softmax, background first
        changed("roi_heads.box_predictor.cls_score.bias")[0] += 100
    elif hasattr(getattr(getattr(model, "head", None), "classification_head", None), "cls_logits"):
        changed("head.classification_head.cls_logits.bias").sub_(100)  # RetinaNet, FCOS: a sigmoid per class
    elif hasattr(getattr(getattr(model, "head", None), "classification_head", None), "num_columns"):
        head = model.head.classification_head  # SSD, SSDlite: softmax over num_columns, background first
        for k, block in enumerate(head.module_list):
            name = [n for n, m in block.named_modules() if isinstance(m, torch.nn.Conv2d)][-1]  # the scores' conv
            conv = f"head.classification_head.module_list.{k}" + (f".{name}" if name else "")
            changed(f"{conv}.bias").view(-1, head.num_columns)[:, 0] += 100
    else:
        return ()
    return (("class scores lowered (no detections)", state),)


def _headline(error: BaseException) -> str:
    """The error's text on one line."""
    text = " ".join(str(error).split())
    return text[:300] if text else type(error).__name__


__all__ = ["Built", "NotBuilt", "build", "cases", "kind", "model_types"]
