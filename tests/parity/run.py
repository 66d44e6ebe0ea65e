"""Run parity cases and print each one's outcome with both tools.

    python -m tests.parity.run                       # every case
    python -m tests.parity.run cases_a               # the cases of tests/parity/cases_a.py
    python -m tests.parity.run -k cond --details     # cases whose name contains 'cond', with problems
    python -m tests.parity.run --ir training         # exporter's training IR against torch.export.export
    python -m tests.parity.run --ir both --results   # both IRs, written to docs/results/parity-torch-X.Y

``--results`` writes what ran through ``benchmarks/results.py``: ``parity-torch-2.13.md`` and
``.json`` with both IRs (``parity-inference-...`` or ``parity-training-...`` with one,
``-subset`` for some cases only), stamped with the command, commit, torch release and
machine.  The page counts each IR's verdicts, names the known differences (the cases
``test_parity.py`` lists as knowingly differing, with its reasons) and any other
difference, and gives every case's verdict; ``render(data)`` rewrites it from the JSON.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.parity import harness

ROOT = Path(__file__).resolve().parents[2]
IRS = ("inference", "training")
VERDICTS = {"match": "match", "differ": "differs", "ours only": "only exporter exports", "both fail": "both refuse"}
"""The harness's verdicts as the results page says them; a known difference is said apart."""


def load(modules: list[str] | None = None) -> list[harness.ParityCase]:
    """Import the case modules (all ``tests/parity/cases_*.py`` by default) and return their cases."""
    import tests.parity as package

    names = modules or sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("cases_"))
    for name in names:
        importlib.import_module(f"tests.parity.{name}")
    return list(harness.CASES)


def known_differences(ir: str) -> dict[str, str]:
    """The cases ``test_parity.py`` lists as knowingly differing from torch.export in ``ir``,
    each with its reason."""
    from tests.parity import test_parity

    table = test_parity.KNOWN_TRAINING_DIFFERENCES if ir == "training" else test_parity.KNOWN_DIFFERENCES
    return {name: _reason(entry) for name, entry in table.items()}


def _reason(entry: Any) -> str:
    """A listed case's reason: the entry itself, or each recorded difference's reason once."""
    if isinstance(entry, str):
        return entry
    return "; ".join(dict.fromkeys(getattr(difference, "reason", str(difference)) for difference in entry))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="case modules (default: all cases_*.py)")
    parser.add_argument("-k", dest="match", default="", help="only cases whose name contains this")
    parser.add_argument("--details", action="store_true", help="print each problem")
    parser.add_argument("--ir", choices=(*IRS, "both"), default="inference",
                        help="the IR exported: inference (against run_decompositions({})), training "
                             "(against torch.export.export itself), or both")
    parser.add_argument("--results", action="store_true",
                        help="write the outcomes as a stamped results file (docs/results/parity-torch-X.Y)")
    parser.add_argument("--results-dir", type=Path, metavar="DIR", help="where --results writes (default docs/results)")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="--results from a tree with uncommitted changes (the stamp says -dirty)")
    opts = parser.parse_args(argv)
    stamped = _results_module() if opts.results else None
    if stamped is not None:
        try:
            stamped.check_clean(opts.allow_dirty)
        except stamped.DirtyTree as e:
            parser.exit(2, f"error: {e}\n")
    warnings.filterwarnings("ignore")
    cases = [c for c in load(opts.modules) if opts.match in c.name]
    irs = IRS if opts.ir == "both" else (opts.ir,)
    runs: dict[str, list[tuple[harness.Result, float]]] = {}
    for ir in irs:
        if len(irs) > 1:
            print(f"== {ir} IR ==", flush=True)
        runs[ir] = []
        for parity_case in cases:
            start = time.perf_counter()
            result = harness.evaluate(parity_case, ir=ir)
            seconds = time.perf_counter() - start
            runs[ir].append((result, seconds))
            print(f"{result.verdict:9}  {parity_case.name:60}  oracle: {result.oracle.describe()[:60]:60}  "
                  f"ours: {result.ours.describe()[:60]}  ({seconds:.2f}s)", flush=True)
            if opts.details:
                for problem in result.problems:
                    print(f"           - {str(problem)[:600]}")
        results = [result for result, _ in runs[ir]]
        print(harness.summary(results), harness.oracle_summary(results))
    if stamped is not None:
        data = results_data(runs, subset=bool(opts.modules or opts.match))
        name = "-".join(["parity", *(["subset"] if data["subset"] else []), *([] if len(irs) > 1 else irs),
                         stamped.release_suffix()])
        title = f"Parity with torch.export{' (some cases)' if data['subset'] else ''}, torch {stamped.torch_release()}"
        try:
            md_path, json_path = stamped.write(name, markdown=render(data)[0], data=data, title=title,
                                               argv=["-m", "tests.parity.run", *(sys.argv[1:] if argv is None else argv)],
                                               results_dir=opts.results_dir, allow_dirty=opts.allow_dirty)
        except stamped.DirtyTree as e:
            parser.exit(2, f"error: {e}\n")
        print(f"results: {md_path.relative_to(ROOT) if md_path.is_relative_to(ROOT) else md_path}, {json_path.name}")
    return 0 if all(r.verdict != "differ" for run in runs.values() for r, _ in run) else 1


def _results_module() -> ModuleType:
    """``benchmarks/results.py``, which stamps and writes results files (a script beside the
    benchmarks, not a package)."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    return importlib.import_module("results")


# ------------------------------------------------------------------------- results file


def results_data(runs: dict[str, list[tuple[harness.Result, float]]], subset: bool = False) -> dict[str, Any]:
    """What a results file keeps of a run: per IR the counts, the known differences, and every
    case's verdict, both tools' outcomes, the problems found and the seconds it took."""
    known = {ir: known_differences(ir) for ir in runs}
    summary, cases = {}, {}
    for ir, run in runs.items():
        verdicts = [result.verdict for result, _ in run]
        listed = [result.name for result, _ in run if result.verdict == "differ" and result.name in known[ir]]
        summary[ir] = {
            "cases": len(run),
            "oracle_ok": sum(result.oracle.ok for result, _ in run),
            "match": verdicts.count("match"),
            "known_differences": len(listed),
            "other_differences": verdicts.count("differ") - len(listed),
            "ours_only": verdicts.count("ours only"),
            "both_fail": verdicts.count("both fail"),
            "seconds": sum(seconds for _, seconds in run),
        }
        for result, seconds in run:
            cases.setdefault(result.name, {"name": result.name})[ir] = {
                "verdict": result.verdict,
                "oracle": result.oracle.describe(),
                "exporter": result.ours.describe(),
                "problems": [str(problem)[:1000] for problem in result.problems],
                "seconds": seconds,
            }
    return {
        "irs": list(runs),
        "subset": subset,
        "summary": summary,
        "known_differences": {ir: {name: reason for name, reason in known[ir].items() if name in cases}
                              for ir in runs},
        "cases": list(cases.values()),
    }


def _said(case: dict[str, Any], ir: str, known: dict[str, str]) -> str:
    verdict = case[ir]["verdict"]
    return "known difference" if verdict == "differ" and case["name"] in known else VERDICTS.get(verdict, verdict)


def render(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The results page's body from its data: the counts per IR, then for each IR its known
    and other differences, then every case's verdict."""
    columns = (("cases", "cases"), ("oracle_ok", "torch.export exports"), ("match", "exporter matches"),
               ("known_differences", "known differences"), ("other_differences", "other differences"),
               ("ours_only", "only exporter exports"), ("both_fail", "both refuse"))
    irs, literal = data["irs"], _results_module().literal
    out = [
        "Each case is a model from torch's own export tests, exported by both tools; for the training",
        "IR, exporter's `ir=\"training\"` is held to `torch.export.export` itself, for the inference IR",
        "to `torch.export.export(...).run_decompositions({})`. Where torch.export exports, exporter must",
        "too, with the same signature, range constraints and placeholder and output values, and a",
        "program that matches eager on every input; where torch.export refuses, exporter must refuse",
        "with an `ExportError` or give a program that matches eager. A known difference is a case",
        "`tests/parity/test_parity.py` lists, with the reason exporter differs there.", "",
        "| IR | " + " | ".join(title for _, title in columns) + " | seconds |",
        "|---|" + "---:|" * (len(columns) + 1),
    ]
    out += [f"| {ir} | " + " | ".join(str(data["summary"][ir][key]) for key, _ in columns)
            + f" | {data['summary'][ir]['seconds']:.0f} |" for ir in irs]
    for ir in irs:
        known = data["known_differences"].get(ir, {})
        out += ["", f"## {ir} IR", ""]
        listed = [c for c in data["cases"] if ir in c and c[ir]["verdict"] == "differ" and c["name"] in known]
        others = [c for c in data["cases"] if ir in c and c[ir]["verdict"] == "differ" and c["name"] not in known]
        out += [f"Known differences: {len(listed) or 'none'}.", ""]
        out += [f"- `{c['name']}`: {literal(known[c['name']])}" for c in listed] + ([""] if listed else [])
        out += [f"Other differences: {len(others) or 'none'}."]
        out += [""] + [f"- `{c['name']}`: {literal('; '.join(c[ir]['problems'])[:600])}" for c in others] if others else []
    known = {ir: data["known_differences"].get(ir, {}) for ir in irs}
    every = [[c["name"], *[_said(c, ir, known[ir]) if ir in c else "" for ir in irs]] for c in data["cases"]]
    out += ["", "## Every case", "", "<details><summary>every case</summary>", "",
            _results_module().html_table(["case", *[f"{ir} IR" for ir in irs]], every, left=1 + len(irs)),
            "", "</details>"]
    return "\n".join(out) + "\n", data


if __name__ == "__main__":
    sys.exit(main())
