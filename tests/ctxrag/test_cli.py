"""The ``ctxrag`` command as a user runs it: a real subprocess, against the session's Prefect test server.

A process of its own, so its stdout holds what the command printed and nothing else: a log line of Prefect's that
slipped onto stdout would show here, where in-process (CliRunner) Prefect's log handlers write elsewhere. Errors
raised before a flow starts are in test_cli_errors.py, in-process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxrag.storage.index_store import IndexStore
from tests.helpers import SAMPLE_CORPUS, SAMPLE_QUESTIONS

pytestmark = pytest.mark.usefixtures("prefect_harness")


def ctxrag(home: Path, *args: str, columns: int | None = 200) -> subprocess.CompletedProcess[str]:
    """The command with its output captured (not a terminal), ``COLUMNS`` set to ``columns`` (None: unset)."""
    from prefect.settings import PREFECT_API_URL

    env = {
        **os.environ,
        "CTXRAG_HOME": str(home),
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "COLUMNS": str(columns),
    }
    if columns is None:
        del env["COLUMNS"]
    for variable in ("CO_API_KEY", "COHERE_API_KEY", "ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        env.pop(variable, None)
    command = [sys.executable, "-c", "from ctxrag.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def indexing(
    tmp_path_factory: pytest.TempPathFactory, prefect_harness
) -> tuple[Path, subprocess.CompletedProcess[str]]:  # type: ignore[no-untyped-def]
    """The sample indexed as "sample" in a fresh home: (home, what the command printed)."""
    home = tmp_path_factory.mktemp("cli") / "home"
    result = ctxrag(home, "index", str(SAMPLE_CORPUS), "--name", "sample")
    assert result.returncode == 0, result.stderr
    assert "published" in result.stdout
    return home, result


@pytest.fixture(scope="module")
def home(indexing: tuple[Path, subprocess.CompletedProcess[str]]) -> Path:
    return indexing[0]


def test_an_index_run_logs_no_debug_lines(indexing: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """Prefect logs at INFO: no library's DEBUG line among them (bm25s set its own logger to DEBUG)."""
    stderr = indexing[1].stderr
    assert "| INFO" in stderr  # the run's logs are there
    assert [line for line in stderr.splitlines() if "| DEBUG" in line] == []


def test_piped_output_keeps_paths_and_table_rows_on_one_line(home: Path) -> None:
    """Captured output (a CI log, a file) with no COLUMNS: nothing is wrapped at rich's default 80 columns."""
    result = ctxrag(home, "evaluate", str(SAMPLE_QUESTIONS), "--name", "sample", columns=None)
    assert result.returncode == 0, result.stderr
    run_dir = next(line for line in result.stderr.splitlines() if line.startswith("per-query results: ")).split(
        ": ", 1
    )[1]
    assert len(run_dir) > 80 and Path(run_dir).is_dir()  # the whole path, on its line
    rows = [line for line in result.stdout.splitlines() if line.strip("│ ").startswith("hybrid-weighted")]
    assert len(rows) == 1 and len(re.findall(r"\d\.\d{3}", rows[0])) == 9, result.stdout  # pass, hit, ndcg at 5, 10, 20
    assert result.stdout.count("queries on index") == 1  # one table: not split per family to fit 80 columns


def test_evaluate_json_prints_exactly_one_json_object(home: Path) -> None:
    result = ctxrag(home, "evaluate", str(SAMPLE_QUESTIONS), "--name", "sample", "--k", "5,10", "--json")
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)  # the whole of stdout parses: no log line slipped in
    assert set(metrics) == {"vector", "bm25", "hybrid", "hybrid-weighted", "hybrid-doc", "hybrid-score"}
    assert set(metrics["hybrid"]) == {"pass@5", "pass@10", "hit@5", "hit@10", "ndcg@5", "ndcg@10"}


def test_evaluate_in_a_narrow_terminal_prints_a_table_per_metric_with_no_cut_cells(home: Path) -> None:
    wide = ctxrag(home, "evaluate", str(SAMPLE_QUESTIONS), "--name", "sample", "--k", "5,10")
    narrow = ctxrag(home, "evaluate", str(SAMPLE_QUESTIONS), "--name", "sample", "--k", "5,10", columns=60)
    assert wide.returncode == narrow.returncode == 0, narrow.stderr
    assert (
        wide.stdout.count("queries on index") == 1 and narrow.stdout.count("queries on index") == 3
    )  # pass, hit, ndcg
    assert "…" not in narrow.stdout and max(len(line) for line in narrow.stdout.splitlines()) <= 60
    for metric in ("pass@5", "pass@10", "hit@5", "ndcg@10", "hybrid-weighted"):
        assert metric in narrow.stdout and metric in wide.stdout


def test_search_json_says_which_retriever_found_each_chunk(home: Path) -> None:
    result = ctxrag(home, "search", "retry backoff delay", "--name", "sample", "-k", "3", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    hits = answer["hits"]
    assert answer["index"] == "sample" and answer["strategy"] == "hybrid-score" and answer["version"]
    assert [hit["rank"] for hit in hits] == [1, 2, 3]
    assert all(set(hit["found_by"]) <= {"vector", "bm25"} and hit["found_by"] for hit in hits)
    assert all(hit["chunk_id"].startswith(hit["source"]) and len(hit["location"]["lines"]) == 2 for hit in hits)
    assert {hit["language"] for hit in hits} <= {"python", "markdown", "text"} and "python" in {
        hit["language"] for hit in hits
    }


def test_search_filters_by_path_and_language_and_refuses_a_bad_value_in_one_line(home: Path) -> None:
    result = ctxrag(
        home, "search", "retry backoff delay", "--name", "sample", "-k", "3", "--language", "markdown", "--json"
    )
    assert result.returncode == 0, result.stderr
    assert [hit["language"] for hit in json.loads(result.stdout)["hits"]] == ["markdown"] * 3
    result = ctxrag(home, "search", "retry backoff delay", "--name", "sample", "--path", "tinyq/*.py", "--json")
    assert result.returncode == 0 and all(
        hit["source"].startswith("tinyq/") for hit in json.loads(result.stdout)["hits"]
    )
    for flags, says in (
        (["-k", "0"], "k must be from 1 to 100, got 0"),
        (["--language", "klingon"], "unknown language"),
    ):
        refused = ctxrag(home, "search", "retry", "--name", "sample", *flags)
        assert (
            refused.returncode == 2
            and refused.stderr.startswith(f"error: {says}")
            and len(refused.stderr.splitlines()) == 1
        )


def test_list_and_delete(home: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "home"
    shutil.copytree(home, scratch)
    listed = ctxrag(scratch, "list").stdout.splitlines()
    assert listed[0] == "name\tdocuments\tchunks\tcontextualizer\tstrategy\tcreated\tsource"
    assert listed[1].startswith("sample\t") and len(listed[1].split("\t")) == 7
    (entry,) = json.loads(ctxrag(scratch, "list", "--json").stdout)
    assert entry["name"] == "sample" and entry["chunks"] == int(listed[1].split("\t")[2])
    deleted = ctxrag(scratch, "delete", "sample")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "deleted index 'sample'"  # on stdout
    empty = ctxrag(scratch, "list")
    assert empty.stdout == "" and f"no indexes in {scratch.resolve()}" in empty.stderr
    assert json.loads(ctxrag(scratch, "list", "--json").stdout) == []
    missing = ctxrag(scratch, "search", "anything", "--name", "sample")
    assert missing.returncode == 2 and f"no index named 'sample' in {scratch.resolve()}" in missing.stderr
    assert "set CTXRAG_HOME to the folder that has it" in missing.stderr


def chunk_questions(home: Path, path: Path) -> Path:
    """A question per chunk of the sample index (its first words), in the cookbook's format: enough to tune on."""
    chunks = IndexStore(home).open("sample").chunks.to_pylist()
    lines = [
        {
            "query": " ".join(row["content"].split()[:10]),
            "golden_chunk_uuids": [[row["doc_id"], row["chunk_index"]]],
            "golden_doc_uuids": [row["doc_id"]],
        }
        for row in chunks
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_tune_saves_the_choice_list_shows_it_and_reset_forgets_it(home: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "home"
    shutil.copytree(home, scratch)
    questions = chunk_questions(scratch, tmp_path / "mine.jsonl")
    assert len(questions.read_text().splitlines()) >= 30
    printed = ctxrag(scratch, "tune", "sample", str(questions), "--json")
    assert printed.returncode == 0, printed.stderr
    record = json.loads(printed.stdout)
    assert record == IndexStore(scratch).tuning("sample") and record["metric"] == "pass@10" and record["folds"] == 5
    expected = record["label"] or "hybrid-score"
    assert f"\t{expected} ({'tuned' if record['label'] else 'default'})\t" in ctxrag(scratch, "list").stdout

    IndexStore(scratch).save_tuning("sample", {**record, "strategy": {"strategy": "hybrid", "rrf_k": 10}})
    assert "\thybrid(rrf_k=10) (tuned)\t" in ctxrag(scratch, "list").stdout
    tuned = ctxrag(scratch, "search", "retry backoff delay", "--name", "sample", "--json").stdout
    assert (
        tuned
        == ctxrag(
            scratch, "search", "retry backoff delay", "--name", "sample", "--strategy", "hybrid(rrf_k=10)", "--json"
        ).stdout
    )
    shown = ctxrag(
        scratch, "tune", "sample", str(SAMPLE_QUESTIONS)
    )  # 16 questions: the table, and why the default stays
    assert shown.returncode == 0 and "16 questions are too few to choose on (30 or more needed)" in shown.stdout
    assert ctxrag(scratch, "tune", "sample", "--reset").stdout.strip() == '{"forgot": true}'
    assert "\thybrid-score (default)\t" in ctxrag(scratch, "list").stdout


def test_paid_rows_without_a_key_are_left_out_of_the_json_with_a_note(home: Path) -> None:
    result = ctxrag(
        home,
        "evaluate",
        str(SAMPLE_QUESTIONS),
        "--name",
        "sample",
        "--strategy",
        "hybrid",
        "--rerank",
        "cohere",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    assert list(json.loads(result.stdout)) == ["hybrid"]
    assert "hybrid+rerank-cohere not computed: needs CO_API_KEY (left out of the JSON)" in result.stderr

    table = ctxrag(
        home, "evaluate", str(SAMPLE_QUESTIONS), "--name", "sample", "--strategy", "hybrid", "--rerank", "cohere"
    )
    assert "hybrid+rerank-cohere" in table.stdout and "needs CO_API_KEY" in table.stdout


def test_a_docs_question_without_correct_chunks_is_skipped_with_a_warning(home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "questions.json"
    questions.write_text(
        json.dumps(
            [
                {"question": "How long does a retry wait?", "correct_chunks": ["tinyq/retry.py#0"]},
                {"id": "q-empty", "question": "Which questions have no answer?", "correct_chunks": []},
            ]
        )
    )
    result = ctxrag(home, "evaluate", str(questions), "--name", "sample", "--strategy", "bm25", "--json")
    assert result.returncode == 0, result.stderr
    assert (
        "warning: questions.json: record 1 (id 'q-empty', question 'Which questions have no answer?'): "
        "'correct_chunks' is empty; question skipped"
    ) in result.stderr
    assert set(json.loads(result.stdout)) == {"bm25"}

    questions.write_text(json.dumps([{"question": "Which questions have no answer?", "correct_chunks": []}]))
    failed = ctxrag(home, "evaluate", str(questions), "--name", "sample")
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert "error: questions.json: no evaluation queries (1 skipped: their 'correct_chunks' is empty)" in failed.stderr


def test_an_evaluation_set_for_another_corpus_is_one_error_line_and_saves_no_run(home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "evaluation_set.jsonl"
    records = [
        {"query": "What is the purpose of the DiffExecutor struct?", "golden_chunk_uuids": [["5e4c01057a10", 0]]},
        {
            "query": "How does the scheduler pick a corpus entry?",
            "golden_chunk_uuids": [["9f2ab7c3d410", 2], ["5e4c01057a10", 0]],
        },
    ]
    questions.write_text("".join(json.dumps(record) + "\n" for record in records))
    runs = sorted((home / "runs").glob("*"))
    failed = ctxrag(home, "evaluate", str(questions), "--name", "sample")
    assert failed.returncode == 2 and "Traceback" not in failed.stderr and failed.stdout == "", failed.stderr
    assert [line for line in failed.stderr.splitlines() if line.startswith("error")] == [
        "error: index 'sample' holds none of the 2 questions' 2 golden chunks of evaluation_set.jsonl: "
        "is --name right, or is the evaluation set for another corpus?"
    ]
    assert sorted((home / "runs").glob("*")) == runs


def test_a_corrupt_index_fails_evaluate_and_index_with_one_line_naming_the_file(home: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "home"
    shutil.copytree(home, scratch)
    store = IndexStore(scratch)
    manifest = store.live_version("sample") / "manifest.json"
    manifest.write_text("{")
    evaluated = ctxrag(scratch, "evaluate", str(SAMPLE_QUESTIONS), "--name", "sample", "--strategy", "bm25")
    assert evaluated.returncode == 2 and "Traceback" not in evaluated.stderr, evaluated.stderr
    assert f"error: {manifest}: corrupt index manifest: invalid JSON" in evaluated.stderr

    pointer = scratch / "indexes" / "sample" / "live.json"
    pointer.write_text('{"version": ')
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.md").write_text("# Notes\n\nA retry waits twice as long as the one before.\n")
    indexed = ctxrag(scratch, "index", str(corpus), "--name", "sample")
    assert indexed.returncode == 2 and "Traceback" not in indexed.stderr, indexed.stderr
    assert f"error: {pointer}: corrupt live pointer: invalid JSON" in indexed.stderr
