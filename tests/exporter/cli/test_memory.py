"""Sizes as people write them, what the machine has available, what a process tree holds."""

from __future__ import annotations

import os

import pytest

from exporter import InputSpecError
from exporter.cli.memory import (
    available_memory,
    format_size,
    parse_size,
    resident_memory,
)


@pytest.mark.parametrize(
    "text, size",
    [("4G", 4 << 30), ("512M", 512 << 20), ("1.5g", 3 << 29), ("8GiB", 8 << 30), ("100k", 100 << 10), ("4096", 4096)],
)
def test_sizes_are_powers_of_1024(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1G", "0", "4X", "4 G B"])
def test_a_size_that_is_not_one_says_how_to_write_one(text):
    with pytest.raises(InputSpecError, match=r"is not a size") as raised:
        parse_size(text)
    assert "4G" in raised.value.hint


@pytest.mark.parametrize("size, text", [(512, "512 B"), (1536 << 20, "1.5 GiB"), (4 << 40, "4.0 TiB")])
def test_sizes_are_shown_in_binary_units(size, text):
    assert format_size(size) == text


def test_available_memory_is_some_of_the_machine():
    available = available_memory()
    assert available is not None and 0 < available <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_resident_memory_counts_a_process_and_its_children_and_nothing_once_gone(tmp_path):
    import subprocess
    import sys

    alone = resident_memory(os.getpid())
    assert alone > 10 << 20
    child = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(64 << 20); time.sleep(30)"])
    try:
        for _ in range(100):
            if resident_memory(os.getpid()) > alone + (60 << 20):
                break
            __import__("time").sleep(0.05)
        assert resident_memory(os.getpid()) > alone + (60 << 20), "the child's 64 MiB count"
    finally:
        child.kill()
        child.wait()
    assert resident_memory(child.pid) == 0
