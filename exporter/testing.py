"""pytest helpers (``assert_exportable``, ``assert_every_side``, ``sides_taken``); they live in
the application layer, ``exporter.cli.testing`` and ``exporter.cli.sides``."""

from .cli.sides import Sides, assert_every_side, sides_taken
from .cli.testing import assert_exportable

__all__ = ["Sides", "assert_every_side", "assert_exportable", "sides_taken"]
