"""The evaluation suite's logic on toy inputs: document-level metrics, the split by corpus, LOCO selection and the
cluster bootstrap."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import suite_select as select
import suite_sets as sets_

DOCS = np.array([0, 0, 1, 1, 2, 3])  # document of each of six rows


def test_document_rank_is_the_first_chunk_of_any_golden_document() -> None:
    ranking = [4, 1, 3, 0]  # documents 2, 0, 1, 0
    assert sets_.metric_value("doc-mrr@10", ranking, np.array([1]), DOCS) == pytest.approx(1 / 3)
    assert sets_.metric_value("doc-mrr@10", ranking, np.array([1, 0]), DOCS) == pytest.approx(1 / 2)
    assert sets_.metric_value("doc-hit@1", ranking, np.array([1, 0]), DOCS) == 0.0
    assert sets_.metric_value("doc-hit@3", ranking, np.array([3]), DOCS) == 0.0
    assert sets_.metric_value("doc-mrr@2", ranking, np.array([1]), DOCS) == 0.0


def test_chunk_metrics_count_rows() -> None:
    ranking = [4, 1, 3, 0]
    assert sets_.metric_value("mrr@10", ranking, np.array([3]), DOCS) == pytest.approx(1 / 3)
    assert sets_.metric_value("pass@2", ranking, np.array([1, 2]), DOCS) == 0.5
    assert sets_.metric_value("recall@10", ranking, np.array([]), DOCS) == 0.0


def test_corpus_splits_leave_sets_of_one_corpus_out_together() -> None:
    splits = select.corpus_splits(["rich", "code", "rich", "docs"])
    assert splits == [("rich", [1, 3], [0, 2]), ("code", [0, 2, 3], [1]), ("docs", [0, 1, 2], [3])]
    assert select.corpus_splits([]) == []


def test_pick_weighs_sets_equally_and_takes_the_first_on_ties() -> None:
    means = np.array([[0.9, 0.0], [0.4, 0.6], [0.6, 0.4]])  # configs x sets
    assert select.pick(means) == 1  # 0.45 < 0.5 = 0.5: the first of the tied
    assert select.pick(means, [0]) == 0
    assert select.pick(means, [1]) == 1


def test_loco_scores_each_corpus_with_a_choice_made_without_it() -> None:
    class Toy:
        def __init__(self, unit: str) -> None:
            self.unit = unit

    matrices = [np.array([[1.0, 1.0], [0.0, 0.0]]), np.array([[0.0], [1.0]]), np.array([[0.0, 0.0], [0.2, 0.2]])]
    held, chosen = select.loco([Toy("a"), Toy("b"), Toy("b")], matrices, ["bm25", "vector"])
    assert chosen == {"a": "vector", "b": "bm25"}  # with a out: b's two sets prefer vector; with b out: a's
    assert held[0].tolist() == [0.0, 0.0] and held[1].tolist() == [0.0]


def test_cluster_bootstrap_resamples_whole_documents() -> None:
    a, b = np.array([1.0, 1.0, 0.0, 0.0]), np.zeros(4)
    mean, low, high = select.cluster_bootstrap(a, b, np.array([7, 7, 9, 9]), resamples=2000)
    assert mean == 0.5
    assert {low, high} <= {0.0, 0.5, 1.0}  # two clusters of two: only whole clusters move
    assert low == 0.0 and high == 1.0
    same = select.cluster_bootstrap(a, a, np.array([1, 2, 3, 4]))
    assert same == (0.0, 0.0, 0.0)


def test_stratified_bootstrap_averages_sets() -> None:
    one = (np.ones(3), np.zeros(3), np.arange(3))
    other = (np.zeros(5), np.zeros(5), np.arange(5))
    assert select.stratified_bootstrap([one, other], resamples=500) == (0.5, 0.5, 0.5)


def toy_set(seed: int, level: str, questions: int = 12) -> sets_.SetData:
    rng = np.random.default_rng(seed)
    rows, depth = 60, 25
    doc_of_row = np.sort(rng.integers(0, 15, rows))
    arrays = {
        "brow": np.full((questions, depth), -1),
        "bscore": np.zeros((questions, depth)),
        "vrow": np.full((questions, depth), -1),
        "vscore": np.full((questions, depth), np.nan),
        "chunk_index": np.zeros(rows, int),
    }
    for i in range(questions):
        hits = rng.integers(3, depth + 1)
        arrays["brow"][i, :hits] = rng.permutation(rows)[:hits]
        arrays["bscore"][i, :hits] = np.sort(rng.random(hits))[::-1] * 10
        arrays["vrow"][i] = rng.permutation(rows)[:depth]
        arrays["vscore"][i] = np.sort(rng.random(depth))[::-1]
    golden = [
        rng.choice(rows, 2, replace=False) if level == "chunk" else np.unique(doc_of_row[rng.choice(rows, 1)])
        for _ in range(questions)
    ]
    texts = [f"how does parse_{i} handle it" for i in range(questions)]
    metrics = ["pass@10"] if level == "chunk" else ["doc-mrr@10"]
    defines = {row: frozenset({f"parse_{row % questions}"}) for row in range(0, rows, 3)}
    return sets_.SetData(
        "toy",
        "toy",
        "toy",
        level,
        metrics,
        "code",
        "toy",
        "",
        texts,
        golden,
        np.zeros(questions),
        doc_of_row,
        arrays=arrays,
        defines=defines,
    )


def test_the_suite_chooses_among_the_products_configurations_and_reports(tmp_path) -> None:
    import suite

    data = [toy_set(seed, level) for seed, level in ((1, "chunk"), (2, "document"), (4, "chunk"))]
    for d, unit in zip(data, ("a", "b", "b")):
        d.unit = unit
    (tmp_path / "suite").mkdir()
    result = suite.evaluate(data, tmp_path)
    grid = select.configs()
    assert result["configurations"] == len(grid) and result["chosen on every set"] in grid
    assert {row["default"]["chosen"] for row in result["sets"]} <= set(grid)
    meta = {
        "cpus": 2,
        "cpu": "toy",
        "python": "3",
        "date": "today",
        "skipped": [],
        "indexing": {},
        "seconds": {"sets": {}, "scores": 0.0, "selection": 0.0, "total": 0.0},
    }
    text = suite.render(result, meta)
    assert "| **mean over sets** |" in text and "## With `ctxrag tune`" in text
