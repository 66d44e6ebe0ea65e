"""Container objects (KV caches) as pytrees: registration, flattening by attributes, specs that
compare and save, and the error for an unregistered class that holds tensors."""

import dataclasses

import pytest
import torch
import torch.utils._pytree as pytree

import exporter
from exporter.inputs.containers import (
    holds_tensors,
    is_known_container,
    leaves_with_paths,
    register_container,
    register_containers_in,
)


class Layer:
    def __init__(self, keys=None, values=None):
        self.keys = keys
        self.values = values
        self.seen = 0
        self.flags = {"ready": keys is not None}
        self.device = torch.device("cpu")


class Cache:
    def __init__(self, layers):
        self.layers = layers
        self.layer_class = Layer


register_container(Layer)
register_container(Cache)


def _cache(length=3):
    return Cache([Layer(torch.randn(1, 2, length, 4), torch.randn(1, 2, length, 4)) for _ in range(2)])


def test_tensor_attributes_are_children_named_by_their_path_and_the_rest_is_the_spec():
    leaves, spec = pytree.tree_flatten_with_path(_cache())
    assert [pytree.keystr(path) for path, _ in leaves] == [
        ".layers[0].keys", ".layers[0].values", ".layers[1].keys", ".layers[1].values"
    ]
    assert spec.context.children == ("layers",)
    assert dict(spec.context.plain) == {"layer_class": Layer}


def test_unflatten_builds_a_new_object_with_the_plain_attributes_and_fresh_mutable_ones():
    cache = _cache()
    leaves, spec = pytree.tree_flatten(cache)
    new = pytree.tree_unflatten([t + 1 for t in leaves], spec)
    assert type(new) is Cache and new is not cache and new.layer_class is Layer
    assert torch.equal(new.layers[1].values, cache.layers[1].values + 1)
    assert new.layers[0].flags == {"ready": True} and new.layers[0].flags is not cache.layers[0].flags


def test_specs_compare_by_class_children_and_plain_values():
    assert pytree.tree_structure(_cache(3)) == pytree.tree_structure(_cache(5))  # shapes are not in the spec
    other = _cache()
    other.layers[0].seen = 7
    assert pytree.tree_structure(other) != pytree.tree_structure(_cache())
    empty = _cache()
    empty.layers[1].keys = None  # None is a plain value: a different spec
    assert pytree.tree_structure(empty) != pytree.tree_structure(_cache())


def test_a_spec_round_trips_through_json_as_torch_export_save_writes_it():
    spec = pytree.tree_structure(_cache())
    assert pytree.treespec_loads(pytree.treespec_dumps(spec)) == spec


def test_a_plain_value_json_cannot_hold_is_refused_when_saving_with_its_name():
    cache = _cache()
    cache.tokenizer = object()
    with pytest.raises(TypeError, match=r"Cache\.tokenizer"):
        pytree.treespec_dumps(pytree.tree_structure(cache))


def test_holds_tensors_looks_through_builtin_containers_and_registered_objects():
    assert holds_tensors({"a": [1, (torch.zeros(1),)]})
    assert holds_tensors([Layer()])  # a container object counts even while empty
    assert not holds_tensors({"a": [1, "x", None]})


def test_dataclasses_and_slotted_classes_are_pointed_elsewhere():
    @dataclasses.dataclass
    class Pair:
        a: torch.Tensor

    class Slotted:
        __slots__ = ("a",)

    with pytest.raises(TypeError, match="register_dataclass"):
        register_container(Pair)
    with pytest.raises(TypeError, match="register_pytree_node"):
        register_container(Slotted)


def test_transformers_caches_are_known_and_registered_on_sight():
    cache_utils = pytest.importorskip("transformers.cache_utils")
    assert is_known_container(cache_utils.DynamicCache) and is_known_container(cache_utils.DynamicLayer)
    assert not is_known_container(Cache)
    cache = cache_utils.DynamicCache()
    cache.update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4), 0)
    register_containers_in({"cache": cache})
    assert [pytree.keystr(p) for p, _ in pytree.tree_flatten_with_path(cache)[0]] == [
        ".layers[0].keys", ".layers[0].values"
    ]


class Unregistered:
    def __init__(self):
        self.state = torch.zeros(2)


class TakesState(torch.nn.Module):
    def forward(self, x, memory):
        return x + memory.state


class ReturnsState(torch.nn.Module):
    def forward(self, x):
        out = Unregistered()
        out.state = x * 2
        return out


def test_an_unregistered_input_object_holding_tensors_gets_the_line_that_registers_it():
    with pytest.raises(exporter.InputSpecError) as info:
        exporter.export(TakesState(), (torch.ones(2), Unregistered()))
    assert "args[1]" in info.value.message and "Unregistered" in info.value.message
    assert info.value.hint == f"register the class before exporting: exporter.register_container({__name__}.Unregistered)"


def test_an_unregistered_output_object_holding_tensors_gets_the_line_that_registers_it():
    with pytest.raises(exporter.TraceError) as info:
        exporter.export(ReturnsState(), (torch.ones(2),))
    assert f"{__name__}.Unregistered at the output" in info.value.message
    assert info.value.hint == f"register the class before exporting: exporter.register_container({__name__}.Unregistered)"


def test_a_registered_container_is_an_input_and_an_output_of_the_program():
    class Step(torch.nn.Module):
        def forward(self, x, cache):
            for layer in cache.layers:
                layer.keys = torch.cat([layer.keys, x], dim=2)
                layer.seen += 0
            return cache

    cache, x = _cache(), torch.randn(1, 2, 1, 4)
    ep = exporter.export(Step(), (x, cache))
    assert ep.graph_signature.user_inputs == (
        "x", "cache_layers_0_keys", "cache_layers_0_values", "cache_layers_1_keys", "cache_layers_1_values"
    )
    out = ep.module()(x, _cache())
    assert isinstance(out, Cache) and out.layers[1].keys.shape == (1, 2, 4, 4)
    assert cache.layers[0].keys.shape == (1, 2, 3, 4)  # the example input is not changed by the export


class Output:
    """An output class registered without key functions, as diffusers registers its own."""

    def __init__(self, sample, extra):
        self.sample, self.extra = sample, extra


pytree.register_pytree_node(
    Output, lambda o: ([o.sample, o.extra], None), lambda leaves, _: Output(*leaves)
)


def test_leaves_of_a_container_without_key_functions_are_numbered():
    tree = {"out": Output(torch.ones(2), torch.zeros(1)), "n": 3}
    with pytest.raises(ValueError, match="flatten_with_keys_fn"):
        pytree.tree_flatten_with_path(tree)
    with_paths, spec = leaves_with_paths(tree)
    assert [pytree.keystr(path) for path, _ in with_paths] == ["[0]", "[1]", "[2]"]
    assert spec == pytree.tree_flatten(tree)[1]
    assert [pytree.keystr(path) for path, _ in leaves_with_paths({"a": [1, 2]})[0]] == ["['a'][0]", "['a'][1]"]


def test_a_model_returning_a_container_without_key_functions_exports():
    class Net(torch.nn.Module):
        def forward(self, x):
            return Output(x * 2, x + 1)

    x = torch.randn(3)
    out = exporter.export(Net(), (x,)).module()(x)
    assert isinstance(out, Output)
    torch.testing.assert_close((out.sample, out.extra), (x * 2, x + 1))
