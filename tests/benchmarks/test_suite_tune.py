"""What the suite reports for ``ctxrag tune`` on a set: the product's decision over the suite's rankings."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import suite_select

from ctxrag.tasks.evaluation.tune import MINIMUM_QUESTIONS
from tests.benchmarks.test_suite import toy_set


def bm25_answers(questions: int) -> object:
    """A chunk-level toy set whose golden chunk is BM25's first hit, scored by mrr@10, one document per question."""
    data = toy_set(3, "chunk", questions)
    data.metrics = ["mrr@10"]
    data.golden = [np.array(data.rank(i, "bm25")[:1]) for i in range(questions)]
    data.clusters = np.arange(questions)
    return data


def test_tune_keeps_a_candidate_that_finds_every_answer_first() -> None:
    outcome = suite_select.tuned(bm25_answers(40))
    assert outcome["default"] < 1.0  # the vector side moves some answers down
    assert outcome["kept"] is not None and outcome["cv"] == 1.0 and outcome["expected"] == 1.0
    assert len(outcome["fold picks"]) == 5


def test_too_few_questions_keep_the_default_and_expect_its_figure() -> None:
    outcome = suite_select.tuned(bm25_answers(MINIMUM_QUESTIONS - 1))
    assert outcome["kept"] is None and outcome["cv"] is None and outcome["expected"] == outcome["default"] < 1.0
    assert "too few" in outcome["reason"]
