"""The benchmarks/ scripts as modules for the tests (they are scripts, not a package)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported once, with benchmarks/ on the path for its own imports."""
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(BENCHMARKS / f"{name}.py"):
        return sys.modules[name]
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
