"""A search request to a service, checked before any index is touched: the limits both doors document and enforce.

A bad request is one ``ServiceError`` whose ``kind`` says what class of problem it is (``invalid_request``,
``unknown_index``, ``unavailable``, ``internal``) and whose message says what was wrong: the MCP door returns it as
a tool error result, the HTTP door as a 4xx/5xx JSON body. Neither door crashes on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxrag.storage.errors import InvalidInput, UnknownIndexError, UserError
from ctxrag.tasks.common.languages import BY_EXTENSION, BY_FILENAME, TEXT

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

    from ctxrag.hits import Hit

MAX_QUERY_CHARS = 2_000  # a question, not a document: ~400 words; the local embedder reads 256 tokens of it anyway
MAX_K = 100
MAX_PATTERN_CHARS = 500
DEFAULT_K = 10
LANGUAGES = frozenset({*BY_EXTENSION.values(), *BY_FILENAME.values(), TEXT})
STATUS = {"invalid_request": 400, "unknown_index": 404, "unavailable": 503, "internal": 500}


class ServiceError(Exception):
    """What a service answers instead of hits: ``kind`` (a key of ``STATUS``) and a message for the caller."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    @property
    def status(self) -> int:
        """The HTTP status of this error."""
        return STATUS[self.kind]

    def to_dict(self) -> dict[str, object]:
        return {"error": {"kind": self.kind, "message": self.message}}

    @classmethod
    def of(cls, error: UserError) -> ServiceError:
        """A user error from the search path as a service error (a bad value, an unknown index, anything else)."""
        if isinstance(error, InvalidInput):
            return cls("invalid_request", str(error))
        if isinstance(error, UnknownIndexError) and type(error) is UnknownIndexError:
            return cls("unknown_index", str(error))
        return cls("unavailable", str(error))  # a corrupt or busy index, a missing key: the caller cannot fix it


@dataclass(frozen=True)
class SearchRequest:
    """What a caller asks: ``query`` on index ``index``, ``k`` hits, by ``strategy`` (None: the index's), only from
    sources matching ``path`` (a gitignore-style pattern, as ``ctxrag index --include``: ``src/``, ``*.py``,
    ``docs/**/*.md``) and in ``language`` (``python``, ``markdown``, ...)."""

    query: str
    index: str
    k: int = DEFAULT_K
    strategy: str | None = None
    path: str | None = None
    language: str | None = None

    def check(self) -> HitFilter | None:
        """Raise ``ServiceError`` (invalid_request) for the first bad field; the filter the request asks for."""
        from ctxrag.storage.names import validate_name
        from ctxrag.tasks.retrieval.search import StrategyConfig

        if not isinstance(self.query, str) or not self.query.strip():
            raise ServiceError("invalid_request", "query is empty: ask a question or give some words")
        if len(self.query) > MAX_QUERY_CHARS:
            raise ServiceError(
                "invalid_request", f"query is {len(self.query):,} characters; the most is {MAX_QUERY_CHARS:,}"
            )
        if isinstance(self.k, bool) or not isinstance(self.k, int) or not 1 <= self.k <= MAX_K:
            raise ServiceError("invalid_request", f"k must be a whole number from 1 to {MAX_K}, got {self.k!r}")
        try:
            validate_name(self.index)
            if self.strategy is not None:
                StrategyConfig.from_str(self.strategy)
        except UserError as error:  # a bad index name or strategy
            raise ServiceError("invalid_request", str(error)) from None
        return HitFilter.of(self.path, self.language)


@dataclass(frozen=True)
class HitFilter:
    """Keeps the hits whose source matches a gitignore-style ``spec`` and whose language is ``language``."""

    spec: GitIgnoreSpec | None
    language: str | None

    @classmethod
    def of(cls, path: str | None, language: str | None) -> HitFilter | None:
        """The filter for ``path`` and ``language`` (None when neither is given); a bad one is a ``ServiceError``."""
        if path is None and language is None:
            return None
        if language is not None and language not in LANGUAGES:
            raise ServiceError(
                "invalid_request", f"unknown language {language!r}; known: {', '.join(sorted(LANGUAGES))}"
            )
        return cls(_spec(path) if path is not None else None, language)

    def keeps(self, hit: Hit) -> bool:
        if self.language is not None and hit.language != self.language:
            return False
        return self.spec is None or self.spec.match_file(hit.source)


def _spec(path: str) -> GitIgnoreSpec:
    import re

    from pathspec import GitIgnoreSpec

    if not path.strip() or len(path) > MAX_PATTERN_CHARS or "\n" in path or path.startswith("!"):
        raise ServiceError(
            "invalid_request",
            f"path filter {path[:80]!r}: give one gitignore-style pattern of 1 to "
            f"{MAX_PATTERN_CHARS} characters, e.g. src/, *.py or docs/**/*.md",
        )
    try:
        spec = GitIgnoreSpec.from_lines([path])
    except (re.error, ValueError) as error:
        raise ServiceError(
            "invalid_request", f"path filter {path!r} is not a valid gitignore-style pattern ({error})"
        ) from None
    if all(
        pattern.include is None for pattern in spec.patterns
    ):  # pathspec reads a pattern it cannot use as no pattern
        raise ServiceError(
            "invalid_request", f"path filter {path!r} is not a valid gitignore-style pattern (it matches nothing)"
        )
    return spec
