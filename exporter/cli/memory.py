"""Memory, as the CLI weighs it: what the machine has available, what a process tree holds,
and sizes written the way people write them (``4G``)."""

from __future__ import annotations

import os
import re

from .._errors import InputSpecError

__all__ = ["available_memory", "format_size", "parse_size", "resident_memory"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_PAGE = os.sysconf("SC_PAGE_SIZE")


def parse_size(text: str, what: str = "--max-memory") -> int:
    """``"4G"`` -> bytes; K, M, G and T are powers of 1024, with or without a trailing (i)B."""
    match = _SIZE.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise InputSpecError(f"{what} {text!r} is not a size", hint=f"write {what} 4G (or 512M, 1.5G, 8GiB)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_size(size: float) -> str:
    """``1536 * 2**20`` -> ``"1.5 GiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def available_memory() -> int | None:
    """Bytes a new allocation can get: the system's MemAvailable, or less if this process's
    cgroup allows less; None where neither can be read (not Linux)."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            found += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit != "max":
            with open("/sys/fs/cgroup/memory.current") as f:
                found.append(max(int(limit) - int(f.read()), 0))
    except (OSError, ValueError):
        pass
    return min(found, default=None)


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as f:
                    todo += [int(child) for child in f.read().split()]
        except OSError:
            continue
    return found


def resident_memory(pid: int) -> int:
    """Bytes of RAM ``pid`` and its descendants hold (0 once it is gone). Pages shared between
    them, such as torch's libraries, count once per process, as the kernel's RSS counts them."""
    total = 0
    for process in _descendants(pid):
        try:
            with open(f"/proc/{process}/statm") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total
