"""The trace running now and its nodes, whichever tracer records it (make_fx, or the fast
recorder, which registers itself here while it traces)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

import torch

from .._torch_internals import traced_graph as make_fx_graph, traced_node as make_fx_node

__all__ = ["Recording", "recording", "traced_graph", "traced_node"]


class Recording(Protocol):
    """A tracer other than make_fx, as this module asks it."""

    graph: torch.fx.Graph
    refused: str | None
    """Why it handed the trace to make_fx, once it has."""

    def node_of(self, value: Any) -> torch.fx.Node | None: ...


_RECORDING: list[Recording] = []
"""The tracer recording now, if not make_fx (exports run one at a time, under EXPORT_LOCK)."""


@contextlib.contextmanager
def recording(tracer: Recording) -> Iterator[None]:
    """Within the block, ``tracer`` is the trace ``traced_graph`` and ``traced_node`` ask."""
    _RECORDING.append(tracer)
    try:
        yield
    finally:
        _RECORDING.pop()


def traced_graph() -> torch.fx.Graph | None:
    """The graph the active trace is recording, if one is."""
    if _RECORDING and _RECORDING[-1].refused is None:
        return _RECORDING[-1].graph
    return make_fx_graph()


def traced_node(value: torch.Tensor) -> torch.fx.Node | None:
    """The node of the active trace that produced ``value`` (a fake tensor), if it saw it."""
    if _RECORDING:
        return _RECORDING[-1].node_of(value)
    return make_fx_node(value)
