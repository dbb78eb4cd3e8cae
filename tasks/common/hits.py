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
    code), ``definitions`` (the names its code defines, in order), ``lines`` (first and last line, 1-based and
    inclusive, of its text in the source file; None where not known) and ``symbol`` (the definition the text is in,
    with those around it: ``SqliteStore.put``; empty where none is known)."""

    heading: str = ""
    definitions: tuple[str, ...] = ()
    lines: tuple[int, int] | None = None
    symbol: str = ""

    @property
    def name(self) -> str:
        """What the text is, in a few words: its symbol, else its heading, else the first name it defines."""
        return self.symbol or self.heading or (self.definitions[0] if self.definitions else "")

    def __str__(self) -> str:
        """``lines 12-30, backoff, delay_for +1`` or ``Install > From source``: what to show a person."""
        parts = [f"lines {self.lines[0]}-{self.lines[1]}" if self.lines else "", self.heading]
        if self.definitions:
            more = len(self.definitions) - SHOWN_DEFINITIONS
            parts.append(", ".join(self.definitions[:SHOWN_DEFINITIONS]) + (f" +{more}" if more > 0 else ""))
        return ", ".join(part for part in parts if part)

    def to_dict(self) -> dict[str, object]:
        lines = list(self.lines) if self.lines else None
        return {"lines": lines, "heading": self.heading, "definitions": list(self.definitions), "symbol": self.symbol}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Location:
        lines = value.get("lines")
        return cls(
            str(value.get("heading") or ""),
            tuple(value.get("definitions") or ()),
            (lines[0], lines[1]) if lines else None,
            str(value.get("symbol") or ""),
        )


@dataclass(frozen=True)
class MatchedLine:
    """A line of a hit's text that matches the query: its number in the source (None where the hit's lines are not
    known), its text, and the spans (start, end) of the words the query's terms matched (none for a line chosen as
    nearest the query's meaning)."""

    line: int | None
    text: str
    spans: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"line": self.line, "text": self.text, "spans": [list(span) for span in self.spans]}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> MatchedLine:
        line = value.get("line")
        spans = tuple((int(start), int(end)) for start, end in value.get("spans") or ())
        return cls(int(line) if line is not None else None, str(value["text"]), spans)


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
    matches: tuple[MatchedLine, ...] = ()
    also: tuple[tuple[int, int], ...] = ()

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

    @property
    def place(self) -> str:
        """Where to open it: ``tinyq/storage.py:40-71 SqliteStore.put`` (path, lines, symbol or heading), as a
        terminal or an editor takes ``path:line``."""
        lines = f":{self.location.lines[0]}-{self.location.lines[1]}" if self.location.lines else ""
        name = self.location.name
        return f"{self.source}{lines}" + (f" {name}" if name else "")

    def to_dict(self) -> dict[str, object]:
        """The hit as every door gives it (the score rounded to 6 places)."""
        return {
            "rank": self.rank,
            "score": round(self.score, 6),
            "source": self.source,
            "place": self.place,
            "language": self.language,
            "location": self.location.to_dict(),
            "matches": [line.to_dict() for line in self.matches],
            "also": [list(lines) for lines in self.also],
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
            matches=tuple(MatchedLine.from_dict(line) for line in value.get("matches") or ()),
            also=tuple((int(first), int(last)) for first, last in value.get("also") or ()),
        )

    def __repr__(self) -> str:
        return f"Hit(rank={self.rank}, place={self.place!r}, score={self.score:.4f}, found_by={self.found_by})"


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
_LINES = {"type": "array", "items": _WHOLE, "minItems": 2, "maxItems": 2}
LOCATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "lines": {
            "type": ["array", "null"],
            "items": _WHOLE,
            "minItems": 2,
            "maxItems": 2,
            "description": "First and last line of the chunk's text in its source (1-based), if known.",
        },
        "heading": {
            **_TEXT,
            "description": "The heading path of a Markdown or docs chunk, e.g. 'Install > From source'.",
        },
        "definitions": {"type": "array", "items": _TEXT, "description": "The names the chunk's code defines."},
        "symbol": {**_TEXT, "description": "The definition the chunk is in, with those around it: 'SqliteStore.put'."},
    },
    "required": ["lines", "heading", "definitions", "symbol"],
}
MATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "line": {"type": ["integer", "null"], "description": "The line's number in the source, if known."},
        "text": _TEXT,
        "spans": {"type": "array", "items": _LINES, "description": "[start, end) of each word the query matched."},
    },
    "required": ["line", "text", "spans"],
}
HIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rank": {**_WHOLE, "minimum": 1},
        "score": {"type": "number", "description": "The strategy's score (higher is better)."},
        "source": {**_TEXT, "description": "The file's path in the indexed folder, or the document's id."},
        "place": {**_TEXT, "description": "Where to open it: path:first-last and its symbol or heading."},
        "language": {"type": ["string", "null"], "description": "The source's language, from its name."},
        "location": LOCATION_SCHEMA,
        "matches": {"type": "array", "items": MATCH_SCHEMA, "description": "The chunk's lines that best match the query."},
        "also": {"type": "array", "items": _LINES,
                 "description": "per_file: the line ranges of the file's other matching chunks."},
        "chunk_id": _TEXT,
        "chunk_index": {**_WHOLE, "minimum": 0},
        "found_by": {"type": "array", "items": _TEXT, "description": "The retrievers that found the chunk."},
        "ranks": {"type": "object", "additionalProperties": _WHOLE, "description": "The rank each retriever gave it."},
        "content": {**_TEXT, "description": "The chunk's text."},
        "context": {**_TEXT, "description": "The context the index gave the chunk in its document."},
    },
    "required": ["rank", "score", "source", "place", "language", "location", "matches", "also", "chunk_id",
                 "chunk_index", "found_by", "ranks", "content", "context"],
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
