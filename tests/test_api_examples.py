"""The API reference's examples run as written, and the main entry points document their
arguments, return value and errors (the reference renders these docstrings)."""

from __future__ import annotations

import doctest
import inspect

import pytest

import exporter
from exporter.inputs.containers import register_container

DOCUMENTED = {
    "export": exporter.export,
    "to_executorch": exporter.to_executorch,
    "report_submodules": exporter.report_submodules,
    "register_container": register_container,
}


def _run_examples(obj, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples may write files
    finder = doctest.DocTestFinder(recurse=False)
    (test,) = finder.find(obj, obj.__name__, globs={})
    assert test.examples, f"{obj.__name__} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, f"{obj.__name__}'s example failed (see the output above)"


@pytest.mark.parametrize("name", ["export", "report_submodules", "register_container"])
def test_the_functions_document_args_returns_raises_and_an_example(name):
    doc = inspect.getdoc(DOCUMENTED[name])
    for section in ("Args:", "Returns:", "Raises:", "Examples:"):
        assert f"\n{section}\n" in doc, f"{name} has no {section} section"
    for parameter in inspect.signature(DOCUMENTED[name]).parameters:
        assert f"\n    {parameter}: " in doc, f"{name} does not describe {parameter}"


def test_to_executorch_documents_args_returns_raises_and_an_example():
    doc = inspect.getdoc(exporter.to_executorch)
    for section in ("Args:", "Returns:", "Raises:", "Examples:"):
        assert f"\n{section}\n" in doc
    for parameter in inspect.signature(exporter.to_executorch).parameters:
        assert f"\n    {parameter}: " in doc


def test_error_info_documents_its_fields_and_has_an_example():
    doc = inspect.getdoc(exporter.ErrorInfo)
    assert "\nExamples:\n" in doc
    method = inspect.getdoc(exporter.ErrorInfo.from_exception)
    assert "\nArgs:\n" in method and "\nReturns:\n" in method


@pytest.mark.parametrize("name", ["export", "report_submodules", "register_container"])
def test_a_functions_example_runs(name, tmp_path, monkeypatch):
    _run_examples(DOCUMENTED[name], tmp_path, monkeypatch)


def test_error_infos_example_runs(tmp_path, monkeypatch):
    _run_examples(exporter.ErrorInfo, tmp_path, monkeypatch)


@pytest.mark.executorch
def test_to_executorchs_example_runs(tmp_path, monkeypatch):
    _run_examples(exporter.to_executorch, tmp_path, monkeypatch)
