"""The fast paths' tests run with every fast path on, also on a torch release where they
are not on by default: these tests are what proves them there."""

import pytest

from exporter.trace.fast import FAST_PATHS_ENV


@pytest.fixture(autouse=True)
def fast_paths_on(monkeypatch):
    monkeypatch.setenv(FAST_PATHS_ENV, "1")
