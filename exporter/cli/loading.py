"""Load ``file.py:Name`` / ``package.module:Name``, build the model, find its example inputs.

Every failure here is the user's input being wrong (a missing file, a typo in a name, a
model file that does not import, a constructor that raises): it is reported as an
``InputSpecError`` naming the reference and saying what to do, never as a traceback.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import os
import sys
import tokenize
import traceback
import types
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import torch
import torch.utils._pytree as pytree

from .._errors import InputSpecError, point_at
from .shorthand import looks_like_callable_reference, parse_inputs_spec

__all__ = [
    "ExampleInputs",
    "LoadedModel",
    "Reference",
    "load_model",
    "parse_init_args",
    "parse_reference",
    "resolve_example_inputs",
]


@attrs.frozen
class Reference:
    """``path/to/file.py:Name``, ``package.module:Name`` or (for input functions) ``:Name``."""

    text: str
    module: str
    """A file path, a dotted module name, or '' for "the model's own file"."""
    attr: str

    @property
    def is_file(self) -> bool:
        return self.module.endswith(".py") or os.sep in self.module or "/" in self.module


def parse_reference(text: str, what: str) -> Reference:
    """Split ``module:attr``; ``what`` names the argument in errors (``MODEL``, ``--example-inputs``)."""
    module, sep, attr = text.rpartition(":")
    if not sep or not attr or not attr.replace(".", "_").isidentifier():
        raise InputSpecError(
            f"{what} {text!r} is not a reference of the form path/to/file.py:Name or package.module:Name",
            hint="name the file (or importable module) and the object in it, separated by ':'",
        )
    return Reference(text, module, attr)


def _user_frame_in(exc: BaseException, path: str) -> str | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename) == path]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


class _ProcessExit(BaseException):
    """``os._exit`` called while a model file is imported."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _exits_raise() -> Iterator[None]:
    """While a model file is imported, ``os._exit`` raises instead of ending the process
    unannounced (``sys.exit`` already raises): the CLI can then say which file did it."""

    def refuse(code: int) -> None:
        raise _ProcessExit(code)

    real, os._exit = os._exit, refuse
    try:
        yield
    finally:
        os._exit = real


def _not_text(ref: Reference, what: str, path: str) -> InputSpecError:
    """The error for a model file Python cannot decode, with the first byte it stops at."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
    except SyntaxError:
        encoding = "utf-8"
    try:
        raw.decode(encoding)
        where, line = "", None
    except (UnicodeDecodeError, LookupError) as e:
        start = getattr(e, "start", 0)
        line = raw.count(b"\n", 0, start) + 1
        column = start - (raw.rfind(b"\n", 0, start) + 1) + 1
        where = f": byte 0x{raw[start]:02x} at line {line}, column {column}"
    return InputSpecError(
        f"{what} {ref.text!r}: {ref.module} is not {'UTF-8' if encoding == 'utf-8' else encoding} text{where}",
        location=f"{path}:{line}" if line else None,
        hint="save the file as UTF-8, or name its encoding in a comment on its first line: # -*- coding: latin-1 -*-",
    )


def _import_file(ref: Reference, what: str) -> types.ModuleType:
    path = os.path.abspath(ref.module)
    if not os.path.isfile(path):
        raise InputSpecError(
            f"{what} {ref.text!r}: file {ref.module} does not exist",
            hint=f"give a path relative to the current directory ({os.getcwd()}) or an absolute path",
        )
    # The file's stem names the module (so class names in the program read `mlp.MLP`),
    # unless another module already has that name.
    name = os.path.splitext(os.path.basename(path))[0]
    existing = sys.modules.get(name)
    if existing is not None:
        if os.path.abspath(getattr(existing, "__file__", "") or "") == path:
            return existing
        name = f"{name}_{hashlib.sha1(path.encode()).hexdigest()[:8]}"
        if name in sys.modules:
            return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # Registered before running so dataclasses and pickling can find it; the file's own
    # directory goes on the path so it can import its sibling modules.
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(path))
    try:
        with _exits_raise():
            spec.loader.exec_module(module)
    except SyntaxError as e:
        del sys.modules[name]
        if "can't decode" in str(e.msg):
            raise _not_text(ref, what, path) from None
        caret = f"\n{point_at(e.text.rstrip(), (e.offset or 1) - 1)}" if e.text else ""
        raise InputSpecError(
            f"{what} {ref.text!r}: {ref.module} has a syntax error at line {e.lineno}: {e.msg}{caret}",
            location=f"{path}:{e.lineno}",
            hint=f"fix the file; `python {ref.module}` shows the same error",
        ) from None
    except (SystemExit, _ProcessExit) as e:
        del sys.modules[name]
        how = f"os._exit({e.code!r})" if isinstance(e, _ProcessExit) else f"sys.exit({e.code!r})"
        raise InputSpecError(
            f"{what} {ref.text!r}: importing {ref.module} ends the process: it calls {how}",
            location=_user_frame_in(e, path),
            hint="a model file must not exit when imported: put script code under `if __name__ == \"__main__\":`",
        ) from None
    except BaseException as e:
        del sys.modules[name]
        if isinstance(e, KeyboardInterrupt):
            raise
        raise InputSpecError(
            f"{what} {ref.text!r}: importing {ref.module} failed: {type(e).__name__}: {e}",
            location=_user_frame_in(e, path),
            hint=f"`python {ref.module}` shows the full error; a missing package needs installing",
        ) from e
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


def _import_module(ref: Reference, what: str) -> types.ModuleType:
    try:
        return importlib.import_module(ref.module)
    except ModuleNotFoundError as e:
        if e.name and ref.module.startswith(e.name):
            raise InputSpecError(
                f"{what} {ref.text!r}: no module named {ref.module!r}",
                hint="give a file path (model.py:Name), or install the package / add it to PYTHONPATH",
            ) from None
        raise InputSpecError(
            f"{what} {ref.text!r}: importing {ref.module} failed: {e}",
            hint="install the missing package",
        ) from e
    except Exception as e:
        raise InputSpecError(
            f"{what} {ref.text!r}: importing {ref.module} failed: {type(e).__name__}: {e}",
            hint=f"`python -c 'import {ref.module}'` shows the full error",
        ) from e


def import_reference_module(ref: Reference, what: str) -> types.ModuleType:
    """The module a reference points into."""
    return _import_file(ref, what) if ref.is_file else _import_module(ref, what)


def _candidates(module: types.ModuleType) -> list[str]:
    own = getattr(module, "__name__", None)
    names = []
    for key, value in vars(module).items():
        if key.startswith("_"):
            continue
        defined_here = getattr(value, "__module__", own) == own
        if defined_here and (inspect.isclass(value) or inspect.isfunction(value) or isinstance(value, torch.nn.Module)):
            names.append(key)
    return names


def resolve_attribute(module: types.ModuleType, ref: Reference, what: str) -> Any:
    value: Any = module
    for atom in ref.attr.split("."):
        if not hasattr(value, atom):
            where = ref.module or "the model's file"
            available = _candidates(module)
            close = difflib.get_close_matches(atom, available, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            hint += f"{where} defines: {', '.join(available) or 'nothing usable'}"
            raise InputSpecError(f"{what} {ref.text!r}: {where} has no {ref.attr!r}", hint=hint)
        value = getattr(value, atom)
    return value


def parse_init_args(text: str | None) -> dict[str, Any]:
    """``--init-args`` JSON -> keyword arguments."""
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputSpecError(
            f"--init-args is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}\n"
            + point_at(text, e.pos),
            hint='give a JSON object of constructor keyword arguments, like \'{"hidden": 64}\'',
        ) from None
    if not isinstance(value, dict):
        raise InputSpecError(
            f"--init-args must be a JSON object of keyword arguments, got a JSON {type(value).__name__}",
            hint='wrap the values in an object, like \'{"hidden": 64, "layers": 2}\'',
        )
    return value


@attrs.frozen
class LoadedModel:
    model: torch.nn.Module
    name: str
    """The referenced object's name (class, function or instance attribute)."""
    module: types.ModuleType
    """The module the model was found in (where ``:make_inputs`` references are looked up)."""
    reference: Reference


def _construct(factory: Callable, name: str, init_args: dict[str, Any], ref: Reference) -> Any:
    try:
        inspect.signature(factory).bind(**init_args)
    except TypeError as e:
        raise InputSpecError(
            f"--init-args do not fit {name}{_signature_text(factory)}: {e}",
            hint="pass the constructor's keyword arguments as a JSON object with --init-args",
        ) from None
    except ValueError:
        pass  # no signature available (builtins): let the call decide
    try:
        return factory(**init_args)
    except Exception as e:
        args = ", ".join(f"{k}={v!r}" for k, v in init_args.items())
        path = os.path.abspath(ref.module) if ref.is_file else None
        raise InputSpecError(
            f"{name}({args}) raised {type(e).__name__}: {e}",
            location=_user_frame_in(e, path) if path else None,
            hint="fix the constructor, or pass different --init-args",
        ) from e


def _signature_text(factory: Callable) -> str:
    try:
        return str(inspect.signature(factory))
    except (TypeError, ValueError):
        return "(...)"


def load_model(reference: str, init_args: dict[str, Any] | None = None, *, train: bool = False) -> LoadedModel:
    """Import ``reference`` and make the model: a module class (instantiated with
    ``init_args``), a function returning a module (called with them) or a module instance.
    The model is put in eval mode unless ``train``."""
    init_args = init_args or {}
    ref = parse_reference(reference, "MODEL")
    if not ref.module:
        raise InputSpecError(
            f"MODEL {reference!r} names no file or module before ':'",
            hint="write path/to/file.py:Name or package.module:Name",
        )
    module = import_reference_module(ref, "MODEL")
    target = resolve_attribute(module, ref, "MODEL")
    name = ref.attr
    if isinstance(target, torch.nn.Module):
        if init_args:
            raise InputSpecError(
                f"--init-args were given, but {name} is already a module instance",
                hint="drop --init-args, or point MODEL at the class or a function that builds the model",
            )
        model = target
    elif inspect.isclass(target):
        if not issubclass(target, torch.nn.Module):
            raise InputSpecError(
                f"MODEL {reference!r}: {name} is a class but not a torch.nn.Module",
                hint="point MODEL at an nn.Module class, a function returning a module, or a module instance",
            )
        model = _construct(target, name, init_args, ref)
    elif callable(target):
        model = _construct(target, name, init_args, ref)
        if not isinstance(model, torch.nn.Module):
            raise InputSpecError(
                f"MODEL {reference!r}: {name}() returned {type(model).__name__}, not a torch.nn.Module",
                hint="make the function return the model",
            )
    else:
        raise InputSpecError(
            f"MODEL {reference!r}: {name} is a {type(target).__name__}, not an nn.Module class, "
            "a function returning a module, or a module instance",
            hint="point MODEL at the model class",
        )
    model.train(train)
    return LoadedModel(model, name, module, ref)


# -- example inputs ------------------------------------------------------------------------


@attrs.frozen
class ExampleInputs:
    """The example inputs, where they came from, and a way to draw fresh ones like them."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    source: str
    fresh: Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]]
    """seed -> new (args, kwargs) of the same kind (seed 0 gives the example again)."""


def _as_args_kwargs(value: Any, source: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(value, torch.Tensor):
        return (value,), {}
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], (tuple, list))
        and isinstance(value[1], dict)
    ):
        return tuple(value[0]), dict(value[1])
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    if isinstance(value, dict):
        return (), dict(value)
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise InputSpecError(
        f"example inputs from {source} are a {type(value).__name__} ({shown}), not inputs for forward()",
        hint="return a tuple of positional inputs, (args, kwargs), a dict of keyword inputs, or a single tensor",
    )


def _call_inputs_function(fn: Callable, source: str, model: torch.nn.Module, seed: int):
    # Drawing under a fixed seed makes seed 0 reproduce the example and other seeds give
    # fresh inputs of the same kind; the caller's random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            takes_model = _positional_count(fn) == 1
            value = fn(model) if takes_model else fn()
        except InputSpecError:
            raise
        except Exception as e:
            raise InputSpecError(
                f"the example-inputs function {source} raised {type(e).__name__}: {e}",
                hint="fix the function; it takes no arguments (or the model) and returns the inputs",
            ) from e
    return _as_args_kwargs(value, source)


def _positional_count(fn: Callable) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(
        1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    )


def _from_function(fn: Callable, source: str, model: torch.nn.Module) -> ExampleInputs:
    args, kwargs = _call_inputs_function(fn, source, model, seed=0)
    return ExampleInputs(args, kwargs, source, lambda seed: _call_inputs_function(fn, source, model, seed))


def _from_value(value: Any, source: str) -> ExampleInputs:
    args, kwargs = _as_args_kwargs(value, source)
    return ExampleInputs(args, kwargs, source, lambda seed: redraw_like((args, kwargs), seed))


def redraw_like(tree: Any, seed: int) -> Any:
    """Fresh tensors like those in ``tree``: same shape and dtype, values drawn uniformly in
    each tensor's own [min, max] (integers and bools included); seed 0 returns ``tree``."""
    if seed == 0:
        return tree
    generator = torch.Generator().manual_seed(seed)

    def redraw(t: torch.Tensor) -> torch.Tensor:
        if t.numel() == 0 or t.device.type == "meta":
            return t.clone()  # nothing to draw: no values (a meta tensor has only a shape)
        if t.dtype == torch.bool:
            return torch.randint(0, 2, t.shape, generator=generator).bool()
        low, high = t.min().item(), t.max().item()
        if t.is_floating_point():
            u = torch.rand(t.shape, generator=generator, dtype=torch.float64)
            return (low + u * (high - low)).to(t.dtype)
        if t.is_complex():
            return torch.randn(t.shape, generator=generator, dtype=t.dtype)
        return torch.randint(int(low), int(high) + 1, t.shape, generator=generator, dtype=t.dtype)

    return pytree.tree_map_only(torch.Tensor, redraw, tree)


def resolve_example_inputs(spec: str | None, loaded: LoadedModel) -> ExampleInputs:
    """The example inputs for ``loaded``, from ``--example-inputs`` or, if not given, from an
    ``example_inputs`` attribute of the model's class or a module-level ``example_inputs``."""
    model = loaded.model
    if spec is not None:
        if looks_like_callable_reference(spec):
            ref = parse_reference(spec, "--example-inputs")
            module = loaded.module if not ref.module else import_reference_module(ref, "--example-inputs")
            fn = resolve_attribute(module, ref, "--example-inputs")
            if not callable(fn):
                return _from_value(fn, spec)
            return _from_function(fn, spec, model)
        parsed = parse_inputs_spec(spec)
        parsed.require_memory()  # before drawing: an allocation the machine cannot hold may not fail cleanly
        args, kwargs = parsed.materialize(0)
        return ExampleInputs(args, kwargs, f"--example-inputs {str(parsed)!r}", parsed.materialize)

    cls = type(model)
    if "example_inputs" in dir(cls):
        found = getattr(model, "example_inputs")
        source = f"{cls.__name__}.example_inputs"
        return _from_function(found, source, model) if callable(found) else _from_value(found, source)
    if hasattr(loaded.module, "example_inputs"):
        found = loaded.module.example_inputs
        source = f"example_inputs in {loaded.reference.module}"
        return _from_function(found, source, model) if callable(found) else _from_value(found, source)
    raise InputSpecError(
        f"no example inputs for {loaded.name}",
        hint="give them with --example-inputs 'f32[8,16]' (shorthand), --example-inputs file.py:make_inputs "
        "(a function returning args or (args, kwargs)), or define example_inputs in the model file "
        "or on the class",
    )
