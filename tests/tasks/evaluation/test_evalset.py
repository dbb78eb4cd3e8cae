"""Evaluation sets: format detection, parsing, defaults, and errors that name the file and the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxrag.tasks.common.models import CorpusError
from ctxrag.tasks.evaluation.evalset import EvalFormat, EvalQuery, EvalSet, golden_ref, load_evalset
from tests.helpers import SAMPLE_QUESTIONS


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def jsonl(*records: object) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


JSONL_RECORD = {
    "query": "How do retries work?",
    "answer": "Backoff.",
    "golden_chunk_uuids": [["tinyq/retry.py", 1], ["docs/guide.md", 3]],
}
DOCS_RECORD = {
    "id": "q1",
    "question": "How do I use tools?",
    "correct_chunks": [
        "https://docs.example.com/en/docs/tool-use#chunk_0",
        "https://docs.example.com/en/docs/tool-use#chunk_1",
    ],
    "correct_answer": "Define them.",
}


def test_golden_ref() -> None:
    assert golden_ref("tinyq/retry.py", 1) == "tinyq/retry.py#1"
    assert golden_ref("doc", 0) == "doc#0"


def test_default_ks() -> None:
    assert EvalFormat.PASS_AT_K.default_ks == [5, 10, 20]
    assert EvalFormat.DOCS.default_ks == [3]
    assert EvalFormat("jsonl") is EvalFormat.PASS_AT_K and EvalFormat("docs") is EvalFormat.DOCS


# --- JSONL -------------------------------------------------------------------------------------------------------


def test_jsonl_is_detected_and_parsed(tmp_path: Path) -> None:
    second = {"id": "custom", "query": "Where is data stored?", "golden_chunk_uuids": [["tinyq/storage.py", 0]]}
    path = write(tmp_path, "questions.jsonl", jsonl(JSONL_RECORD, second))
    evalset = load_evalset(path)
    assert isinstance(evalset, EvalSet)
    assert evalset.format is EvalFormat.PASS_AT_K
    assert evalset.path == str(path)
    assert evalset.queries == [
        EvalQuery("1", "How do retries work?", ("tinyq/retry.py#1", "docs/guide.md#3"), "Backoff."),
        EvalQuery("custom", "Where is data stored?", ("tinyq/storage.py#0",), ""),
    ]


def test_jsonl_blank_lines_are_skipped_and_ids_are_line_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, "q.jsonl", "\n" + json.dumps(JSONL_RECORD) + "\n   \n" + json.dumps(JSONL_RECORD) + "\n")
    assert [query.query_id for query in load_evalset(path).queries] == ["2", "4"]


def test_jsonl_golden_duplicates_are_removed_in_order(tmp_path: Path) -> None:
    record = {"query": "q", "golden_chunk_uuids": [["b", 2], ["a", 0], ["b", 2]]}
    [query] = load_evalset(write(tmp_path, "q.jsonl", jsonl(record))).queries
    assert query.golden == ("b#2", "a#0")


def test_jsonl_accepts_a_str_path(tmp_path: Path) -> None:
    path = write(tmp_path, "q.jsonl", jsonl(JSONL_RECORD))
    assert load_evalset(str(path)).format is EvalFormat.PASS_AT_K


def test_sample_questions_load() -> None:
    evalset = load_evalset(SAMPLE_QUESTIONS)
    assert evalset.format is EvalFormat.PASS_AT_K
    assert evalset.queries and all(query.golden for query in evalset.queries)
    assert all("#" in ref for query in evalset.queries for ref in query.golden)


def test_jsonl_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.jsonl", jsonl(JSONL_RECORD) + '{"query": "x", \n')
    with pytest.raises(CorpusError) as raised:
        load_evalset(path)
    message = str(raised.value)
    assert message.startswith("bad.jsonl: line 2: malformed JSON:")
    assert "(column" in message


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        ({"golden_chunk_uuids": [["a", 0]]}, "needs 'query' and 'golden_chunk_uuids'"),
        ({"query": "q"}, "needs 'query' and 'golden_chunk_uuids'"),
        (["query", "golden_chunk_uuids"], "needs 'query' and 'golden_chunk_uuids'"),
        ("just a string", "needs 'query' and 'golden_chunk_uuids'"),
        ({"query": "", "golden_chunk_uuids": [["a", 0]]}, "'query' must be a non-empty string"),
        ({"query": "   ", "golden_chunk_uuids": [["a", 0]]}, "'query' must be a non-empty string"),
        ({"query": 5, "golden_chunk_uuids": [["a", 0]]}, "'query' must be a non-empty string"),
    ],
)
def test_jsonl_missing_or_bad_fields(tmp_path: Path, record: object, fragment: str) -> None:
    path = write(tmp_path, "q.jsonl", jsonl(JSONL_RECORD, JSONL_RECORD, record))
    with pytest.raises(CorpusError) as raised:
        load_evalset(path)
    assert str(raised.value).startswith("q.jsonl: line 3: ")
    assert fragment in str(raised.value)


@pytest.mark.parametrize(
    "pairs",
    [
        [],
        "a#0",
        [["a"]],
        [["a", 0, 1]],
        [[0, "a"]],
        [["a", "0"]],
        [["a", 1.0]],
        [["a", True]],
        [("a", 0), ["a", None]],
        ["a", 0],
        [{"doc": "a", "index": 0}],
    ],
)
def test_jsonl_bad_golden_pairs(tmp_path: Path, pairs: object) -> None:
    path = write(tmp_path, "q.jsonl", jsonl({"query": "q", "golden_chunk_uuids": pairs}))
    with pytest.raises(CorpusError) as raised:
        load_evalset(path)
    assert str(raised.value) == (
        "q.jsonl: line 1: 'golden_chunk_uuids' must be a non-empty list of [doc uuid, chunk index] pairs"
    )


# --- docs JSON ---------------------------------------------------------------------------------------------------


def test_docs_is_detected_and_parsed(tmp_path: Path) -> None:
    second = {"question": "What is a token?", "correct_chunks": ["https://docs.example.com/en/docs/tokens#chunk_0"]}
    path = write(tmp_path, "eval.json", "  \n" + json.dumps([DOCS_RECORD, second], indent=2))
    evalset = load_evalset(path)
    assert evalset.format is EvalFormat.DOCS
    assert evalset.queries == [
        EvalQuery("q1", "How do I use tools?", tuple(DOCS_RECORD["correct_chunks"]), "Define them."),
        EvalQuery("1", "What is a token?", ("https://docs.example.com/en/docs/tokens#chunk_0",), ""),
    ]


def test_docs_detection_does_not_depend_on_the_file_extension(tmp_path: Path) -> None:
    assert load_evalset(write(tmp_path, "eval.jsonl", json.dumps([DOCS_RECORD]))).format is EvalFormat.DOCS
    assert load_evalset(write(tmp_path, "q.json", jsonl(JSONL_RECORD))).format is EvalFormat.PASS_AT_K


def test_docs_golden_duplicates_are_removed_in_order(tmp_path: Path) -> None:
    record = {"question": "q", "correct_chunks": ["b", "a", "b"]}
    [query] = load_evalset(write(tmp_path, "e.json", json.dumps([record]))).queries
    assert query.golden == ("b", "a")


def test_docs_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "eval.json", '[\n  {"question": "q",\n   "correct_chunks": ["a"]\n  ,\n]\n')
    with pytest.raises(CorpusError) as raised:
        load_evalset(path)
    message = str(raised.value)
    assert message.startswith("eval.json: malformed JSON:")
    assert "(line 5, column" in message


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        ({"correct_chunks": ["a"]}, "needs 'question' and 'correct_chunks'"),
        ({"question": "q"}, "needs 'question' and 'correct_chunks'"),
        ("q", "needs 'question' and 'correct_chunks'"),
        (None, "needs 'question' and 'correct_chunks'"),
        ({"question": "", "correct_chunks": ["a"]}, "'question' must be a non-empty string"),
        ({"question": ["q"], "correct_chunks": ["a"]}, "'question' must be a non-empty string"),
        ({"question": "q", "correct_chunks": "a"}, "'correct_chunks' must be a list of chunk links"),
        ({"question": "q", "correct_chunks": ["a", 3]}, "'correct_chunks' must be a list of chunk links"),
    ],
)
def test_docs_missing_or_bad_fields_name_the_record(tmp_path: Path, record: object, fragment: str) -> None:
    path = write(tmp_path, "eval.json", json.dumps([DOCS_RECORD | {"id": "a"}, DOCS_RECORD | {"id": "b"}, record]))
    with pytest.raises(CorpusError) as raised:
        load_evalset(path)
    assert str(raised.value).startswith("eval.json: record 2: ")
    assert fragment in str(raised.value)


def test_a_docs_question_without_correct_chunks_is_skipped_with_a_warning_naming_it(tmp_path: Path) -> None:
    empty = {"id": "q2", "question": "What is   a\nbatch?", "correct_chunks": []}
    path = write(tmp_path, "eval.json", json.dumps([DOCS_RECORD, empty, DOCS_RECORD | {"id": "q3"}]))
    evalset = load_evalset(path)
    assert [query.query_id for query in evalset.queries] == ["q1", "q3"]
    assert evalset.warnings == [
        "eval.json: record 1 (id 'q2', question 'What is a batch?'): 'correct_chunks' is empty; question skipped"
    ]
    assert load_evalset(write(tmp_path, "ok.json", json.dumps([DOCS_RECORD]))).warnings == []


def test_a_long_question_is_shortened_in_the_warning(tmp_path: Path) -> None:
    empty = {"question": "why " * 50, "correct_chunks": []}
    [warning] = load_evalset(write(tmp_path, "eval.json", json.dumps([DOCS_RECORD, empty]))).warnings
    assert (
        warning.startswith("eval.json: record 1 (id '1', question 'why why")
        and "...'): 'correct_chunks' is empty" in warning
    )


def test_docs_set_whose_every_question_lacks_correct_chunks_fails(tmp_path: Path) -> None:
    records = [{"question": "a", "correct_chunks": []}, {"question": "b", "correct_chunks": []}]
    with pytest.raises(CorpusError) as raised:
        load_evalset(write(tmp_path, "eval.json", json.dumps(records)))
    assert str(raised.value) == "eval.json: no evaluation queries (2 skipped: their 'correct_chunks' is empty)"


def test_a_skipped_question_still_takes_part_in_the_duplicate_id_check(tmp_path: Path) -> None:
    records = [DOCS_RECORD | {"correct_chunks": []}, DOCS_RECORD]
    with pytest.raises(CorpusError, match=r"eval.json: record 1: duplicate id 'q1'"):
        load_evalset(write(tmp_path, "eval.json", json.dumps(records)))


def test_docs_duplicate_ids(tmp_path: Path) -> None:
    path = write(tmp_path, "eval.json", json.dumps([DOCS_RECORD, DOCS_RECORD | {"question": "again?"}]))
    with pytest.raises(CorpusError) as raised:
        load_evalset(path)
    assert str(raised.value) == "eval.json: record 1: duplicate id 'q1'"


def test_docs_explicit_id_colliding_with_a_positional_id(tmp_path: Path) -> None:
    # record 1 has no id, so its id is its position "1", which record 0 already uses
    records = [{"id": 1, "question": "a", "correct_chunks": ["x"]}, {"question": "b", "correct_chunks": ["y"]}]
    with pytest.raises(CorpusError, match=r"eval.json: record 1: duplicate id '1'"):
        load_evalset(write(tmp_path, "eval.json", json.dumps(records)))


def test_docs_numeric_id_and_answer_become_strings(tmp_path: Path) -> None:
    record = {"id": 7, "question": "q", "correct_chunks": ["x"], "correct_answer": 42}
    [query] = load_evalset(write(tmp_path, "eval.json", json.dumps([record]))).queries
    assert (query.query_id, query.answer) == ("7", "42")


# --- file-level errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_jsonl_file(tmp_path: Path, content: str) -> None:
    with pytest.raises(CorpusError) as raised:
        load_evalset(write(tmp_path, "empty.jsonl", content))
    assert str(raised.value) == "empty.jsonl: no evaluation queries"


def test_empty_docs_list(tmp_path: Path) -> None:
    with pytest.raises(CorpusError) as raised:
        load_evalset(write(tmp_path, "empty.json", "[]"))
    assert str(raised.value) == "empty.json: no evaluation queries"


def test_non_utf8_file(tmp_path: Path) -> None:
    path = write(tmp_path, "latin.jsonl", b'{"query": "caf' + b"\xe9" + b'"}\n')
    with pytest.raises(CorpusError) as raised:
        load_evalset(path)
    assert str(raised.value) == f"{path}: not valid UTF-8 (byte offset 14): invalid continuation byte"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(CorpusError) as raised:
        load_evalset(path)
    assert str(raised.value).startswith(f"{path}: cannot read evaluation set:")


def test_a_folder_is_not_an_evaluation_set(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="cannot read evaluation set"):
        load_evalset(tmp_path)


def test_corpus_error_is_a_value_error() -> None:
    assert issubclass(CorpusError, ValueError)


@pytest.mark.parametrize(
    ("content", "expected"),
    [(jsonl(JSONL_RECORD), EvalFormat.PASS_AT_K), (json.dumps([DOCS_RECORD]), EvalFormat.DOCS)],
    ids=["jsonl", "docs"],
)
def test_utf8_bom_is_accepted(tmp_path: Path, content: str, expected: EvalFormat) -> None:
    path = write(tmp_path, "bom.json", b"\xef\xbb\xbf" + content.encode("utf-8"))
    evalset = load_evalset(path)
    assert evalset.format is expected
    assert len(evalset.queries) == 1
