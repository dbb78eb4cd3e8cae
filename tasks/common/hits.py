"""What a search answers, at every door: ``SearchAnswer`` (the index, its version, the strategy used, the hits) and
``Hit``, one ranked chunk that says where it is (``Location``).

``to_dict`` is the one JSON form of both (``ctxrag search --json``, the resident search's wire, the MCP tool's
structured output, the HTTP body), ``from_dict`` reads it back, and ``ANSWER_SCHEMA`` is its JSON Schema (the MCP
tool's output schema, the HTTP response's). Standard library only: ``ctxrag search`` prints a resident search's
answer without importing anything heavy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from ctxrag.tasks.common.languages import language_of

SHOWN_DEFINITIONS = 2  # names a location's text shows; the rest are counted


@dataclass(frozen=True)
class Location:
    """Where a hit's text is in its source: ``heading`` (the heading path, ``"Install > From source"``; empty for
    code), ``definitions`` (the names its code defines, in order) and ``lines`` (first and last line, 1-based and
    inclusive, of its text in the source file; None where not known)."""

    heading: str = ""
    definitions: tuple[str, ...] = ()
    lines: tuple[int, int] | None = None

    def __str__(self) -> str:
        """``lines 12-30, backoff, delay_for +1`` or ``Install > From source``: what to show a person."""
        parts = [f"lines {self.lines[0]}-{self.lines[1]}" if self.lines else "", self.heading]
        if self.definitions:
            more = len(self.definitions) - SHOWN_DEFINITIONS
            parts.append(", ".join(self.definitions[:SHOWN_DEFINITIONS]) + (f" +{more}" if more > 0 else ""))
        return ", ".join(part for part in parts if part)

    def to_dict(self) -> dict[str, object]:
        """The location's fields, and ``text``: what ``str`` shows a person."""
        lines = list(self.lines) if self.lines else None
        return {"lines": lines, "heading": self.heading, "definitions": list(self.definitions), "text": str(self)}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Location:
        lines = value.get("lines")
        return cls(
            str(value.get("heading") or ""),
            tuple(value.get("definitions") or ()),
            (lines[0], lines[1]) if lines else None,
        )


@dataclass(frozen=True)
class Hit:
    """One search result: the chunk, its document, where it is in its source (``source``, ``location``), its score
    under the strategy, and the rank (1-based) each retriever gave it (``vector``, ``bm25``; ``rerank`` when
    reranked; ``rrf-server`` when the cluster fused)."""

    rank: int
    chunk_id: str
    doc_id: str
    chunk_index: int
    score: float
    content: str
    context: str
    ranks: dict[str, int] = field(default_factory=dict)
    location: Location = field(default_factory=Location)

    @property
    def source(self) -> str:
        """Where the chunk came from: the file's path relative to the corpus folder, or the document's id in a JSON
        corpus (its ``doc_id``)."""
        return self.doc_id

    @property
    def language(self) -> str | None:
        """The source file's language, from its name ("python", "typescript", "markdown", ..., "text" for other
        files); None when the source names no file (a JSON corpus's ``doc_id``)."""
        return language_of(self.doc_id)

    @property
    def found_by(self) -> list[str]:
        """The retrievers that found the chunk."""
        return sorted(self.ranks)

    def to_dict(self) -> dict[str, object]:
        """The hit as every door gives it (the score rounded to 6 places)."""
        return {
            "rank": self.rank,
            "score": round(self.score, 6),
            "source": self.source,
            "language": self.language,
            "location": self.location.to_dict(),
            "chunk_id": self.chunk_id,
            "chunk_index": self.chunk_index,
            "found_by": self.found_by,
            "ranks": dict(self.ranks),
            "content": self.content,
            "context": self.context,
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Hit:
        """What ``to_dict`` wrote."""
        return cls(
            rank=int(value["rank"]),
            chunk_id=str(value["chunk_id"]),
            doc_id=str(value["source"]),
            chunk_index=int(value["chunk_index"]),
            score=float(value["score"]),
            content=str(value["content"]),
            context=str(value["context"]),
            ranks={str(name): int(rank) for name, rank in dict(value["ranks"]).items()},
            location=Location.from_dict(value["location"]),
        )

    def __repr__(self) -> str:
        return (
            f"Hit(rank={self.rank}, source={self.source!r}, location={str(self.location)!r}, "
            f"score={self.score:.4f}, found_by={self.found_by})"
        )


@dataclass(frozen=True)
class SearchAnswer:
    """A search's answer: the ``index`` searched, its ``version``, the ``strategy`` used and the ``hits``, best
    first. It reads as the list of its hits (``for hit in answer``, ``answer[0]``, ``len(answer)``)."""

    index: str
    version: str
    strategy: str
    hits: list[Hit]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "version": self.version,
            "strategy": self.strategy,
            "hits": [hit.to_dict() for hit in self.hits],
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> SearchAnswer:
        """What ``to_dict`` wrote (a ``KeyError``, ``TypeError`` or ``ValueError`` if it is not that)."""
        hits = [Hit.from_dict(hit) for hit in value["hits"]]
        return cls(str(value["index"]), str(value["version"]), str(value["strategy"]), hits)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    @overload
    def __getitem__(self, position: int) -> Hit: ...

    @overload
    def __getitem__(self, position: slice) -> list[Hit]: ...

    def __getitem__(self, position: int | slice) -> Hit | list[Hit]:
        return self.hits[position]


_TEXT, _WHOLE = {"type": "string"}, {"type": "integer"}
LOCATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "lines": {"type": ["array", "null"], "items": _WHOLE, "minItems": 2, "maxItems": 2,
                  "description": "First and last line of the chunk's text in its source (1-based), if known."},
        "heading": {**_TEXT, "description": "The heading path of a Markdown or docs chunk, e.g. 'Install > From source'."},
        "definitions": {"type": "array", "items": _TEXT, "description": "The names the chunk's code defines."},
        "text": {**_TEXT, "description": "The location as a person reads it."},
    },
    "required": ["lines", "heading", "definitions", "text"],
}  # fmt: skip
HIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rank": {**_WHOLE, "minimum": 1},
        "score": {"type": "number", "description": "The strategy's score (higher is better)."},
        "source": {**_TEXT, "description": "The file's path in the indexed folder, or the document's id."},
        "language": {"type": ["string", "null"], "description": "The source's language, from its name."},
        "location": LOCATION_SCHEMA,
        "chunk_id": _TEXT,
        "chunk_index": {**_WHOLE, "minimum": 0},
        "found_by": {"type": "array", "items": _TEXT, "description": "The retrievers that found the chunk."},
        "ranks": {"type": "object", "additionalProperties": _WHOLE, "description": "The rank each retriever gave it."},
        "content": {**_TEXT, "description": "The chunk's text."},
        "context": {**_TEXT, "description": "The context the index gave the chunk in its document."},
    },
    "required": ["rank", "score", "source", "language", "location", "chunk_id", "chunk_index", "found_by", "ranks",
                 "content", "context"],
}  # fmt: skip
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "index": {**_TEXT, "description": "The index searched."},
        "version": {**_TEXT, "description": "Its version that answered."},
        "strategy": {**_TEXT, "description": "The strategy used."},
        "hits": {"type": "array", "items": HIT_SCHEMA, "description": "The best hits first."},
    },
    "required": ["index", "version", "strategy", "hits"],
}
