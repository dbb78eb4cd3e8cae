"""The docs format: chunk_link / chunk_heading / text / optional summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxrag.tasks.common.models import CorpusError
from ctxrag.tasks.load import load_docs, load_source
from tests.helpers import SHARED_DATA

DATA = SHARED_DATA / "anthropic_docs"  # ../shared/data beside the repository


def entry(link: str, heading: str, text: str, summary: str | None = None) -> dict[str, Any]:
    record = {"chunk_link": link, "chunk_heading": heading, "text": text}
    if summary is not None:
        record["summary"] = summary
    return record


def write(tmp_path: Path, data: Any, name: str = "docs.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


USAGE = r"record 1 \(chunk_link 'https://ex.com/a#usage'\)"
RECORDS = [
    entry("https://ex.com/a#intro", "Intro", "Intro text.", "About a."),
    entry("https://ex.com/a#usage", "Usage", "Usage text."),
    entry("https://ex.com/b#top", "B top", "B text.", "About b."),
    entry("https://ex.com/b#more", "More", "More b."),
]


def test_happy_path_groups_pages_in_file_order(tmp_path: Path) -> None:
    path = write(tmp_path, RECORDS)
    corpus = load_source(path)
    assert corpus.warnings == []
    assert [(d.doc_id, d.title, d.kind, d.content) for d in corpus.documents] == [
        ("https://ex.com/a", "Intro", "docs", "Intro text.\n\nUsage text."),
        ("https://ex.com/b", "B top", "docs", "B text.\n\nMore b."),
    ]
    assert [(c.chunk_id, c.doc_id, c.chunk_index, c.heading, c.summary) for c in corpus.chunks] == [
        ("https://ex.com/a#intro", "https://ex.com/a", 0, "Intro", "About a."),
        ("https://ex.com/a#usage", "https://ex.com/a", 1, "Usage", ""),
        ("https://ex.com/b#top", "https://ex.com/b", 0, "B top", "About b."),
        ("https://ex.com/b#more", "https://ex.com/b", 1, "More", ""),
    ]
    shas = {d.doc_id: d.doc_sha for d in corpus.documents}
    assert all(c.doc_sha == shas[c.doc_id] for c in corpus.chunks)
    assert corpus.documents[0].source == str(path)


def test_link_without_fragment_is_its_own_document(tmp_path: Path) -> None:
    corpus = load_docs(write(tmp_path, [entry("https://ex.com/c", "C", "C text.")]))
    assert [(d.doc_id, c.chunk_id) for d, c in zip(corpus.documents, corpus.chunks)] == [
        ("https://ex.com/c", "https://ex.com/c")
    ]


def test_null_summary_is_empty(tmp_path: Path) -> None:
    corpus = load_source(write(tmp_path, [entry("https://ex.com/a#x", "X", "text") | {"summary": None}]))
    assert corpus.chunks[0].summary == ""


def test_empty_list_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no documents"):
        load_docs(write(tmp_path, []))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("text"), rf"docs\.json: {USAGE}: missing required field 'text'"),
        (lambda r: r.update(text=["a"]), rf"{USAGE}: 'text' must be a string, got list"),
        (lambda r: r.update(chunk_heading=3), r"'chunk_heading' must be a string, got int"),
        (lambda r: r.update(summary=1.5), r"'summary' must be a string, got float"),
        (lambda r: r.update(chunk_link=7), r"docs\.json: record 1: 'chunk_link' must be a string, got int"),
        (lambda r: r.update(chunk_link=""), r"'chunk_link' must be a non-empty string"),
    ],
)
def test_invalid_records_are_fatal(tmp_path: Path, mutate: Any, message: str) -> None:
    records = [dict(record) for record in RECORDS]
    mutate(records[1])
    with pytest.raises(CorpusError, match=message):
        load_source(write(tmp_path, records))


def test_record_that_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"docs\.json: record 2: must be an object, got int"):
        load_source(write(tmp_path, [*RECORDS[:2], 42]))


def test_duplicate_chunk_link_is_fatal(tmp_path: Path) -> None:
    records = [*RECORDS, entry("https://ex.com/a#usage", "Again", "dup")]
    message = r"record 4 \(chunk_link 'https://ex.com/a#usage'\): duplicate chunk_link \(also record 1\)"
    with pytest.raises(CorpusError, match=message):
        load_source(write(tmp_path, records))


def test_empty_text_is_warned_and_skipped(tmp_path: Path) -> None:
    blank, empty = entry("https://ex.com/a#blank", "Blank", " \n "), entry("https://ex.com/z#e", "E", "")
    records = [RECORDS[0], blank, RECORDS[1], empty]
    corpus = load_source(write(tmp_path, records))
    assert [d.doc_id for d in corpus.documents] == ["https://ex.com/a"]
    assert corpus.documents[0].content == "Intro text.\n\nUsage text."
    assert [(c.chunk_id, c.chunk_index) for c in corpus.chunks] == [
        ("https://ex.com/a#intro", 0),
        ("https://ex.com/a#usage", 1),
    ]
    assert len(corpus.warnings) == 2
    assert "record 1 (chunk_link 'https://ex.com/a#blank'): text is empty; skipped" in corpus.warnings[0]
    assert "record 3 (chunk_link 'https://ex.com/z#e'): text is empty; skipped" in corpus.warnings[1]


def test_malformed_docs_json(tmp_path: Path) -> None:
    path = tmp_path / "docs.json"
    path.write_text('[{"chunk_link": "x", "text": "y",}]', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"malformed JSON at line 1, column 34"):
        load_source(path)


@pytest.mark.parametrize("name", ["anthropic_docs.json", "anthropic_summary_indexed_docs.json"])
def test_real_docs_files(name: str) -> None:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not present (the cookbook's docs corpus, expected under SHARED_DATA = {SHARED_DATA})")
    corpus = load_source(path)
    assert len(corpus.chunks) == 232
    assert len(corpus.documents) == 45
    assert corpus.warnings == []
    assert {c.doc_id for c in corpus.chunks} == {d.doc_id for d in corpus.documents}
    assert all("#" not in d.doc_id for d in corpus.documents)
    if "summary" in name:
        assert all(c.summary.strip() for c in corpus.chunks)
    else:
        assert all(c.summary == "" for c in corpus.chunks)
