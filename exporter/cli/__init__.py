"""The application: the command line, model loading, the input shorthand, reports and their
rendering, ``check`` with baselines and JUnit, and the pytest helper.

Built on the library (``exporter.export``); nothing in the library imports this package,
and ``rich`` is imported only here.
"""

from .main import main

__all__ = ["main"]
