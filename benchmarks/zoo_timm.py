"""timm's image models for the zoo: every architecture up to ``CAP`` parameters, random weights.

A model type is one name of ``timm.list_models()`` whose model, built with
``pretrained=False``, has at most ``CAP`` (60M) parameters. Its input is a batch of 2 images
at the model's default input size (``pretrained_cfg["input_size"]``); nothing is downloaded.

The model types come family first: the first model of every architecture family (a module
of ``timm.models``, in ``timm.list_modules()`` order) and then the rest in
``timm.list_models()`` order, so the first ``len(families())`` types are one model per
family and a run of the first N types (``zoo.py --family timm --limit N``) covers as many
families as it can.

Knowing a model's size means building it: every model is built once on the meta device
(no memory, no weights; several minutes for timm's 1,300 models), and what that tells
(family, class, parameters, kind) is kept in the user's cache directory, one file per timm
release, so later runs start at once.

``model_types()``, ``kind(model_type)``, ``cases(model_type)`` and ``build(model_type,
class_name)`` answer as ``zoo_models`` does for transformers, so ``zoo.py --family timm``
runs these models the way it runs the transformers zoo.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import warnings
from pathlib import Path

import attrs
import timm
import torch
from zoo_models import Built, NotBuilt

BATCH = 2
CAP = 60_000_000
"""The most parameters a model may have to be in the zoo (``pretrained=False``)."""


@attrs.frozen
class Census:
    """What building a model on the meta device tells about it."""

    family: str
    """The ``timm.models`` module that registers it (``resnet``, ``vision_transformer``)."""
    class_name: str | None = None
    parameters: int | None = None
    kind: str = "unknown"
    error: str | None = None
    """Why it could not be built on the meta device (its size is then unknown)."""


def kind_of(model: torch.nn.Module) -> str:
    """convnet, transformer, hybrid or MLP: whether the model has self-attention (a layer
    with ``num_heads``) and spatial convolutions beyond a patch embedding."""
    attention = any(hasattr(layer, "num_heads") for layer in model.modules())
    convolutions = sum(isinstance(layer, torch.nn.Conv2d) and max(layer.kernel_size) > 1 for layer in model.modules())
    if attention:
        return "hybrid" if convolutions > 2 else "transformer"
    return "convnet" if convolutions > 2 else "MLP"


def _census(name: str, family: str) -> Census:
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            model = timm.create_model(name, pretrained=False)
    except Exception as e:
        return Census(family, error=f"{type(e).__name__}: {_headline(e)}")
    return Census(family, type(model).__name__, sum(p.numel() for p in model.parameters()), kind_of(model))


def _cache_file() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "torch-exporter" / f"zoo-timm-{timm.__version__}.json"


@functools.cache
def census() -> dict[str, Census]:
    """Every timm model, in ``list_modules()`` then ``list_models()`` order: read from the
    cache when this timm release has been counted, else counted now and cached."""
    path = _cache_file()
    try:
        return {name: Census(**entry) for name, entry in json.loads(path.read_text()).items()}
    except (OSError, ValueError, TypeError):
        pass
    names = [(name, family) for family in timm.list_modules() for name in timm.list_models(module=family)]
    print(f"zoo_timm: building timm {timm.__version__}'s {len(names)} models on the meta device to count their "
          f"parameters (once; kept in {path})", file=sys.stderr, flush=True)
    found = {name: _census(name, family) for name, family in names}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({name: attrs.asdict(entry) for name, entry in found.items()}, indent=0))
    except OSError:
        pass  # counted again next time
    return found


def _in_zoo(entry: Census) -> bool:
    return entry.parameters is None or entry.parameters <= CAP


def families() -> list[str]:
    """The architecture families with a model in the zoo, in ``timm.list_modules()`` order."""
    return list(dict.fromkeys(entry.family for entry in census().values() if _in_zoo(entry)))


@functools.cache
def model_types() -> list[str]:
    """Every timm model of at most ``CAP`` parameters: the first of each family, then the rest."""
    names = [name for name, entry in census().items() if _in_zoo(entry)]
    first: dict[str, str] = {}
    for name in names:
        first.setdefault(census()[name].family, name)
    chosen = set(first.values())
    order = {name: i for i, name in enumerate(timm.list_models())}
    return [*first.values(), *sorted((name for name in names if name not in chosen), key=order.__getitem__)]


def kind(model_type: str) -> str:
    """convnet, transformer, hybrid or MLP (see ``kind_of``)."""
    return census()[model_type].kind


def cases(model_type: str) -> list[str]:
    """The model's class (``ResNet``): one case each."""
    return [census()[model_type].class_name or model_type]


def build(model_type: str, class_name: str, seed: int = 0) -> Built:
    """``model_type`` with random weights in eval mode, and a batch of images at its default size."""
    torch.manual_seed(seed)
    try:
        model = timm.create_model(model_type, pretrained=False).eval()
    except Exception as e:
        raise NotBuilt(f"model init fails: {type(e).__name__}: {_headline(e)}") from e
    size = tuple(model.pretrained_cfg.get("input_size") or (3, 224, 224))
    name = next(iter(inspect.signature(model.forward).parameters))
    kwargs = {name: torch.randn((BATCH, *size), generator=torch.Generator().manual_seed(seed))}
    try:
        with torch.no_grad():
            output = model(**kwargs)
    except Exception as e:
        raise NotBuilt(f"eager forward fails on the inputs: {type(e).__name__}: {_headline(e)}") from e
    return Built(model, kwargs, output)


def _headline(error: BaseException) -> str:
    """The error's text on one line."""
    text = " ".join(str(error).split())
    return text[:300] if text else type(error).__name__


__all__ = ["CAP", "Built", "Census", "NotBuilt", "build", "cases", "census", "families", "kind", "kind_of",
           "model_types"]
