"""Constraints: the traced guards held against the declared dynamic shapes; the program's ranges."""

from .check import check_constraints
from .ranges import range_constraints

__all__ = ["check_constraints", "range_constraints"]
