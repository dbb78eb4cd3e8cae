"""How ``ctxrag search`` prints an answer for a person: each hit's place first (``path:first-last symbol``, which a
terminal or an editor opens), then its matched lines with their numbers and the query's words highlighted."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ctxrag.tasks.common.display import figure
from ctxrag.tasks.common.hits import Hit, SearchAnswer

SNIPPET_CHARS = 160  # a hit without matched lines shows this much of its text


def show_answer(out: Console, answer: SearchAnswer) -> None:
    """Every hit: its rank, place, score and retrievers, then its matched lines (one print: rich's cost is per call)."""
    width = max((len(str(line.line)) for hit in answer for line in hit.matches if line.line is not None), default=1)
    shown: list[Text] = []
    for hit in answer:
        shown.append(_heading(hit))
        shown.extend(_line(line.line, line.text, line.spans, width) for line in hit.matches)
        if not hit.matches:
            shown.append(Text("   " + " ".join(hit.content.split())[:SNIPPET_CHARS], style="dim"))
        if hit.also:
            shown.append(Text("   also: " + ", ".join(f"{first}-{last}" for first, last in hit.also), style="dim"))
    if shown:
        out.print(Text("\n").join(shown), highlight=False)


def _heading(hit: Hit) -> Text:
    heading = Text()  # each part styled alone: a Text's own style would cover every part appended to it
    heading.append(f"{hit.rank}. ", style="bold")
    heading.append(hit.place, style="bold cyan")
    heading.append(f"  score {figure(hit.score, 'score')}  {', '.join(hit.found_by)}", style="dim")
    return heading


def _line(number: int | None, text: str, spans: tuple[tuple[int, int], ...], width: int) -> Text:
    shown = Text()
    shown.append(f"   {number if number is not None else '':>{width}} │ ", style="dim")
    body = Text(text.rstrip())
    for start, end in spans:
        body.stylize("bold yellow", start, end)
    return shown.append_text(body)
