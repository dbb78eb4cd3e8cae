"""A hit's matched lines: the query's terms found as BM25 finds them, marked; else the lines nearest its meaning."""

from __future__ import annotations

import pytest

from ctxrag.tasks.common.hits import MatchedLine
from ctxrag.tasks.retrieval import matches
from ctxrag.tasks.retrieval.matches import MATCHED_LINES, NEAREST_PER_HIT, matched_lines

CODE = """class RetryPolicy:
    '''Exponential backoff.'''

    def delay_for(self, attempt: int) -> float:
        return self.base_delay * self.factor ** attempt

    def parseHeader(self, raw):
        return raw.split(":")
"""


def test_the_lines_with_the_most_query_terms_are_marked_where_the_words_are() -> None:
    (found,) = matched_lines([CODE], [17], "how are retries delayed? parse_header")
    assert [line.line for line in found] == [17, 20, 23]  # in text order, numbered in the source
    retry, delay, header = found
    assert retry == MatchedLine(17, "class RetryPolicy:", ((6, 17),))  # "retries" -> retri <- RetryPolicy's part
    assert delay.text[slice(*delay.spans[0])] == "delay_for"  # "delayed" stems to delay
    assert header.text[slice(*header.spans[0])] == "parseHeader"  # parse_header and parseHeader: the same parts


def test_at_most_three_lines_and_no_numbers_where_the_source_lines_are_unknown() -> None:
    text = "\n".join(f"retry {number}" for number in range(10))
    (found,) = matched_lines([text], [None], "retry")
    assert len(found) == MATCHED_LINES and all(line.line is None for line in found)
    assert [line.text for line in found] == ["retry 0", "retry 1", "retry 2"]


def test_a_hit_without_a_term_gets_the_lines_nearest_the_query_s_meaning_all_hits_in_one_call() -> None:
    asked: list[list[str]] = []

    def nearest(texts: list[str]) -> list[float]:
        asked.append(texts)
        return [1.0 if "return" in text else 0.0 for text in texts]

    hits = [CODE] * 6  # none holds a term of the query
    found = matched_lines(hits, [1] * 6, "zanzibar quux", nearest)
    candidates = sum(1 for line in CODE.split("\n") if line.strip())
    assert len(asked) == 1 and len(asked[0]) == 6 * candidates  # one call for every line of every hit
    for lines in found:  # the two lines the scorer likes, and the earliest of the rest
        assert [line.line for line in lines] == [1, 5, 8] and all(line.spans == () for line in lines)


def test_a_long_chunk_s_lines_scored_by_meaning_are_spread_over_it() -> None:
    asked: list[list[str]] = []
    long_chunk = "\n".join(f"line {number}" for number in range(1000))
    matched_lines([long_chunk], [1], "zanzibar", lambda texts: asked.append(texts) or [0.0] * len(texts))
    (texts,) = asked
    assert len(texts) == NEAREST_PER_HIT and texts[0] == "line 0" and texts[-1] == "line 999"


def test_without_a_scorer_a_hit_without_a_term_shows_its_first_lines() -> None:
    assert matched_lines([CODE], [1], "zanzibar") == [tuple(MatchedLine(n, CODE.split("\n")[n - 1]) for n in (1, 2, 4))]


def test_warm_works_out_the_words_terms_and_the_meaning_lines_pieces_within_that_cache_s_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ctxrag.storage import tokenize

    split: list[str] = []
    long_chunk = "\n".join(f"line {number}" for number in range(100))
    tokenize.word_terms.cache_clear()
    matches.warm([CODE, long_chunk, "a\n\n  b  "], split.append, most_pieces=20)
    code_lines = [line.strip() for line in CODE.split("\n") if line.strip()]
    assert split == [*code_lines, "a", "b"]  # the long chunk's 64 lines would pass 20: none of them split
    assert tokenize.word_terms.cache_info().currsize == len(
        set(tokenize.WORD.findall(" ".join([CODE, long_chunk, "a b"])))
    )
