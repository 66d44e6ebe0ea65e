"""exporter.export on tiny Hugging Face models (BERT, GPT-2, LLaMA) built from configs.

Models are built from config objects with random weights, so nothing is downloaded.
Attention implementations are explicit: BERT and LLaMA use "sdpa", GPT-2 uses "eager".
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers")

from . import harness  # noqa: E402
from .cases import CASES_BY_NAME, TRANSFORMER_CASES  # noqa: E402
from .test_corpus import assert_unlowered_ops, run_check  # noqa: E402

# {case name: reason with the observed difference}; see test_corpus.KNOWN_OP_DIFFERENCES.
KNOWN_OP_DIFFERENCES: dict[str, str] = {}

cases = pytest.mark.parametrize("case", TRANSFORMER_CASES, ids=lambda c: c.name)


@cases
@pytest.mark.parametrize("check", list(harness.CHECKS))
def test_transformers(case, check):
    run_check(check, case)


@cases
def test_transformers_unlowered_ops_match_oracle(case):
    assert_unlowered_ops(case, KNOWN_OP_DIFFERENCES)


def test_known_differences_name_cases():
    assert set(KNOWN_OP_DIFFERENCES) <= set(CASES_BY_NAME)
