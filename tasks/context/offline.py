"""The Contextualizer protocol, the kinds of contextualizer, the offline ones (structural, none) and context keys.

The offline default is ``structural`` (no LLM): for code, the file's opening comment, the names it defines and the
definitions that enclose the chunk; for prose, the page, title and heading path. A chunk that ships with a summary
(the docs format's summary-indexed corpus) gets that summary too: summary indexing. ``none`` writes no context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.ledger import SaveLedger
from ctxrag.tasks.common.grammars import regex_by_choice
from ctxrag.tasks.common.models import Chunk, Document, sha256_hex
from ctxrag.tasks.common.syntax import Definition as TreeDefinition
from ctxrag.tasks.common.syntax import outline
from ctxrag.tasks.context.structure import (
    Definition,
    chunk_lines,
    chunk_offsets,
    enclosing_definitions,
    find_definitions,
    first_code_position,
    leading_comment,
    opening_text,
    url_path_words,
)

MAX_DEFINED_NAMES = 40
DEFINES_PREFIX = "Defines: "  # the structural context's line of the names a file defines
CONTEXT_KEY = "context_key"  # the index rows' column of each row's context key (ctxrag.tasks.gc keeps those contexts)


SaveContexts = Callable[[list[tuple[Chunk, str]]], None]


class Contextualizer(Protocol):
    """Writes the contexts of a document's chunks, handing each to ``save`` as soon as it exists (and paid calls
    to ``ledger``). ``name`` + ``version``, and ``key_inputs``, are part of every context's cache key."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def key_inputs(self, document: Document, chunk: Chunk) -> tuple[str, ...]:
        """What the context depends on beyond the chunk key (the document's bytes, the chunk's bytes and place)."""
        ...

    def run(self, document: Document, chunks: list[Chunk], save: SaveContexts, ledger: SaveLedger) -> None: ...


class ContextualizerKind(str, Enum):
    STRUCTURAL = "structural"
    NONE = "none"
    CLAUDE = "claude"
    CLAUDE_SUMMARY = "claude-summary"

    @classmethod
    def from_str(cls, value: str) -> ContextualizerKind:
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(kind.value for kind in cls)
            raise InvalidInput(f"unknown contextualizer {value!r}; choose one of: {choices}") from None


class _Offline:
    """An LLM-free contextualizer: ``contextualize`` is a pure function; ``run`` saves its answer in one go."""

    def key_inputs(self, document: Document, chunk: Chunk) -> tuple[str, ...]:
        return ()

    def contextualize(self, document: Document, chunks: list[Chunk]) -> list[str]:
        raise NotImplementedError

    def run(self, document: Document, chunks: list[Chunk], save: SaveContexts, ledger: SaveLedger) -> None:
        save(list(zip(chunks, self.contextualize(document, chunks), strict=True)))


@dataclass(frozen=True)
class NoContext(_Offline):
    name: str = "none"
    version: str = "1"

    def contextualize(self, document: Document, chunks: list[Chunk]) -> list[str]:
        return ["" for _ in chunks]


@dataclass(frozen=True)
class StructuralContextualizer(_Offline):
    name: str = "structural"
    version: str = "4"  # bump on any change to what it writes: stored contexts are keyed by it

    def key_inputs(self, document: Document, chunk: Chunk) -> tuple[str, ...]:
        """The title, heading and shipped summary it writes: a docs corpus with and without summaries has the same
        chunk keys, and a heading or title can change while the text does not."""
        return (document.title, chunk.heading, chunk.summary) + (
            (document.description,) if document.description else ()
        )

    def contextualize(self, document: Document, chunks: list[Chunk]) -> list[str]:
        if document.kind == "code":
            return self._code_contexts(document, chunks)
        return [self._prose_context(document, chunk) for chunk in chunks]

    def _code_contexts(self, document: Document, chunks: list[Chunk]) -> list[str]:
        """Each chunk's header (the file's name, doc comment and definitions' names) and the definitions around its
        code: read off the file's syntax tree, or found by the regex chunker's patterns where there is none."""
        tree = None if regex_by_choice(document.doc_id) else outline(document.content, document.doc_id)
        offsets = chunk_offsets(document.content, [chunk.content for chunk in chunks])
        if tree is not None:
            header = self._header(
                document, opening_text(tree, document.content), [definition.name for definition in tree.definitions]
            )
            rows = chunk_lines(document.content, offsets, [chunk.content for chunk in chunks])
            insides = [_path(tree.enclosing(*span)) if span else "" for span in rows]
        else:
            definitions = find_definitions(document.content)
            header = self._header(
                document, leading_comment(document.content), [definition.name for definition in definitions]
            )
            insides = [
                _path(enclosing_definitions(definitions, *first_code_position(document.content, offset)))
                if offset >= 0
                else ""
                for offset in offsets
            ]
        contexts = []
        for inside, chunk in zip(insides, chunks):
            lines = list(header)
            if inside:
                lines.append("Inside: " + inside)
            if chunk.summary:
                lines.append(chunk.summary)
            contexts.append("\n".join(lines))
        return contexts

    @staticmethod
    def _header(document: Document, comment: str, defined: list[str]) -> list[str]:
        """The lines every chunk of a code file gets: its name, its opening comment, the names it defines."""
        names = list(dict.fromkeys(defined))[:MAX_DEFINED_NAMES]
        header = [f"File: {document.title}."] if "/" in document.title or "." in document.title else []
        if comment:
            header.append(comment)
        if names:
            header.append(DEFINES_PREFIX + ", ".join(names) + ".")
        return header

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
        if document.description:  # a page without one keeps the context (and the key) it had
            lines.append(f"About: {document.description}")
        if chunk.summary:
            lines.append(chunk.summary)
        return "\n".join(lines)


def shorten_defines(context: str, limit: int) -> str:
    """``context`` with its ``Defines:`` line cut to about ``limit`` characters at a name boundary (``, ...`` marks
    the cut); other lines, and a context without such a line, are unchanged."""
    lines = context.split("\n")
    for number, line in enumerate(lines):
        if line.startswith(DEFINES_PREFIX) and len(line) > limit:
            cut = line[:limit]
            cut = cut[: cut.rfind(",")] if "," in cut else cut
            lines[number] = cut + ", ..."
    return "\n".join(lines)


def context_key(chunk: Chunk, contextualizer: Contextualizer, document: Document) -> str:
    """Cache key of a chunk's context: (chunk key, contextualizer, version, what else it reads)."""
    return context_key_of(
        chunk.key, contextualizer.name, contextualizer.version, *contextualizer.key_inputs(document, chunk)
    )


def context_key_of(chunk_key: str, name: str, version: str, *inputs: str) -> str:
    """The key from its parts. Without ``inputs`` it is how ctxrag keyed every context before index rows recorded
    their keys (ctxrag.tasks.gc reads such versions with it)."""
    return sha256_hex(chunk_key, name, version, *inputs)[:32]


def _path(chain: Sequence[Definition | TreeDefinition]) -> str:
    """The definitions around a chunk, outermost first: ``class A > def f(self)``."""
    return " > ".join(definition.header for definition in chain)
