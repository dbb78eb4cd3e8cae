"""What a search is asked, at every door: one ``SearchRequest`` with one validation (``from_dict``).

The Python API, ``ctxrag search``'s flags, the resident search's wire format, the MCP tool's input schema and the
HTTP body are made from this class's fields and translate to and from it, nothing else: a field's ``metadata``
(``option``) holds its description, its bounds and its command-line flag, and every door reads them. A search option is
a field here (with its keyword line in ``SearchKeywords``, which a test holds equal) and the code that reads it.

``from_dict`` is strict: an unknown field is an error that names it and the field probably meant (``top_k``: did you
mean k?), a wrong type or a value out of bounds is one plain sentence (``InvalidInput``). Standard library only, so
``ctxrag search`` checks a request before it imports anything heavy.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ctxrag.storage.errors import InvalidInput, UserError
from ctxrag.storage.names import DEFAULT_NAME, validate_name
from ctxrag.tasks.common.languages import BY_EXTENSION, BY_FILENAME, TEXT
from ctxrag.tasks.common.strategies import StrategyConfig

MAX_QUERY_CHARS = 2_000  # a question, not a document: ~400 words; the local embedder reads 256 tokens of it anyway
MAX_K = 100
MAX_PATTERN_CHARS = 500
LANGUAGES = frozenset({*BY_EXTENSION.values(), *BY_FILENAME.values(), TEXT})
# Names other search tools give a field, and what they are here: an unknown field says which one was meant.
ALIASES = {
    "top_k": "k", "topk": "k", "limit": "k", "n": "k", "size": "k", "count": "k", "num_results": "k",
    "similarity_top_k": "k", "max_results": "k", "q": "query", "question": "query", "text": "query",
    "input": "query", "name": "index", "index_name": "index", "collection": "index", "glob": "path",
    "filter": "path", "file": "path", "paths": "path", "lang": "language", "mode": "strategy",
    "search_type": "strategy", "reranker": "rerank",
}  # fmt: skip


def option(
    description: str,
    *,
    flag: str | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    max_length: int | None = None,
) -> dict[str, Any]:
    """A request field's metadata: what the doors show of it (its help, its command-line flag when not its name)
    and the bounds every door enforces (``minimum``/``maximum`` for a number, ``max_length`` for text)."""
    return {"description": description, "flag": flag, "minimum": minimum, "maximum": maximum, "max_length": max_length}


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """One search: ``query`` on index ``index``, ``k`` hits by ``strategy``, only from the sources ``path`` and
    ``language`` keep, reranked by ``rerank``. Build it with ``from_dict`` (checked) or directly (then call ``check``)."""

    query: str = field(metadata=option("What to look for: a question or keywords.", max_length=MAX_QUERY_CHARS))
    index: str = field(
        default=DEFAULT_NAME,
        metadata=option("The index to search: lowercase letters, digits, '-' and '_'.", flag="name"),
    )
    k: int = field(default=10, metadata=option(f"How many hits, 1 to {MAX_K}.", minimum=1, maximum=MAX_K))
    strategy: str | None = field(
        default=None,
        metadata=option(
            "hybrid-score, hybrid (RRF), hybrid-doc, hybrid-weighted, bm25 or vector, with parameters in brackets "
            "(hybrid-score(vector_weight=0.3)); default: the index's (what `ctxrag tune` chose, else hybrid-score)."
        ),
    )
    path: str | None = field(
        default=None,
        metadata=option(
            "Only sources matching this gitignore-style pattern, e.g. src/, *.py or docs/**/*.md.",
            max_length=MAX_PATTERN_CHARS,
        ),
    )
    language: str | None = field(
        default=None, metadata=option("Only sources in this language, e.g. python, typescript, markdown, text.")
    )
    rerank: str = field(
        default="",
        metadata=option(
            "Rerank the hits: cohere (CO_API_KEY), claude (ANTHROPIC_API_KEY), local:MODEL (a cross-encoder's folder or "
            "Hugging Face id) or none; default: $CTXRAG_RERANK, else none."
        ),
    )
    rerank_model: str = field(
        default="", metadata=option("The reranker's model (cohere: rerank-english-v3.0; claude: claude-haiku-4-5).")
    )
    server_rrf: bool = field(
        default=False, metadata=option("Elasticsearch backend: fuse hybrid with the cluster's rrf retriever.")
    )
    per_file: bool = field(
        default=False,
        metadata=option("Each file once, at its best chunk's rank, with the line ranges of its other matching chunks."),
    )

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ``InvalidInput`` for the first field whose type or value is wrong."""
        hints = _hints(type(self))
        for item in dataclasses.fields(self):
            _check_value(item, hints[item.name], getattr(self, item.name))
        if not self.query.strip():
            raise InvalidInput("query is empty: give a question or some words")
        try:
            validate_name(self.index)
            if self.strategy is not None:
                StrategyConfig.from_str(self.strategy)
        except UserError as error:
            raise InvalidInput(str(error)) from None
        if self.language is not None and self.language not in LANGUAGES:
            raise InvalidInput(f"unknown language {self.language!r}; known: {', '.join(sorted(LANGUAGES))}")
        if self.path is not None:
            path_spec(self.path)

    @classmethod
    def from_dict(cls, given: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> SearchRequest:
        """The request ``given`` names (a JSON object, a tool call's arguments, flags), ``defaults`` filling what it
        leaves out (a service's own index); an unknown or missing field, a wrong type or value is an ``InvalidInput``."""
        if not isinstance(given, Mapping):
            raise InvalidInput(
                f"a search request is an object of fields ({', '.join(field_names(cls))}), not {_kind_of(given)}"
            )
        known = field_names(cls)
        for name in given:
            if name not in known:
                raise InvalidInput(unknown_field(name, known))
        values = {**(defaults or {}), **given}
        if "query" not in values:
            raise InvalidInput("query is missing: give a question or some words")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON-ready fields (the resident search's wire format)."""
        return dataclasses.asdict(self)


class SearchKeywords(TypedDict, total=False):
    """``ctxrag.search``'s and ``Index.search``'s keywords beside the query, index, ``k`` and ``strategy``: the other
    fields of ``SearchRequest`` (tests/tasks/common/test_search_request.py holds the two equal)."""

    path: str | None
    language: str | None
    rerank: str
    rerank_model: str
    server_rrf: bool
    per_file: bool


def field_names(kind: type[SearchRequest] = SearchRequest) -> list[str]:
    return [item.name for item in dataclasses.fields(kind)]


def unknown_field(name: object, known: list[str]) -> str:
    """The sentence for an unknown field: which it probably meant, and the fields there are."""
    import difflib

    meant = ALIASES.get(str(name).lower()) if isinstance(name, str) else None
    if meant not in known:
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
        meant = close[0] if close else None
    hint = f" (did you mean {meant}?)" if meant else ""
    return f"unknown field {name!r}{hint}; the fields are: {', '.join(known)}"


def path_spec(path: str) -> Any:
    """``path``'s gitignore-style pattern, compiled (a ``pathspec.GitIgnoreSpec``); a bad one is an ``InvalidInput``."""
    import re

    from pathspec import GitIgnoreSpec

    if not path.strip() or "\n" in path or path.startswith("!"):
        raise InvalidInput(f"path {path[:80]!r}: give one gitignore-style pattern, e.g. src/, *.py or docs/**/*.md")
    try:
        spec = GitIgnoreSpec.from_lines([path])
    except (re.error, ValueError) as error:
        raise InvalidInput(f"path {path!r} is not a valid gitignore-style pattern ({error})") from None
    if all(pattern.include is None for pattern in spec.patterns):  # pathspec reads a pattern it cannot use as none
        raise InvalidInput(f"path {path!r} is not a valid gitignore-style pattern (it matches nothing)")
    return spec


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(kind: type) -> dict[str, Any]:
    if kind not in _HINTS:
        _HINTS[kind] = typing.get_type_hints(kind)
    return _HINTS[kind]


def _check_value(item: dataclasses.Field[Any], annotation: Any, value: Any) -> None:
    """Raise ``InvalidInput`` if ``value`` is not of the field's type or out of its bounds: one plain sentence."""
    meta = item.metadata
    kinds = [kind for kind in typing.get_args(annotation) or (annotation,) if kind is not type(None)]
    optional = type(None) in typing.get_args(annotation)
    if value is None and optional:
        return
    kind = kinds[0]
    low, high, longest = meta.get("minimum"), meta.get("maximum"), meta.get("max_length")
    if kind is bool:
        if not isinstance(value, bool):
            raise InvalidInput(f"{item.name} must be true or false, got {_shown(value)}")
    elif kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            between = f" from {low} to {high}" if low is not None and high is not None else ""
            raise InvalidInput(f"{item.name} must be a whole number{between}, got {_shown(value)}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise InvalidInput(f"{item.name} must be from {low} to {high}, got {value}")
    elif kind is str:
        if not isinstance(value, str):
            raise InvalidInput(f"{item.name} must be text{' or null' if optional else ''}, got {_shown(value)}")
        if longest is not None and len(value) > longest:
            raise InvalidInput(f"{item.name} is {len(value):,} characters; the most is {longest:,}")


def _kind_of(value: object) -> str:
    """What a JSON value is, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def _shown(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return _kind_of(value) if value is None else str(value).lower()
    return f"{value!r}" if isinstance(value, (str, int, float)) and len(repr(value)) <= 40 else _kind_of(value)


def request_schema(kind: type[SearchRequest] = SearchRequest) -> dict[str, Any]:
    """The request as a JSON Schema object (the MCP tool's input schema, the HTTP body's): every field with its
    type, description, default and bounds; no other field allowed."""
    hints = _hints(kind)
    properties: dict[str, Any] = {}
    for item in dataclasses.fields(kind):
        annotation = hints[item.name]
        kinds = [_JSON_TYPES[k] for k in typing.get_args(annotation) or (annotation,) if k is not type(None)]
        nullable = type(None) in typing.get_args(annotation)
        described: dict[str, Any] = {"type": [*kinds, "null"] if nullable else kinds[0]}
        described["description"] = item.metadata.get("description", "")
        if (
            item.default is not dataclasses.MISSING and item.default is not None
        ):  # (no default: null, as OpenAPI drops it)
            described["default"] = item.default
        for key, bound in (("minimum", "minimum"), ("maximum", "maximum"), ("max_length", "maxLength")):
            if item.metadata.get(key) is not None:
                described[bound] = item.metadata[key]
        if kinds[0] == "string" and item.default is dataclasses.MISSING:
            described["minLength"] = 1
        properties[item.name] = described
    required = [item.name for item in dataclasses.fields(kind) if item.default is dataclasses.MISSING]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_JSON_TYPES = {str: "string", int: "integer", bool: "boolean", float: "number"}
