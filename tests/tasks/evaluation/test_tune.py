"""``ctxrag tune``'s choice, on hand-built indexes whose rankings are known (fixed vector scores, no model)."""

from __future__ import annotations

import numpy as np
import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.evaluation.evalset import EvalFormat, EvalQuery, EvalSet
from ctxrag.tasks.evaluation.evaluate import chunk_refs
from ctxrag.tasks.evaluation.tune import (
    CANDIDATES,
    MINIMUM_QUESTIONS,
    decide,
    document_groups,
    fold_assignment,
    score_candidates,
    tune,
)
from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY, StrategyConfig
from tests.equipment.fixed_searcher import make_searcher


def word(i: int) -> str:
    return "word" + "".join("kbcdfghjmp"[int(digit)] for digit in str(i))  # word + letters: one token per row


def keyword_corpus(rows: int, documents: int) -> tuple[object, EvalSet]:
    """Row i holds a word no other row has, and the question asks for it; the vector side (fixed scores, the same for
    every query) prefers the last rows, so it misses nearly every answer that BM25 finds at rank 1. Rows belong to
    ``documents`` documents in turn."""
    texts = [f"{word(i)} common filler" for i in range(rows)]
    vector = np.linspace(0.0, 1.0, rows, dtype=np.float32)
    searcher = make_searcher(texts, vector, doc_ids=[f"doc{i % documents}" for i in range(rows)])
    questions = [EvalQuery(f"q{i}", word(i), (f"c{i}",)) for i in range(rows)]
    return searcher, EvalSet("keywords.json", EvalFormat.DOCS, questions)


def test_candidates_start_with_the_default_and_are_distinct() -> None:
    assert CANDIDATES[0] == StrategyConfig.from_str(DEFAULT_STRATEGY)
    assert len({config.label for config in CANDIDATES}) == len(CANDIDATES)


def test_tune_chooses_what_the_questions_reward_and_says_so() -> None:
    searcher, questions = keyword_corpus(40, 8)
    tuning = tune(searcher, questions, "mrr@1")
    scores = tuning.scores
    assert scores["bm25"] == 1.0 and scores["vector"] == pytest.approx(1 / 40)  # only the last row's question
    assert scores[DEFAULT_STRATEGY] < 1.0  # the vector side's weight 0.5 pulls other rows ahead
    assert tuning.choice is not None and scores[tuning.choice.label] == 1.0
    assert tuning.choice == next(
        config for config in CANDIDATES if scores[config.label] == 1.0
    )  # the first of the best
    assert (tuning.questions, tuning.documents, tuning.folds, tuning.cv) == (40, 8, 5, 1.0)
    assert tuning.default == scores[DEFAULT_STRATEGY] and tuning.cv > tuning.default
    assert tuning.choice.label in tuning.reason and "held out scores 1.0000 across 5 folds" in tuning.reason
    record = tuning.record("keywords.json", "v1")
    assert (
        record["strategy"] == tuning.choice.to_dict()
        and record["label"] == tuning.choice.label
        and record["version"] == "v1"
    )


def test_tune_keeps_the_default_when_nothing_beats_it() -> None:
    searcher, questions = keyword_corpus(40, 8)
    tuning = tune(searcher, questions, "hit@40")  # every strategy finds every answer in its top 40: all tie
    assert set(tuning.scores.values()) == {1.0}
    assert tuning.choice is None and tuning.reason.startswith("the default is the best on these questions")


def test_tune_keeps_the_default_with_too_few_questions() -> None:
    searcher, questions = keyword_corpus(MINIMUM_QUESTIONS - 1, 8)
    tuning = tune(searcher, questions, "mrr@1")
    assert tuning.choice is None and tuning.cv is None and tuning.folds == 0
    assert (
        tuning.reason
        == f"{MINIMUM_QUESTIONS - 1} questions are too few to choose on ({MINIMUM_QUESTIONS} or more needed): the default stays"
    )
    assert tuning.scores["bm25"] == 1.0  # the figures are still reported


def test_a_candidate_that_wins_on_one_documents_questions_only_is_not_kept() -> None:
    groups = [f"doc{i % 8}" for i in range(40)]
    values = np.full((len(CANDIDATES), 40), 0.1)
    lucky = len(CANDIDATES) - 1
    values[lucky] = [1.0 if group == "doc0" else 0.0 for group in groups]  # best on all questions: mean 0.125 > 0.1
    tuning = decide(values, groups, "mrr@10")
    assert tuning.scores[CANDIDATES[lucky].label] == 0.125 and tuning.default == pytest.approx(0.1)
    assert tuning.cv < tuning.default  # held out, it wins nowhere: doc0's fold gets the default, the others get 0
    assert tuning.choice is None and tuning.reason.startswith("tuning did not beat the default on held-out questions")
    values[1] = 0.3  # a candidate better on every document is kept, and every fold picks it
    tuning = decide(values, groups, "mrr@10")
    assert (
        tuning.choice == CANDIDATES[1]
        and tuning.cv == pytest.approx(0.3)
        and set(tuning.fold_picks) == {CANDIDATES[1].label}
    )


def test_folds_keep_a_documents_questions_together_and_are_fixed() -> None:
    groups = [f"doc{i % 7}" for i in range(50)]
    folds = fold_assignment(groups, 5)
    assert all(len({fold for fold, group in zip(folds, groups) if group == name}) == 1 for name in set(groups))
    assert sorted(set(folds.tolist())) == [0, 1, 2, 3, 4]
    assert np.array_equal(folds, fold_assignment(groups, 5))
    searcher, questions = keyword_corpus(12, 3)
    assert document_groups(searcher, questions, chunk_refs(searcher, questions)) == [f"doc{i % 3}" for i in range(12)]


def test_score_candidates_is_each_candidates_metric_per_question() -> None:
    searcher, questions = keyword_corpus(6, 2)
    values = score_candidates(searcher, questions, "mrr@3", chunk_refs(searcher, questions))
    assert values.shape == (len(CANDIDATES), 6)
    bm25 = [config.label for config in CANDIDATES].index("bm25")
    assert values[bm25].tolist() == [1.0] * 6


@pytest.mark.parametrize("metric", ["pass@10", "mrr", "mrr@0", "recall@x", "f1@3"])
def test_a_metric_the_set_does_not_have_is_refused_with_the_choices(metric: str) -> None:
    searcher, questions = keyword_corpus(6, 2)  # a docs set: precision, recall, mrr, hit, ndcg
    with pytest.raises(
        InvalidInput, match=r"cannot tune on metric .* choose one of: precision@K, recall@K, mrr@K, hit@K, ndcg@K"
    ):
        tune(searcher, questions, metric)
