"""Contextualizers: write, per chunk, a short context that situates it in its whole document.

The offline default is ``structural`` (no LLM): for code, the file's opening comment, the names it defines and the
definitions that enclose the chunk; for prose, the page, title and heading path. A chunk that ships with a summary
(the docs format's summary-indexed corpus) gets that summary too: summary indexing. ``none`` writes no context.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from tasks.models import Chunk, Document, sha256_hex
from tasks.structure import (
    enclosing_definitions,
    find_definitions,
    first_code_position,
    leading_comment,
    url_path_words,
)

MAX_DEFINED_NAMES = 40


class Contextualizer(Protocol):
    """Writes one context per chunk of a document, in order. ``name`` + ``version`` are part of the cache key."""

    name: str
    version: str

    def contextualize(self, document: Document, chunks: list[Chunk]) -> list[str]: ...


class ContextualizerKind(str, Enum):
    STRUCTURAL = "structural"
    NONE = "none"

    @classmethod
    def from_str(cls, value: str) -> "ContextualizerKind":
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(kind.value for kind in cls)
            raise ValueError(f"unknown contextualizer {value!r}; choose one of: {choices}") from None


@dataclass(frozen=True)
class NoContext:
    name: str = "none"
    version: str = "1"

    def contextualize(self, document: Document, chunks: list[Chunk]) -> list[str]:
        return ["" for _ in chunks]


@dataclass(frozen=True)
class StructuralContextualizer:
    name: str = "structural"
    version: str = "1"

    def contextualize(self, document: Document, chunks: list[Chunk]) -> list[str]:
        if document.kind == "code":
            return self._code_contexts(document, chunks)
        return [self._prose_context(document, chunk) for chunk in chunks]

    def _code_contexts(self, document: Document, chunks: list[Chunk]) -> list[str]:
        definitions = find_definitions(document.content)
        names = list(dict.fromkeys(definition.name for definition in definitions))[:MAX_DEFINED_NAMES]
        header = [f"File: {document.title}."] if "/" in document.title or "." in document.title else []
        comment = leading_comment(document.content)
        if comment:
            header.append(comment)
        if names:
            header.append("Defines: " + ", ".join(names) + ".")
        contexts = []
        for offset, chunk in zip(_chunk_offsets(document.content, chunks), chunks):
            lines = list(header)
            chain = enclosing_definitions(definitions, *first_code_position(document.content, offset)) if offset >= 0 else []
            if chain:
                lines.append("Inside: " + " > ".join(definition.header for definition in chain))
            if chunk.summary:
                lines.append(chunk.summary)
            contexts.append("\n".join(lines))
        return contexts

    @staticmethod
    def _prose_context(document: Document, chunk: Chunk) -> str:
        lines = []
        page = url_path_words(document.doc_id) if "://" in document.doc_id else document.title
        if page:
            lines.append(f"Page: {page}.")
        if document.title and document.title != page:
            lines.append(f"Title: {document.title}.")
        if chunk.heading and chunk.heading != document.title:
            lines.append(f"Section: {chunk.heading}.")
        if chunk.summary:
            lines.append(chunk.summary)
        return "\n".join(lines)


def make_contextualizer(kind: str) -> Contextualizer:
    """The contextualizer for a CLI/config name."""
    match ContextualizerKind.from_str(kind):
        case ContextualizerKind.STRUCTURAL:
            return StructuralContextualizer()
        case ContextualizerKind.NONE:
            return NoContext()


def context_key(chunk: Chunk, contextualizer: Contextualizer) -> str:
    """Cache key of a chunk's context: (chunk key, contextualizer, version)."""
    return sha256_hex(chunk.key, contextualizer.name, contextualizer.version)[:32]


def _chunk_offsets(content: str, chunks: list[Chunk]) -> list[int]:
    """Where each chunk starts in its document (-1 when it is not found verbatim); chunks are searched in order."""
    offsets, cursor = [], 0
    for chunk in chunks:
        position = content.find(chunk.content, cursor)
        if position < 0:
            position = content.find(chunk.content)
        offsets.append(position)
        if position >= 0:
            cursor = position + 1
    return offsets
