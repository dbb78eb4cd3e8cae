"""What ``ctxrag search`` prints for a person: the place first, then the matched lines numbered with the query's words
highlighted; a hit without matched lines shows its text's start, and per_file's other ranges follow as ``also``."""

from __future__ import annotations

import io

from rich.console import Console

from ctxrag.hits_view import show_answer
from ctxrag.tasks.common.hits import Hit, Location, MatchedLine, SearchAnswer


def hit(rank: int, matches: tuple[MatchedLine, ...], also: tuple[tuple[int, int], ...] = ()) -> Hit:
    return Hit(
        rank=rank,
        chunk_id=f"c{rank}",
        doc_id="tinyq/tasks.py",
        chunk_index=rank,
        score=1.0 / rank,
        content="def put(self, task):\n    retry with backoff\n",
        context="",
        ranks={"bm25": rank},
        location=Location(lines=(40, 71), symbol="SqliteStore.put"),
        matches=matches,
        also=also,
    )


def printed(answer: SearchAnswer, color: bool) -> str:
    out = Console(file=io.StringIO(), force_terminal=color, color_system="standard" if color else None, width=200)
    show_answer(out, answer)
    return out.file.getvalue()  # type: ignore[attr-defined]


def test_the_place_comes_first_then_the_numbered_lines_with_the_words_marked() -> None:
    answer = SearchAnswer(
        "tinyq",
        "v1",
        "hybrid-score",
        [
            hit(1, (MatchedLine(41, "    retry with backoff", ((4, 9), (15, 22))),), also=((90, 120),)),
            hit(2, ()),
        ],
    )
    lines = printed(answer, color=False).splitlines()
    assert lines[0].startswith("1. tinyq/tasks.py:40-71 SqliteStore.put  score ")
    assert lines[1] == "   41 │     retry with backoff"
    assert lines[2] == "   also: 90-120"
    assert lines[3].startswith("2. tinyq/tasks.py:40-71 SqliteStore.put")
    assert lines[4] == "   def put(self, task): retry with backoff"  # no matched lines: the text's start
    colored = printed(answer, color=True)
    assert "\x1b[1;33mretry\x1b[0m" in colored and "\x1b[1;33mbackoff\x1b[0m" in colored  # bold yellow
    assert (
        "\x1b[2m   41 │ \x1b[0m    \x1b[1;33mretry\x1b[0m with " in colored
    )  # the number dim, the line's own text not
    assert "\x1b[1;36mtinyq/tasks.py:40-71 SqliteStore.put\x1b[0m\x1b[2m  score " in colored


def test_an_empty_answer_prints_nothing() -> None:
    assert printed(SearchAnswer("tinyq", "v1", "bm25", []), color=False) == ""
