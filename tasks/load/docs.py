"""The docs format: ``[{chunk_link, chunk_heading, text, summary?}]``, documentation chunks split by heading.

A document is a ``chunk_link`` without its ``#fragment``; its content is its chunks' texts joined with a blank line,
in file order, and its title is its first chunk's heading.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxrag.tasks.common.models import Chunk, Corpus, CorpusError, Document
from ctxrag.tasks.load.jsonio import optional_str, read_records, record_label, require_object, require_str

DOCS_FIELDS: tuple[str, ...] = ("chunk_link", "chunk_heading", "text")
DOCS_OPTIONAL_FIELDS: tuple[str, ...] = ("summary",)
JOINER = "\n\n"


@dataclass(frozen=True)
class _Entry:
    link: str
    heading: str
    text: str
    summary: str


def load_docs(path: str | Path) -> Corpus:
    """Load a docs-format JSON file."""
    path = Path(path)
    return parse_docs(read_records(path), str(path))


def _check_record(index: int, raw: Any, source: str) -> _Entry:
    where = f"{source}: {record_label(index, raw, 'chunk_link')}"
    record = require_object(raw, where)
    return _Entry(
        link=require_str(record, "chunk_link", where, non_empty=True),
        heading=require_str(record, "chunk_heading", where),
        text=require_str(record, "text", where),
        summary=optional_str(record, "summary", where),
    )


def parse_docs(records: list[Any], source: str) -> Corpus:
    """Validate decoded docs records and build the corpus; ``source`` names the file in messages."""
    if not records:
        raise CorpusError(f"{source}: no documents (the list is empty)")
    entries = [_check_record(index, raw, source) for index, raw in enumerate(records)]

    corpus = Corpus(source=source)
    seen: dict[str, int] = {}
    pages: dict[str, list[_Entry]] = {}  # insertion order = order of first appearance
    for index, entry in enumerate(entries):
        if entry.link in seen:
            where = f"{source}: record {index} (chunk_link {entry.link!r})"
            raise CorpusError(f"{where}: duplicate chunk_link (also record {seen[entry.link]})")
        seen[entry.link] = index
        if not entry.text.strip():
            corpus.warnings.append(f"{source}: record {index} (chunk_link {entry.link!r}): text is empty; skipped")
            continue
        pages.setdefault(entry.link.partition("#")[0], []).append(entry)

    for page, page_entries in pages.items():
        document = Document(
            doc_id=page,
            title=page_entries[0].heading,
            content=JOINER.join(entry.text for entry in page_entries),
            kind="docs",
            source=source,
        )
        corpus.documents.append(document)
        corpus.chunks.extend(
            Chunk(
                chunk_id=entry.link,
                doc_id=document.doc_id,
                chunk_index=position,
                content=entry.text,
                doc_sha=document.doc_sha,
                heading=entry.heading,
                summary=entry.summary,
            )
            for position, entry in enumerate(page_entries)
        )
    return corpus
