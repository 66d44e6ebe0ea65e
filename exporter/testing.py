"""pytest helpers (``assert_exportable``); they live in the application layer, ``exporter.cli.testing``."""

from .cli.testing import assert_exportable

__all__ = ["assert_exportable"]
