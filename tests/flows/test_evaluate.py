"""The evaluate flow on the sample corpus and its questions: metrics, saved run, chart, missing golden chunks."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pyarrow.parquet as pq
import pytest

from ctxrag.flows.evaluate import evaluate_index
from ctxrag.tasks.evaluation.evaluate import NoGoldenChunksInIndex
from ctxrag.tasks.options import EvaluateOptions
from tests.helpers import SAMPLE_QUESTIONS, SHARED_DATA, copy_home

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module")
def indexed_home(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Path:
    return copy_home(sample_index, tmp_path_factory.mktemp("evaluate") / "home")


def test_every_strategy_is_scored_at_the_default_cutoffs(indexed_home: Path) -> None:
    result = evaluate_index(evalset=str(SAMPLE_QUESTIONS), name="sample", home=str(indexed_home))
    metrics = result["metrics"]
    assert list(metrics) == ["vector", "bm25", "hybrid", "hybrid-weighted", "hybrid-doc", "hybrid-score"]
    for values in metrics.values():
        assert list(values) == [
            "pass@5",
            "pass@10",
            "pass@20",
            "hit@5",
            "hit@10",
            "hit@20",
            "ndcg@5",
            "ndcg@10",
            "ndcg@20",
        ]
        assert all(0.0 <= value <= 1.0 for value in values.values())
        assert values["pass@5"] <= values["pass@10"] <= values["pass@20"]
    # The sample's questions are answerable: the default strategy finds most golden chunks.
    assert metrics["hybrid"]["pass@10"] >= 0.7
    assert result["missing_golden"] == []


def test_the_run_is_saved_with_its_frozen_config(indexed_home: Path) -> None:
    result = evaluate_index(
        evalset=str(SAMPLE_QUESTIONS),
        name="sample",
        options=EvaluateOptions(k=[3], strategy=["bm25"]),
        home=str(indexed_home),
    )
    run_dir = Path(result["run_dir"])
    config = json.loads((run_dir / "config.json").read_text())
    assert config["ks"] == [3] and config["strategies"] == ["bm25"]
    assert config["index_manifest"]["config"]["embedder"]["model"] == "all-MiniLM-L6-v2"
    assert pq.read_table(run_dir / "metrics.parquet").to_pylist() == [{"strategy": "bm25", **result["metrics"]["bm25"]}]
    per_query = pq.read_table(run_dir / "per_query.parquet")
    assert per_query.num_rows == result["queries"]
    chart = ElementTree.parse(result["chart"]).getroot()  # well-formed SVG: a bar per (strategy, metric), each labelled
    bars = [
        rect.findtext("{http://www.w3.org/2000/svg}title") for rect in chart.iter("{http://www.w3.org/2000/svg}rect")
    ]
    assert chart.tag == "{http://www.w3.org/2000/svg}svg"
    assert {f"bm25 {name}: {value:.3f}" for name, value in result["metrics"]["bm25"].items()} <= set(bars)


def test_golden_chunks_missing_from_the_index_are_reported(indexed_home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        json.dumps({"query": "How are retries delayed?", "golden_chunk_uuids": [["tinyq/retry.py", 0], ["gone.py", 4]]})
        + "\n"
    )
    result = evaluate_index(
        evalset=str(questions),
        name="sample",
        options=EvaluateOptions(k=[20], strategy=["hybrid"]),
        home=str(indexed_home),
    )
    assert result["missing_golden"] == ["gone.py#4"]
    assert result["metrics"]["hybrid"]["pass@20"] <= 0.5  # the missing one counts as a miss


def another_corpus_evalset(tmp_path: Path) -> Path:
    """The cookbook codebase corpus's evaluation set (its first 20 questions), or, where shared/ is not beside the
    repository, questions in its form: golden chunks in documents named by content hashes, none of them in the sample."""
    path = tmp_path / "evaluation_set.jsonl"
    codebase = SHARED_DATA / "codebase" / "evaluation_set.jsonl"
    if codebase.is_file():
        path.write_text("".join(codebase.read_text().splitlines(keepends=True)[:20]))
    else:
        records = [
            {"query": f"What does function {i} do?", "golden_chunk_uuids": [[f"{i:064x}", 0], [f"{i:064x}", 1]]}
            for i in range(20)
        ]
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def metrics_artifacts(name: str) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        return len(
            client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[f"ctxrag-metrics-{name}"]))
            )
        )


def test_an_evaluation_set_for_another_corpus_is_an_error_and_saves_nothing(indexed_home: Path, tmp_path: Path) -> None:
    evalset = another_corpus_evalset(tmp_path)
    golden = {
        tuple(pair) for line in evalset.read_text().splitlines() for pair in json.loads(line)["golden_chunk_uuids"]
    }
    runs = sorted((indexed_home / "runs").glob("*"))
    artifacts = metrics_artifacts("sample")
    with pytest.raises(NoGoldenChunksInIndex) as raised:
        evaluate_index(evalset=str(evalset), name="sample", home=str(indexed_home))
    assert str(raised.value) == (
        f"index 'sample' holds none of the 20 questions' {len(golden)} golden chunks of evaluation_set.jsonl: "
        "is --name right, or is the evaluation set for another corpus?"
    )
    assert sorted((indexed_home / "runs").glob("*")) == runs  # no run folder
    assert metrics_artifacts("sample") == artifacts  # and no metrics artifact: the last good one stays the latest


def test_docs_format_gets_precision_recall_f1_mrr(indexed_home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "docs_questions.json"
    questions.write_text(
        json.dumps(
            [
                {
                    "id": "q1",
                    "question": "How are retries delayed?",
                    "correct_chunks": ["tinyq/retry.py#0"],
                    "correct_answer": "backoff",
                }
            ]
        )
    )
    result = evaluate_index(
        evalset=str(questions), name="sample", options=EvaluateOptions(strategy=["bm25"]), home=str(indexed_home)
    )
    assert list(result["metrics"]["bm25"]) == ["precision@3", "recall@3", "f1@3", "mrr@3", "hit@3", "ndcg@3"]
