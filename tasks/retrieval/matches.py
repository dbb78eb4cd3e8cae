"""The lines of a hit that best match its query, with the matched words marked: what a person reads first.

A line's words are tokenized as BM25 tokenizes the index (identifiers split and kept whole, stop words dropped,
stemmed: ``ctxrag.storage.tokenize``), so a line matches where BM25 would: ``retries`` marks ``retry``,
``parse_header`` marks ``parseHeader``. The lines with the most distinct query terms win (then the most matched words,
then the earliest); at most ``MATCHED_LINES``, in their order in the text. The hits with no such line (found by their
meaning alone) get the lines nearest the query's meaning instead, unmarked: their non-blank lines (at most
``NEAREST_PER_HIT``, spread over a long chunk) scored together in one call (``nearest``: word-piece vectors,
``ctxrag.tasks.retrieval.word_vectors``); without it, a hit shows its first lines. A service reads a small index's
chunks when it opens it (``warm``): their words' terms and their lines' word pieces are then worked out, and its first
searches cost what its later ones do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ctxrag.storage.tokenize import WORD, tokenize, word_terms
from ctxrag.tasks.common.hits import MatchedLine

MATCHED_LINES = 3  # lines shown of a hit
MAX_LINE_CHARS = 300  # a longer line is cut (minified code, a table row)
NEAREST_PER_HIT = 64  # lines of a hit without a term scored by meaning, at most

Nearest = Callable[[list[str]], list[float]]  # the similarity of each text to the query


def warm(contents: Iterable[str], pieces: Callable[[str], object] | None = None, most_pieces: int = 0) -> None:
    """Work out now what a search would the first time it meets ``contents``: each word's BM25 terms (kept by
    ``word_terms``) and, with ``pieces``, the word pieces of the lines scored by meaning (at most ``most_pieces``
    lines, what that cache keeps)."""
    lines_split = 0
    for content in contents:
        tokenize(content)
        if pieces is not None:
            lines = content.split("\n")
            scored = spread(non_blank(lines), NEAREST_PER_HIT)
            if lines_split + len(scored) <= most_pieces:
                lines_split += len(scored)
                for number in scored:
                    pieces(meaning_text(lines[number]))


def non_blank(lines: list[str]) -> list[int]:
    """The numbers of the lines with more than white space."""
    return [number for number, text in enumerate(lines) if text.strip()]


def meaning_text(line: str) -> str:
    """What of a line is scored by meaning: stripped, cut at ``MAX_LINE_CHARS``."""
    return line.strip()[:MAX_LINE_CHARS]


def query_terms(query: str) -> frozenset[str]:
    return frozenset(tokenize(query))


def term_lines(content: str, terms: frozenset[str]) -> dict[int, tuple[tuple[int, int], ...]]:
    """The best lines of ``content`` by the query's terms: {line number in the text (0-based): matched spans}."""
    # The chunk's distinct words that match, found once; a line none of them is in is skipped unread.
    matching = {word: hit for word in set(WORD.findall(content)) if (hit := terms.intersection(word_terms(word)))}
    if not matching:
        return {}
    scored = []
    for number, text in enumerate(content.split("\n")):
        if not any(word in text for word in matching):
            continue
        spans: list[tuple[int, int]] = []
        found: set[str] = set()
        for word in WORD.finditer(text[:MAX_LINE_CHARS]):
            matched = matching.get(word.group())
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
    split = [content.split("\n") for content in contents]
    asked: list[tuple[int, int]] = []  # (hit, line number) scored by meaning
    for position, lines in enumerate(split):
        if chosen[position]:
            continue
        candidates = non_blank(lines)
        if nearest is None:
            chosen[position] = {number: () for number in candidates[:MATCHED_LINES]}  # its first lines
        else:
            asked += [(position, number) for number in spread(candidates, NEAREST_PER_HIT)]
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
