"""The lines of a hit that best match its query, with the matched words marked: what a person reads first.

A line's words are tokenized as BM25 tokenizes the index (identifiers split and kept whole, stop words dropped,
stemmed: ``ctxrag.storage.tokenize``), so a line matches where BM25 would: ``retries`` marks ``retry``,
``parse_header`` marks ``parseHeader``. The lines with the most distinct query terms win (then the most matched words,
then the earliest); at most ``MATCHED_LINES``, in their order in the text. The hits with no such line (found by their
meaning alone) get the lines nearest the query's meaning instead, unmarked: their non-blank lines (at most
``NEAREST_PER_HIT``, spread over a long chunk) scored together in one call (``nearest``: word-piece vectors,
``ctxrag.tasks.retrieval.word_vectors``); without it, a hit shows its first lines.

What does not depend on the query is read once a chunk (``ChunkWords``: its words by BM25 term, which lines to score
by meaning) and kept for the next search that meets it; a service reads a small index's chunks when it opens it
(``warm``), so its first searches cost what its later ones do.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ctxrag.storage.tokenize import WORD, tokenize, word_terms
from ctxrag.tasks.common.bounded import keep
from ctxrag.tasks.common.hits import MatchedLine

MATCHED_LINES = 3  # lines shown of a hit
MAX_LINE_CHARS = 300  # a longer line is cut (minified code, a table row)
NEAREST_PER_HIT = 64  # lines of a hit without a term scored by meaning, at most
# Chunks whose words a process keeps read (the oldest dropped first): a service meets a chunk again. The cookbook's 723
# distinct chunks (675 characters on average) took 4.9 MB, ~7 kB each (docs/decisions.md, "Matched lines, read once").
KEPT_CHUNKS = 1_024

Nearest = Callable[[list[str]], list[float]]  # the similarity of each text to the query


@dataclass(frozen=True)
class ChunkWords:
    """What every query reads of a chunk, read once: its words by BM25 term (the strings interned: chunks share
    them), its first non-blank lines, and the lines a hit with no query term is scored by (``NEAREST_PER_HIT``
    non-blank lines at most, spread over it)."""

    words_of_term: dict[str, tuple[str, ...]]
    first: tuple[int, ...]
    by_meaning: tuple[int, ...]

    @classmethod
    def of(cls, content: str) -> ChunkWords:
        words_of_term: dict[str, list[str]] = {}
        for word in set(WORD.findall(content)):
            for term in word_terms(word):
                words_of_term.setdefault(sys.intern(term), []).append(sys.intern(word))
        candidates = [number for number, text in enumerate(content.split("\n")) if text.strip()]
        return cls(
            {term: tuple(words) for term, words in words_of_term.items()},
            tuple(candidates[:MATCHED_LINES]),
            tuple(spread(candidates, NEAREST_PER_HIT)),
        )


_read: dict[str, ChunkWords] = {}  # content -> its words read, the latest last
_reading = threading.Lock()  # indexes searched on several threads share it


def chunk_words(content: str) -> ChunkWords:
    """``content`` read (``ChunkWords``), kept for the next search that meets it (at most ``KEPT_CHUNKS``)."""
    found = _read.get(content)
    if found is None:
        found = ChunkWords.of(content)
        with _reading:
            keep(_read, content, found, KEPT_CHUNKS)
    return found


def meaning_text(line: str) -> str:
    """What of a line is scored by meaning: stripped, cut at ``MAX_LINE_CHARS``."""
    return line.strip()[:MAX_LINE_CHARS]


def warm(contents: Iterable[str], pieces: Callable[[str], object] | None = None, most_pieces: int = 0) -> None:
    """Read ``contents`` now as a search would the first time it meets them (at most ``KEPT_CHUNKS``) and, with
    ``pieces``, split the lines scored by meaning into word pieces (at most ``most_pieces`` lines, what that cache
    keeps): a service's first searches then cost what its later ones do."""
    lines = 0
    for number, content in enumerate(contents):
        if number >= KEPT_CHUNKS:
            break
        read = chunk_words(content)
        if pieces is not None and lines + len(read.by_meaning) <= most_pieces:
            lines += len(read.by_meaning)
            texts = content.split("\n")
            for line in read.by_meaning:
                pieces(meaning_text(texts[line]))


def query_terms(query: str) -> frozenset[str]:
    return frozenset(tokenize(query))


def term_lines(content: str, terms: frozenset[str]) -> dict[int, tuple[tuple[int, int], ...]]:
    """The best lines of ``content`` by the query's terms: {line number in the text (0-based): matched spans}."""
    read = chunk_words(content)
    matching: dict[str, set[str]] = {}  # the chunk's words that match: the query's terms each is
    for term in terms:
        for word in read.words_of_term.get(term, ()):
            matching.setdefault(word, set()).add(term)
    if not matching:
        return {}
    scored = []
    for number, text in enumerate(content.split("\n")):
        if not any(word in text for word in matching):  # a line none of them is in is skipped unread
            continue
        spans: list[tuple[int, int]] = []
        found: set[str] = set()
        for written in WORD.finditer(text[:MAX_LINE_CHARS]):
            matched = matching.get(written.group())
            if matched:
                spans.append((written.start(), written.end()))
                found |= matched
        if found:
            scored.append((-len(found), -len(spans), number, tuple(spans)))
    return {number: spans for _, _, number, spans in sorted(scored)[:MATCHED_LINES]}


def spread(candidates: list[int], most: int) -> list[int]:
    """At most ``most`` of ``candidates``, evenly spread over them (the first included)."""
    if len(candidates) <= most:
        return candidates
    return [candidates[round(step * (len(candidates) - 1) / (most - 1))] for step in range(most)]


def matched_lines(
    contents: Sequence[str], first_lines: Sequence[int | None], query: str, nearest: Nearest | None = None
) -> list[tuple[MatchedLine, ...]]:
    """Each of ``contents``' best lines for ``query`` (``first_lines``: the line each starts on in its source)."""
    terms = query_terms(query)
    chosen = [term_lines(content, terms) for content in contents]
    split = [content.split("\n") for content in contents]
    asked: list[tuple[int, int]] = []  # (hit, line number) scored by meaning
    for position, content in enumerate(contents):
        if chosen[position]:
            continue
        read = chunk_words(content)
        if nearest is None:
            chosen[position] = {number: () for number in read.first}  # its first lines
        else:
            asked += [(position, number) for number in read.by_meaning]
    if asked and nearest is not None:
        texts = [meaning_text(split[position][number]) for position, number in asked]
        ranked = sorted(zip(nearest(texts), asked), key=lambda pair: (-pair[0], pair[1]))
        for _, (position, number) in ranked:
            if len(chosen[position]) < MATCHED_LINES:
                chosen[position][number] = ()
    return [
        tuple(
            MatchedLine(start + number if start is not None else None, lines[number][:MAX_LINE_CHARS], spans)
            for number, spans in sorted(matched.items())
        )
        for lines, start, matched in zip(split, first_lines, chosen)
    ]
