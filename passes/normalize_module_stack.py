"""Put nn_module_stack and stack_trace metadata into the form torch.export produces."""

from __future__ import annotations


from exporter._ir import ROOT_MODULE_KEY, graph_modules, module_stack_key
from exporter._state import ExportState

__all__ = ["normalize_module_stack"]


def _qualified_name(cls) -> str:
    if isinstance(cls, str):
        return cls
    return f"{cls.__module__}.{cls.__qualname__}"


def normalize_module_stack(state: ExportState) -> bool:
    """Every call_function and get_attr node of the top-level graph has a well-formed stack.

    Afterwards each such node's ``nn_module_stack`` is a dict from torch.export's key
    (``L__self__`` + call path) to ``(FQN relative to the root, qualified class name)``,
    outermost first, starting with the root module; nodes traced outside any module call
    (syncing a mutated input after forward returned) get the root entry alone.
    Placeholders and the output carry neither ``nn_module_stack`` nor ``stack_trace``.
    Subgraph nodes keep what tracing gave them, in the same format.
    """
    root_entry = ("", _qualified_name(type(state.root)))
    changed = False
    for module in graph_modules(state.gm):
        top = module is state.gm
        for node in module.graph.nodes:
            if node.op in ("placeholder", "output"):
                for key in ("nn_module_stack", "stack_trace"):
                    if node.meta.pop(key, None) is not None:
                        changed = True
                continue
            stack = node.meta.get("nn_module_stack")
            new: dict[str, tuple[str, str]] = {}
            for key, (path, cls) in (stack or {}).items():
                if not key.startswith(ROOT_MODULE_KEY):
                    key = module_stack_key(key)
                new[key] = (path, _qualified_name(cls))
            if top and ROOT_MODULE_KEY not in new:
                new = {ROOT_MODULE_KEY: root_entry, **new}
            if new != stack or type(stack) is not dict:
                changed = True
            node.meta["nn_module_stack"] = new
    return changed
