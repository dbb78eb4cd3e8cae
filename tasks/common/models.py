"""The pipeline's records: documents and chunks, with content-hash identities."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

from ctxrag.storage.errors import UserError

DEFAULT_MAX_FILE_BYTES = (
    1 << 20
)  # a folder's larger files are skipped (0: no limit); here, so options need not import the loaders


def sha256_hex(*parts: str) -> str:
    """sha256 over the parts, separated by NUL so ("ab", "c") != ("a", "bc")."""
    digest = hashlib.sha256()
    for index, part in enumerate(parts):
        if index:
            digest.update(b"\0")
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()


class CorpusError(UserError, ValueError):
    """Bad input that stops a run; the message names the file, the record and what is wrong."""


@dataclass(frozen=True)
class Document:
    """One source document. ``doc_id`` is the source's own id, kept so evaluation sets can refer to it."""

    doc_id: str
    title: str
    content: str
    kind: str  # "code" | "markdown" | "text" | "docs"
    source: str  # the file it came from, for messages
    description: str = ""  # a docs page's own description (its front matter's), named in every chunk's context

    @cached_property
    def doc_sha(self) -> str:
        return sha256_hex(self.doc_id, self.content)


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit. ``(doc_id, chunk_index)`` and ``chunk_id`` are the source's own ids."""

    chunk_id: str
    doc_id: str
    chunk_index: int
    content: str
    doc_sha: str
    heading: str = ""  # heading path (Markdown, docs format)
    summary: str = ""  # a summary shipped with the corpus (docs format), used for summary indexing

    @property
    def chunk_sha(self) -> str:
        """Not kept: only ``key`` reads it, and a second cached attribute made every chunk ~430 bytes larger."""
        return sha256_hex(self.content)

    @cached_property
    def key(self) -> str:
        """Content identity: (document sha, chunk index, chunk sha)."""
        return sha256_hex(self.doc_sha, str(self.chunk_index), self.chunk_sha)[:32]


@dataclass
class Corpus:
    """What a loader returns: documents, their chunks in order, the warnings it raised, and the code files it cut
    with the regex chunker for want of a grammar or of a clean parse (``ctxrag.tasks.load.syntax``)."""

    source: str
    documents: list[Document] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    chunked_by_regex: list[str] = field(default_factory=list)  # code files the syntax-tree chunker could not read


def indexed_text(context: str, content: str) -> str:
    """What is embedded and BM25-indexed: the context in front of the chunk."""
    return f"{context}\n\n{content}" if context else content
