"""A run folder read back as a DataFrame, and two of its strategies compared with the paired bootstrap."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxrag.tasks.evaluation.evalset import EvalFormat, EvalQuery, EvalSet
from ctxrag.tasks.evaluation.evaluate import evaluate
from ctxrag.tasks.evaluation.report import write_run
from ctxrag.tasks.evaluation.results import compare, disagreements, load_run
from ctxrag.tasks.evaluation.significance import paired_bootstrap
from ctxrag.tasks.retrieval.search import Strategy
from tests.equipment.fixed_searcher import FakeSearcher

IDEAL_2 = 1 + 1 / math.log2(3)


# rows 0..5: a#0 a#1 b#0 b#1 c#0 c#1
CHUNKS = pa.table(
    {
        "chunk_id": [f"id{i}" for i in range(6)],
        "doc_id": list("aabbcc"),
        "chunk_index": pa.array([0, 1] * 3, pa.int64()),
    }
)
QUERIES = [
    EvalQuery("1", "first", ("a#1", "b#0")),
    EvalQuery("2", "second", ("c#1", "zz#9")),
    EvalQuery("3", "third", ("a#0",)),
]
RANKINGS = {
    (Strategy.VECTOR, "first"): [1, 3, 2],  # a#1 at 1, b#0 at 3
    (Strategy.VECTOR, "second"): [0, 5],  # c#1 at 2
    (Strategy.VECTOR, "third"): [0],  # a#0 at 1
    (Strategy.BM25, "first"): [],
    (Strategy.BM25, "second"): [5],  # c#1 at 1
    (Strategy.BM25, "third"): [4, 3, 2],  # nothing
}


def save(run_dir: Path, evalset: EvalSet, ks: list[int]) -> dict[str, dict[str, float]]:
    result = evaluate(FakeSearcher(CHUNKS, RANKINGS), evalset, [Strategy.VECTOR, Strategy.BM25], ks)  # type: ignore[arg-type]
    config = {
        "index": "t",
        "evalset": evalset.path,
        "format": evalset.format.value,
        "ks": ks,
        "strategies": ["vector", "bm25"],
    }
    write_run(run_dir, config, result.metrics, result.per_query)
    return result.metrics


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    save(tmp_path / "run", EvalSet("q.jsonl", EvalFormat.PASS_AT_K, QUERIES), [1, 3])
    return tmp_path / "run"


def test_load_run_columns_and_rows(run_dir: Path) -> None:
    frame = load_run(run_dir)
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == [
        "query_id",
        "query",
        "golden",
        "strategy",
        "retrieved",
        "golden_ranks",
        "pass@1",
        "pass@3",
        "hit@1",
        "hit@3",
        "ndcg@1",
        "ndcg@3",
    ]
    assert list(frame["strategy"]) == ["vector"] * 3 + ["bm25"] * 3
    assert list(frame["query_id"]) == ["1", "2", "3"] * 2
    assert frame["golden"].tolist() == [["a#1", "b#0"], ["c#1", "zz#9"], ["a#0"]] * 2
    assert frame["retrieved"].tolist() == [
        ["a#1", "b#1", "b#0"],
        ["a#0", "c#1"],
        ["a#0"],
        [],
        ["c#1"],
        ["c#0", "b#1", "b#0"],
    ]
    assert frame["golden_ranks"].tolist() == [[1, 3], [2], [1], [], [1], []]
    assert frame.attrs["config"]["ks"] == [1, 3]


def test_load_run_per_query_metrics_by_hand(run_dir: Path) -> None:
    frame = load_run(run_dir).set_index(["strategy", "query_id"])
    assert frame.loc[("vector", "1"), ["pass@1", "pass@3", "hit@1", "hit@3", "ndcg@1"]].tolist() == [
        0.5,
        1.0,
        1.0,
        1.0,
        1.0,
    ]
    assert frame.loc[("vector", "1"), "ndcg@3"] == pytest.approx(1.5 / IDEAL_2)  # ranks 1 and 3
    assert frame.loc[("vector", "2"), "ndcg@3"] == pytest.approx(1 / math.log2(3) / IDEAL_2)  # rank 2 of 2 golden
    assert frame.loc[("bm25", "2"), ["pass@3", "hit@3", "ndcg@1"]].tolist() == [0.5, 1.0, 1.0]
    assert frame.loc[("bm25", "3"), ["pass@3", "hit@3", "ndcg@3"]].tolist() == [0.0, 0.0, 0.0]


def test_per_query_means_equal_the_saved_metrics(tmp_path: Path) -> None:
    metrics = save(tmp_path / "run", EvalSet("q.jsonl", EvalFormat.PASS_AT_K, QUERIES), [1, 3])
    frame = load_run(tmp_path / "run")
    for strategy, values in metrics.items():
        means = frame[frame["strategy"] == strategy].mean(numeric_only=True)
        assert {name: means[name] for name in values} == pytest.approx(values)


def test_load_run_docs_format(tmp_path: Path) -> None:
    chunks_as_links = EvalSet("e.json", EvalFormat.DOCS, [EvalQuery("q1", "first", ("id1", "id2"))])
    save(tmp_path / "run", chunks_as_links, [2])
    frame = load_run(tmp_path / "run")
    assert list(frame.columns)[6:] == ["precision@2", "recall@2", "mrr@2", "hit@2", "ndcg@2"]
    vector = frame[frame["strategy"] == "vector"].iloc[0]
    assert vector["retrieved"] == ["id1", "id3"] and vector["golden_ranks"] == [1]
    assert vector["ndcg@2"] == pytest.approx(1 / IDEAL_2)


def test_a_run_saved_before_golden_and_new_metrics_were_stored(tmp_path: Path) -> None:
    evalset = tmp_path / "q.jsonl"
    evalset.write_text(
        "".join(
            json.dumps(
                {
                    "id": q.query_id,
                    "query": q.query,
                    "golden_chunk_uuids": [[ref.split("#")[0], int(ref.split("#")[1])] for ref in q.golden],
                }
            )
            + "\n"
            for q in QUERIES
        )
    )
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"evalset": str(evalset), "format": "jsonl", "ks": [3]}))
    old_rows = [
        {"strategy": "vector", "query_id": "1", "query": "first", "pass@3": 1.0, "retrieved": ["a#1", "b#1", "b#0"]},
        {"strategy": "vector", "query_id": "2", "query": "second", "pass@3": 0.5, "retrieved": ["a#0", "c#1"]},
        {"strategy": "vector", "query_id": "3", "query": "third", "pass@3": 1.0, "retrieved": ["a#0"]},
    ]
    pq.write_table(pa.Table.from_pylist(old_rows), run_dir / "per_query.parquet")
    frame = load_run(run_dir)
    assert frame["golden"].tolist() == [["a#1", "b#0"], ["c#1", "zz#9"], ["a#0"]]
    assert frame["golden_ranks"].tolist() == [[1, 3], [2], [1]]
    assert frame["hit@3"].tolist() == [1.0, 1.0, 1.0]
    assert frame["ndcg@3"].tolist() == pytest.approx([1.5 / IDEAL_2, 1 / math.log2(3) / IDEAL_2, 1.0])

    evalset.write_text(json.dumps({"query": "something else", "golden_chunk_uuids": [["a", 0]]}) + "\n")
    with pytest.raises(ValueError, match="no longer matches"):
        load_run(run_dir)


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="per_query.parquet"):
        load_run(tmp_path)


def test_compare_is_the_paired_bootstrap_of_the_two_strategies(run_dir: Path) -> None:
    # pass@3 per query: vector 1, 1/2, 1; bm25 0, 1/2, 0 -> differences 1, 0, 1, mean 2/3
    result = compare(run_dir, "vector", "bm25", "pass@3")
    assert result.mean_difference == pytest.approx(2 / 3)
    assert result == paired_bootstrap([1.0, 0.5, 1.0], [0.0, 0.5, 0.0])
    assert compare(run_dir, "vector", "bm25", "pass@3", seed=5, resamples=500) == paired_bootstrap(
        [1.0, 0.5, 1.0], [0.0, 0.5, 0.0], seed=5, resamples=500
    )
    assert compare(run_dir, "vector", "vector", "ndcg@3").high == 0.0


def test_compare_refuses_unknown_names(run_dir: Path) -> None:
    with pytest.raises(ValueError, match="'hybrid' is not in"):
        compare(run_dir, "vector", "hybrid", "pass@3")
    with pytest.raises(ValueError, match="'pass@10' is not a per-query metric"):
        compare(run_dir, "vector", "bm25", "pass@10")
    with pytest.raises(ValueError, match="F1 is computed from the mean"):
        compare(run_dir, "vector", "bm25", "f1@3")


def test_disagreements_split_the_queries_by_which_strategy_finds_them() -> None:
    # hit@5 per query (q1..q5): bm25 1 1 0 0 1, vector 0 1 1 0 0, fused 1 1 0 1 0
    values = {"bm25": [1, 1, 0, 0, 1], "vector": [0, 1, 1, 0, 0], "fused": [1, 1, 0, 1, 0]}
    frame = pd.DataFrame(
        [
            {"query_id": f"q{i}", "strategy": name, "hit@5": float(value)}
            for name, row in values.items()
            for i, value in enumerate(row)
        ]
    )
    table = disagreements(frame, "bm25", "vector", "hit@5", ["fused"])
    assert list(table.index) == ["only bm25", "only vector", "both", "neither"]
    assert table["queries"].tolist() == [2, 1, 1, 1]
    assert table["fused"].tolist() == [0.5, 0.0, 1.0, 1.0]
    assert table.loc["only bm25", ["bm25", "vector"]].tolist() == [1.0, 0.0]


def test_disagreements_count_a_query_as_found_only_when_the_metric_is_1(run_dir: Path) -> None:
    # pass@3: vector 1, 1/2, 1; bm25 0, 1/2, 0 (query 2 has a golden chunk nobody retrieves)
    table = disagreements(load_run(run_dir), "vector", "bm25", "pass@3")
    assert table["queries"].tolist() == [2, 0, 0, 1]
    assert table.loc["neither", ["vector", "bm25"]].tolist() == [0.5, 0.5]
    assert math.isnan(table.loc["both", "vector"])
    with pytest.raises(ValueError, match="'hybrid' is not in the run"):
        disagreements(load_run(run_dir), "vector", "bm25", "pass@3", ["hybrid"])
