"""The lines of a hit that best match its query, with the matched words marked: what a person reads first.

A line's words are tokenized as BM25 tokenizes the index (identifiers split and kept whole, stop words dropped,
stemmed: ``ctxrag.storage.tokenize``), so a line matches where BM25 would: ``retries`` marks ``retry``,
``parse_header`` marks ``parseHeader``. The lines with the most distinct query terms win (then the most matched words,
then the earliest); at most ``MATCHED_LINES``, in their order in the text. The hits with no such line (found by their
meaning alone) get the lines nearest the query's meaning instead, unmarked: up to ``NEAREST_PER_HIT`` of their
non-blank lines, spread over the chunk, scored together by the index's own model (``nearest``), at most
``NEAREST_LINES`` a search (the best-ranked hits first; past that budget a hit shows its first lines).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxrag.storage.tokenize import WORD, tokenize, word_terms
from ctxrag.tasks.common.hits import MatchedLine

MATCHED_LINES = 3  # lines shown of a hit
MAX_LINE_CHARS = 300  # a longer line is cut (minified code, a table row)
NEAREST_PER_HIT = 8  # lines of a hit without a term scored by meaning
NEAREST_LINES = 32  # lines scored by meaning in one search, at most

Nearest = Callable[[list[str]], list[float]]  # the similarity of each text to the query


def query_terms(query: str) -> frozenset[str]:
    return frozenset(tokenize(query))


def term_lines(content: str, terms: frozenset[str]) -> dict[int, tuple[tuple[int, int], ...]]:
    """The best lines of ``content`` by the query's terms: {line number in the text (0-based): matched spans}."""
    scored = []
    for number, text in enumerate(content.split("\n")):
        spans: list[tuple[int, int]] = []
        found: set[str] = set()
        for word in WORD.finditer(text[:MAX_LINE_CHARS]):
            matched = terms.intersection(word_terms(word.group()))
            if matched:
                spans.append((word.start(), word.end()))
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
    asked: list[tuple[int, int]] = []  # (hit, line number) scored by meaning
    for position, content in enumerate(contents):
        if chosen[position]:
            continue
        lines = content.split("\n")
        candidates = [number for number, text in enumerate(lines) if text.strip()]
        room = NEAREST_LINES - len(asked) if nearest is not None else 0
        if room < min(NEAREST_PER_HIT, len(candidates)):
            chosen[position] = {number: () for number in candidates[:MATCHED_LINES]}  # past the budget: its first lines
            continue
        asked += [(position, number) for number in spread(candidates, NEAREST_PER_HIT)]
    if asked and nearest is not None:
        texts = [contents[position].split("\n")[number].strip()[:MAX_LINE_CHARS] for position, number in asked]
        ranked = sorted(zip(nearest(texts), asked), key=lambda pair: (-pair[0], pair[1]))
        for _, (position, number) in ranked:
            if len(chosen[position]) < MATCHED_LINES:
                chosen[position][number] = ()
    return [
        tuple(
            MatchedLine(
                start + number if start is not None else None, content.split("\n")[number][:MAX_LINE_CHARS], spans
            )
            for number, spans in sorted(lines.items())
        )
        for content, start, lines in zip(contents, first_lines, chosen)
    ]
