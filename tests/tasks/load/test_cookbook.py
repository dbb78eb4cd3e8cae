"""The cookbook's pre-chunked JSON format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxrag.tasks.common.models import CorpusError
from ctxrag.tasks.load import load_cookbook, load_source
from tests.helpers import SHARED_DATA

CODEBASE = SHARED_DATA / "codebase" / "codebase_chunks.json"  # ../shared/data beside the repository


def doc(doc_id: str, uuid: str, *chunks: str) -> dict[str, Any]:
    """A cookbook record whose content is its chunks joined."""
    return {
        "doc_id": doc_id,
        "original_uuid": uuid,
        "content": "".join(chunks),
        "chunks": [
            {"chunk_id": f"{doc_id}_chunk_{n}", "original_index": n, "content": text} for n, text in enumerate(chunks)
        ],
    }


def write(tmp_path: Path, data: Any, name: str = "chunks.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_happy_path_maps_ids_and_keeps_order(tmp_path: Path) -> None:
    path = write(tmp_path, [doc("doc_1", "u1", "fn a() {}\n", "fn b() {}\n"), doc("doc_2", "u2", "x = 1\n")])
    corpus = load_source(path)
    assert corpus.source == str(path)
    assert corpus.warnings == []
    assert [(d.doc_id, d.title, d.kind, d.source) for d in corpus.documents] == [
        ("u1", "doc_1", "code", str(path)),
        ("u2", "doc_2", "code", str(path)),
    ]
    assert [(c.chunk_id, c.doc_id, c.chunk_index, c.content) for c in corpus.chunks] == [
        ("doc_1_chunk_0", "u1", 0, "fn a() {}\n"),
        ("doc_1_chunk_1", "u1", 1, "fn b() {}\n"),
        ("doc_2_chunk_0", "u2", 0, "x = 1\n"),
    ]
    assert corpus.chunks[0].doc_sha == corpus.documents[0].doc_sha
    assert corpus.chunks[2].doc_sha == corpus.documents[1].doc_sha


def test_chunks_are_ordered_by_original_index(tmp_path: Path) -> None:
    record = doc("doc_1", "u1", "first\n", "second\n")
    record["chunks"].reverse()
    corpus = load_cookbook(write(tmp_path, [record]))
    assert [c.chunk_index for c in corpus.chunks] == [0, 1]


def test_empty_list_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no documents"):
        load_source(write(tmp_path, []))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("content"), r"record 0 \(doc_id 'doc_1'\): missing required field 'content'"),
        (lambda r: r.update(content=5), r"record 0 \(doc_id 'doc_1'\): 'content' must be a string, got int"),
        (lambda r: r.update(chunks={}), r"'chunks' must be a list, got dict"),
        (lambda r: r.update(original_uuid=""), r"'original_uuid' must be a non-empty string"),
        (
            lambda r: r["chunks"][1].update(original_index="1"),
            r"chunks\.json: record 0 \(doc_id 'doc_1'\): chunk 1: 'original_index' must be an integer, got str",
        ),
        (
            lambda r: r["chunks"][0].update(original_index=True),
            r"chunk 0: 'original_index' must be an integer, got bool",
        ),
        (lambda r: r["chunks"][0].pop("chunk_id"), r"chunk 0: missing required field 'chunk_id'"),
        (lambda r: r["chunks"][1].update(content=None), r"chunk 1: 'content' must be a string, got null"),
        (lambda r: r["chunks"].append("text"), r"chunk 2: must be an object, got str"),
        (lambda r: r["chunks"][1].update(original_index=0), r"chunk 1: duplicate original_index 0 \(also chunk 0\)"),
    ],
)
def test_invalid_records_are_fatal(tmp_path: Path, mutate: Any, message: str) -> None:
    record = doc("doc_1", "u1", "a\n", "b\n")
    mutate(record)
    with pytest.raises(CorpusError, match=message):
        load_source(write(tmp_path, [record]))


def test_wrong_type_error_names_file_record_and_chunk(tmp_path: Path) -> None:
    records = [doc(f"doc_{n}", f"u{n}", "a\n", "b\n", "c\n") for n in range(1, 5)]
    records[3]["chunks"][2]["original_index"] = "2"
    path = write(tmp_path, records, "codebase_chunks.json")
    with pytest.raises(CorpusError) as caught:
        load_source(path)
    assert str(caught.value) == (
        f"{path}: record 3 (doc_id 'doc_4'): chunk 2: 'original_index' must be an integer, got str"
    )


def test_record_that_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"record 1: must be an object, got list"):
        load_source(write(tmp_path, [doc("doc_1", "u1", "a\n"), ["not", "an", "object"]]))


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (doc("doc_2", "u1", "b\n"), r"record 1 \(doc_id 'doc_2'\): duplicate original_uuid 'u1' \(also record 0\)"),
        (doc("doc_1", "u2", "b\n"), r"record 1 \(doc_id 'doc_1'\): duplicate doc_id 'doc_1' \(also record 0\)"),
    ],
)
def test_duplicate_document_ids_are_fatal(tmp_path: Path, second: dict[str, Any], message: str) -> None:
    second["chunks"][0]["chunk_id"] = "unique"
    with pytest.raises(CorpusError, match=message):
        load_source(write(tmp_path, [doc("doc_1", "u1", "a\n"), second]))


def test_duplicate_chunk_id_is_fatal(tmp_path: Path) -> None:
    second = doc("doc_2", "u2", "b\n")
    second["chunks"][0]["chunk_id"] = "doc_1_chunk_0"
    with pytest.raises(CorpusError, match=r"record 1 .*chunk 0: duplicate chunk_id 'doc_1_chunk_0' \(also record 0"):
        load_source(write(tmp_path, [doc("doc_1", "u1", "a\n"), second]))


def test_empty_documents_and_chunks_are_warned_and_skipped(tmp_path: Path) -> None:
    empty_content = doc("doc_2", "u2", "x\n")
    empty_content["content"] = "  \n"
    all_empty = doc("doc_3", "u3", " ", "\n")
    all_empty["content"] = "something"
    records = [doc("doc_1", "u1", "a\n", "   \n", "c\n"), empty_content, all_empty, doc("doc_4", "u4", "d\n")]
    corpus = load_source(write(tmp_path, records))
    assert [d.title for d in corpus.documents] == ["doc_1", "doc_4"]
    assert [(c.chunk_id, c.chunk_index) for c in corpus.chunks] == [
        ("doc_1_chunk_0", 0),
        ("doc_1_chunk_2", 2),
        ("doc_4_chunk_0", 0),
    ]
    assert len(corpus.warnings) == 3
    assert "record 0 (doc_id 'doc_1'): chunk 1 (chunk_id 'doc_1_chunk_1'): content is empty" in corpus.warnings[0]
    assert "record 1 (doc_id 'doc_2'): document content is empty" in corpus.warnings[1]
    assert "record 2 (doc_id 'doc_3'): all chunks are empty; document skipped" in corpus.warnings[2]


def test_document_without_chunks_is_warned(tmp_path: Path) -> None:
    lonely = doc("doc_2", "u2")
    lonely["content"] = "text"
    corpus = load_source(write(tmp_path, [doc("doc_1", "u1", "a\n"), lonely]))
    assert [d.title for d in corpus.documents] == ["doc_1"]
    assert corpus.warnings == [
        f"{tmp_path / 'chunks.json'}: record 1 (doc_id 'doc_2'): document has no chunks; document skipped"
    ]


def test_real_codebase_file() -> None:
    if not CODEBASE.exists():
        pytest.skip(
            f"{CODEBASE} is not present (the cookbook's codebase corpus, expected under SHARED_DATA = {SHARED_DATA})"
        )
    corpus = load_source(CODEBASE)
    assert len(corpus.documents) == 90
    assert len(corpus.chunks) == 737
    assert corpus.warnings == []
    first = corpus.documents[0]
    assert first.title == "doc_1"
    assert first.doc_id == "5e4c01057a10732d34784af2a97bee9d173863f043b9901de8ef7f57bc590145"
    assert (corpus.chunks[0].doc_id, corpus.chunks[0].chunk_index) == (first.doc_id, 0)


# --- reading JSON and detecting the format (shared by both JSON formats) ------------------------------------------


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no such file or directory"):
        load_source(tmp_path / "absent.json")


def test_malformed_json_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"doc_id": "doc_1",\n  oops}\n]\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.json: malformed JSON at line 3, column 3"):
        load_source(path)


def test_non_utf8_json_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('[{"doc_id": "caf\u00e9"}]'.encode("latin-1"))
    with pytest.raises(CorpusError, match=r"latin1\.json: not valid UTF-8 \(byte offset 16\)"):
        load_source(path)


def test_top_level_must_be_a_list(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="top level must be a list of records, got dict"):
        load_source(write(tmp_path, {"doc_id": "doc_1"}))


def test_fields_of_neither_format(tmp_path: Path) -> None:
    with pytest.raises(CorpusError) as caught:
        load_source(write(tmp_path, [{"title": "x", "body": "y"}]))
    message = str(caught.value)
    assert "matches no known format (fields: body, title)" in message
    assert "cookbook format needs doc_id, original_uuid, content, chunks" in message
    assert "docs format needs chunk_link, chunk_heading, text" in message


def test_first_record_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"record 0: must be an object, got str"):
        load_source(write(tmp_path, ["text"]))


def test_partial_cookbook_record_is_reported_as_missing_field(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"record 0 \(doc_id 'doc_1'\): missing required field 'original_uuid'"):
        load_source(write(tmp_path, [{"doc_id": "doc_1", "content": "x", "chunks": []}]))


def test_unreadable_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, [doc("doc_1", "u1", "a\n")])

    def refuse(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(CorpusError, match=r"chunks\.json: cannot read file: Permission denied"):
        load_source(path)


def test_other_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello", encoding="utf-8")
    with pytest.raises(CorpusError, match="expected a directory or a .json file"):
        load_source(path)
