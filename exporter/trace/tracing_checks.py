"""What a model's libraries ask to learn whether forward is being traced, and how a trace
answers: as torch.export's trace does (``"traced"``, the default), or as eager does
(``"eager"``).

Libraries skip work in eager that they keep while traced. transformers drops the sdpa
attention mask when every entry of the padding mask is one, a test on the mask's values it
does not make while traced (``is_tracing(mask)`` is True for a fake tensor, and while
``torch.compiler.is_exporting()``). Where the skip changes what the model computes (a
bidirectional encoder whose attention is then run as causal), the traced program holds the
traced path and differs from eager on the example itself. Answered as in eager, the test on
the mask becomes a value branch, which branch capture joins as ``torch.cond``: a program
equal to eager on every input.

``torch.compiler.is_compiling()`` keeps answering True either way: torch's own code that
runs inside the trace needs it."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .._options import TRACING_CHECKS

__all__ = ["KNOWN", "TRACING_CHECKS", "answered", "exporting_answer", "library_checks_answering", "loaded_checks"]

KNOWN: tuple[tuple[str, str], ...] = (
    ("transformers.utils.import_utils", "is_tracing"),
    ("transformers.utils.import_utils", "is_torchdynamo_compiling"),
    ("transformers.utils.import_utils", "is_torchdynamo_exporting"),
)
"""The library functions that ask (module, name): each is replaced wherever a loaded module
binds it (``from transformers.utils import is_tracing`` binds it again), besides
``torch.compiler.is_exporting()``."""

_ANSWER = threading.local()


def exporting_answer() -> bool:
    """What ``torch.compiler.is_exporting()`` answers inside a trace: True unless the trace
    answers as eager."""
    return not getattr(_ANSWER, "eager", False)


def _known_functions() -> dict[int, tuple[Callable[..., Any], str]]:
    found = {}
    for module_name, name in KNOWN:
        function = getattr(sys.modules.get(module_name), name, None)
        if callable(function):
            found[id(function)] = (function, f"{module_name}.{name}()")
    return found


def loaded_checks() -> list[str]:
    """The dotted names of the ``KNOWN`` checks whose library is loaded."""
    return sorted(name for _, name in _known_functions().values())


def _bindings(functions: dict[int, tuple[Callable[..., Any], str]]) -> list[tuple[dict, str, Callable[..., Any]]]:
    """Every (module namespace, name, function) that binds one of ``functions``."""
    found = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for key, value in list(namespace.items()):
            hit = functions.get(id(value))
            if hit is not None and hit[0] is value:
                found.append((namespace, key, value))
    return found


@contextlib.contextmanager
def library_checks_answering(value: bool) -> Iterator[None]:
    """Within the block each of ``KNOWN``, wherever bound, answers ``value`` in the tracing
    thread and asks as before in every other."""
    from .patches import in_tracing_thread

    functions = _known_functions()
    bindings = _bindings(functions) if functions else []
    for namespace, key, real in bindings:
        namespace[key] = in_tracing_thread(lambda *args, **kwargs: value, real)
    try:
        yield
    finally:
        for namespace, key, real in bindings:
            namespace[key] = real


@contextlib.contextmanager
def answered(how: str) -> Iterator[None]:
    """Within the block a trace answers the model's tracing checks ``how`` (one of
    ``TRACING_CHECKS``)."""
    if how == "traced":
        yield
        return
    was = getattr(_ANSWER, "eager", False)
    _ANSWER.eager = True
    try:
        with library_checks_answering(False):
            yield
    finally:
        _ANSWER.eager = was
