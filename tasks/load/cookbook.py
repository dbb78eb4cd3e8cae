"""The cookbook's pre-chunked JSON.

Records: ``[{doc_id, original_uuid, content, chunks: [{chunk_id, original_index, content}]}]``.

Mapping: ``Document.doc_id`` = ``original_uuid`` (evaluation sets name chunks ``[original_uuid, original_index]``),
``Document.title`` = the cookbook's ``doc_id``, kind ``"code"``; ``Chunk.chunk_index`` = ``original_index``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxrag.tasks.common.models import Chunk, Corpus, CorpusError, Document
from ctxrag.tasks.load.jsonio import (
    read_records,
    record_label,
    require_int,
    require_list,
    require_object,
    require_str,
)

COOKBOOK_FIELDS: tuple[str, ...] = ("doc_id", "original_uuid", "content", "chunks")
COOKBOOK_CHUNK_FIELDS: tuple[str, ...] = ("chunk_id", "original_index", "content")


def load_cookbook(path: str | Path) -> Corpus:
    """Load a cookbook-format JSON file."""
    path = Path(path)
    return parse_cookbook(read_records(path), str(path))


def _check_record(index: int, raw: Any, source: str) -> tuple[dict[str, Any], list[tuple[str, int, str]]]:
    """Validate one document record; return it with its chunks as (chunk_id, original_index, content)."""
    where = f"{source}: {record_label(index, raw, 'doc_id')}"
    record = require_object(raw, where)
    require_str(record, "doc_id", where, non_empty=True)
    require_str(record, "original_uuid", where, non_empty=True)
    require_str(record, "content", where)
    chunks: list[tuple[str, int, str]] = []
    seen_index: dict[int, int] = {}
    for position, raw_chunk in enumerate(require_list(record, "chunks", where)):
        chunk_where = f"{where}: chunk {position}"
        chunk = require_object(raw_chunk, chunk_where)
        chunk_id = require_str(chunk, "chunk_id", chunk_where, non_empty=True)
        original_index = require_int(chunk, "original_index", chunk_where)
        content = require_str(chunk, "content", chunk_where)
        if original_index in seen_index:
            raise CorpusError(
                f"{chunk_where}: duplicate original_index {original_index} (also chunk {seen_index[original_index]})"
            )
        seen_index[original_index] = position
        chunks.append((chunk_id, original_index, content))
    return record, chunks


def parse_cookbook(records: list[Any], source: str) -> Corpus:
    """Validate decoded cookbook records and build the corpus; ``source`` names the file in messages."""
    if not records:
        raise CorpusError(f"{source}: no documents (the list is empty)")
    checked = [_check_record(index, raw, source) for index, raw in enumerate(records)]

    seen_uuid: dict[str, int] = {}
    seen_doc_id: dict[str, int] = {}
    seen_chunk_id: dict[str, str] = {}
    for index, (record, chunks) in enumerate(checked):
        where = f"{source}: {record_label(index, record, 'doc_id')}"
        for field_name, seen in (("original_uuid", seen_uuid), ("doc_id", seen_doc_id)):
            value = record[field_name]
            if value in seen:
                raise CorpusError(f"{where}: duplicate {field_name} {value!r} (also record {seen[value]})")
            seen[value] = index
        for position, (chunk_id, _, _) in enumerate(chunks):
            if chunk_id in seen_chunk_id:
                raise CorpusError(
                    f"{where}: chunk {position}: duplicate chunk_id {chunk_id!r} (also {seen_chunk_id[chunk_id]})"
                )
            seen_chunk_id[chunk_id] = f"record {index} chunk {position}"

    corpus = Corpus(source=source)
    for index, (record, chunks) in enumerate(checked):
        where = f"{source}: {record_label(index, record, 'doc_id')}"
        if not record["content"].strip():
            corpus.warnings.append(f"{where}: document content is empty; document skipped")
            continue
        if not chunks:
            corpus.warnings.append(f"{where}: document has no chunks; document skipped")
            continue
        if not any(content.strip() for _, _, content in chunks):
            corpus.warnings.append(f"{where}: all chunks are empty; document skipped")
            continue
        document = Document(
            doc_id=record["original_uuid"],
            title=record["doc_id"],
            content=record["content"],
            kind="code",
            source=source,
        )
        corpus.documents.append(document)
        for position, (chunk_id, original_index, content) in sorted(enumerate(chunks), key=lambda item: item[1][1]):
            if not content.strip():
                corpus.warnings.append(f"{where}: chunk {position} (chunk_id {chunk_id!r}): content is empty; skipped")
                continue
            corpus.chunks.append(
                Chunk(
                    chunk_id=chunk_id,
                    doc_id=document.doc_id,
                    chunk_index=original_index,
                    content=content,
                    doc_sha=document.doc_sha,
                )
            )
    return corpus
