"""Run parity cases and print each one's outcome with both tools.

    python -m tests.parity.run                       # every case
    python -m tests.parity.run cases_a               # the cases of tests/parity/cases_a.py
    python -m tests.parity.run -k cond --details     # cases whose name contains 'cond', with problems
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
import warnings

from tests.parity import harness


def load(modules: list[str] | None = None) -> list[harness.ParityCase]:
    """Import the case modules (all ``tests/parity/cases_*.py`` by default) and return their cases."""
    import tests.parity as package

    names = modules or sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("cases_"))
    for name in names:
        importlib.import_module(f"tests.parity.{name}")
    return list(harness.CASES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="case modules (default: all cases_*.py)")
    parser.add_argument("-k", dest="match", default="", help="only cases whose name contains this")
    parser.add_argument("--details", action="store_true", help="print each problem")
    opts = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    cases = [c for c in load(opts.modules) if opts.match in c.name]
    results = []
    for parity_case in cases:
        start = time.perf_counter()
        result = harness.evaluate(parity_case)
        results.append(result)
        print(f"{result.verdict:9}  {parity_case.name:60}  oracle: {result.oracle.describe()[:60]:60}  "
              f"ours: {result.ours.describe()[:60]}  ({time.perf_counter() - start:.2f}s)", flush=True)
        if opts.details:
            for problem in result.problems:
                print(f"           - {problem[:600]}")
    print(harness.summary(results), harness.oracle_summary(results))
    return 0 if all(r.verdict != "differ" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
