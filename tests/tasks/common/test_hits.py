"""The answer's one JSON form: written and read back whole, and valid under the schema the doors publish."""

from __future__ import annotations

import json

import jsonschema

from ctxrag.tasks.common.hits import ANSWER_SCHEMA, Hit, Location, MatchedLine, SearchAnswer


def _answer() -> SearchAnswer:
    code = Hit(
        rank=1, chunk_id="tinyq/retry.py#1", doc_id="tinyq/retry.py", chunk_index=1, score=1.6180339887,
        content="class RetryPolicy:\n    ...", context="tinyq's retry policy", ranks={"bm25": 1, "vector": 2},
        location=Location(definitions=("RetryPolicy", "delay_for", "attempts"), lines=(17, 51), symbol="RetryPolicy"),
        matches=(MatchedLine(21, "    The delay before attempt", ((8, 13),)),), also=((1, 14), (54, 60)),
    )  # fmt: skip
    prose = Hit(
        rank=2, chunk_id="doc_1#0", doc_id="doc_1", chunk_index=0, score=0.5, content="text", context="",
        ranks={"vector": 1}, location=Location(heading="Install > From source"),
    )  # fmt: skip
    return SearchAnswer("sample", "0001-abc", "hybrid-score", [code, prose])


def test_an_answer_round_trips_through_json() -> None:
    answer = _answer()
    read = SearchAnswer.from_dict(json.loads(json.dumps(answer.to_dict())))
    assert read.index == "sample" and read.version == "0001-abc" and read.strategy == "hybrid-score"
    assert [hit.chunk_id for hit in read] == ["tinyq/retry.py#1", "doc_1#0"]
    assert read[0].location == answer[0].location and read[1].location == answer[1].location
    assert read[0].ranks == {"bm25": 1, "vector": 2} and read[0].score == round(answer[0].score, 6)
    assert read[0].matches == answer[0].matches and read[0].also == answer[0].also and read[1].matches == ()


def test_the_json_form_is_valid_under_the_published_schema() -> None:
    written = _answer().to_dict()
    jsonschema.validate(written, ANSWER_SCHEMA)
    first = written["hits"][0]
    assert first["source"] == "tinyq/retry.py" and first["language"] == "python"
    assert first["location"] == {
        "lines": [17, 51], "heading": "", "definitions": ["RetryPolicy", "delay_for", "attempts"], "symbol": "RetryPolicy",
    }  # fmt: skip
    assert first["place"] == "tinyq/retry.py:17-51 RetryPolicy"  # what a terminal or an editor opens
    assert written["hits"][1]["place"] == "doc_1 Install > From source"  # no lines known: the heading
    assert first["matches"] == [{"line": 21, "text": "    The delay before attempt", "spans": [[8, 13]]}]
    assert first["also"] == [[1, 14], [54, 60]]
    assert written["hits"][1]["language"] is None  # a JSON corpus's id names no file
    del first["content"]
    try:
        jsonschema.validate(written, ANSWER_SCHEMA)
        raise AssertionError("a hit without its content passed the schema")
    except jsonschema.ValidationError as error:
        assert "content" in error.message


def test_an_answer_reads_as_its_hits() -> None:
    answer = _answer()
    assert len(answer) == 2 and list(answer) == answer.hits and answer[1].rank == 2 and answer[:1] == answer.hits[:1]
    assert len(SearchAnswer("x", "v", "bm25", [])) == 0
