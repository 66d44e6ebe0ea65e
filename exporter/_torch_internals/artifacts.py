"""AOTInductor packages: compile a finished program, load it back.

Imported when called: ``torch._inductor`` is heavy, and neither importing exporter nor
exporting a program may load it.  Both take a finished ExportedProgram; neither traces."""

from __future__ import annotations

from typing import Any

__all__ = [
    "aoti_compile_package",
    "aoti_load_package",
]


def aoti_compile_package(program: Any, package_path: str) -> str:
    """Compile ``program`` with AOTInductor into the package ``package_path`` (a ``.pt2``)."""
    from torch._inductor import aoti_compile_and_package

    return aoti_compile_and_package(program, package_path=package_path)


def aoti_load_package(package_path: str) -> Any:
    """The compiled model in an AOTInductor package: called like the program's module."""
    from torch._inductor import aoti_load_package as load

    return load(package_path)
