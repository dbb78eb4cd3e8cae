"""Pure chunkers for code, Markdown and plain text, under a character budget.

Every chunker returns pieces whose contents, concatenated in order, give back the input exactly: a piece is an exact
slice. Whitespace is attached to a neighbour (blank lines before a definition or a paragraph go with it, trailing ones
with the last piece), so a whitespace-only piece can only appear when a run of whitespace alone exceeds the budget;
callers may drop such pieces. Whitespace-only input gives no pieces.
"""

from __future__ import annotations

import re
from typing import NamedTuple

DEFAULT_BUDGET = 1500

_MODIFIERS = (
    r"(?:(?:pub(?:\([^)]*\))?|export|default|async|unsafe|extern(?:\s+\"[^\"]*\")?|const|static|public|private|"
    r"protected|internal|final|abstract|sealed|open|override|virtual|inline|data|partial)\s+)*"
)
# A line (indentation removed) that starts a definition, at any level.
_DEFINITION = re.compile(
    _MODIFIERS
    + r"(?:(?:def|class|fn|impl|struct|enum|trait|mod|union|func|function|interface|object|fun|module|record|"
    r"namespace)\b|macro_rules!)"
    # Java/C#-like methods: at least one modifier, a return type, a name and "(".
    r"|(?:(?:public|private|protected|internal|static|final|abstract|override|virtual|synchronized)\s+)+"
    r"[\w<>\[\],.?]+\s+\w+\s*\("
)
# Definitions recognised at the top level only (inside bodies these are statements).
_TOP_LEVEL = re.compile(r"(?:export\s+)?(?:type|const|let|var|static)\s+\w")
# C-like function signatures at the top level: "type name(" with no ";" on the line.
_C_SIGNATURE = re.compile(
    r"(?!(?:if|for|while|switch|return|else|do|case|raise|assert|await|yield|from|import|print|del|not|new|throw|"
    r"delete|goto|sizeof|with|elif|except)\b)[A-Za-z_][\w:<>,*&\s]*[\s*&][*&]*[A-Za-z_~][\w:~]*\s*\([^;]*$"
)
_C_SIGNATURE_MAX = 200  # longer lines are not tried against the signature pattern
# Lines that belong to the definition after them: comments, decorators, attributes.
_PREFIX = re.compile(r"(?:#|//|/\*|\*|--|@)")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


class Piece(NamedTuple):
    """One chunk's exact text and, for Markdown, its heading path ("Install > From source")."""

    content: str
    heading: str = ""


def split_lines(text: str) -> list[str]:
    """Lines with their "\\n" kept, so ``"".join(split_lines(text)) == text``."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def _blank(line: str) -> bool:
    return not line.strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _check_budget(budget: int) -> None:
    if budget < 1:
        raise ValueError(f"budget must be a positive number of characters, got {budget}")


# --- packing -----------------------------------------------------------------------------------------------------


def line_windows(lines: list[str], budget: int) -> list[str]:
    """Greedy windows of whole lines under ``budget``; a full window breaks at its last blank line when that keeps
    at least half of it, and a single line over ``budget`` is hard-split into ``budget``-sized slices."""
    windows: list[str] = []
    current: list[str] = []
    size = 0  # characters in current
    for line in lines:
        if len(line) > budget:
            windows.extend(filter(None, ["".join(current)]))
            windows.extend(line[start : start + budget] for start in range(0, len(line), budget))
            current, size = [], 0
            continue
        while current and size + len(line) > budget:
            cut = max((i + 1 for i, kept in enumerate(current) if _blank(kept)), default=0)
            head = "".join(current[:cut])
            if cut < len(current) and head.strip() and 2 * len(head) >= size:
                windows.append(head)
                current, size = current[cut:], size - len(head)
            else:
                windows.append("".join(current))
                current, size = [], 0
        current.append(line)
        size += len(line)
    windows.extend(filter(None, ["".join(current)]))
    return windows


def pack(units: list[str], budget: int) -> list[str]:
    """Greedily merge consecutive ``units`` while they fit ``budget``; a unit over ``budget`` is cut into line
    windows, and its last window may merge with what follows."""
    out: list[str] = []
    current = ""
    for unit in units:
        if len(unit) > budget:
            parts = line_windows(split_lines(unit), budget)
            out.extend(filter(None, [current, *parts[:-1]]))
            current = parts[-1] if parts else ""
        elif len(current) + len(unit) <= budget:
            current += unit
        else:
            out.append(current)
            current = unit
    out.extend(filter(None, [current]))
    return out


def absorb_blank(pieces: list[Piece], budget: int) -> list[Piece]:
    """Merge each whitespace-only piece into the next (or else the previous) piece when the result fits ``budget``,
    keeping that piece's heading; one that fits neither stays as it is."""
    out: list[Piece] = []
    carry: Piece | None = None
    for piece in pieces:
        if carry and len(carry.content) + len(piece.content) <= budget:
            piece = Piece(carry.content + piece.content, piece.heading)
        elif carry:
            _append_back(out, carry, budget)
        carry = None
        if piece.content.strip():
            out.append(piece)
        else:
            carry = piece
    if carry:
        _append_back(out, carry, budget)
    return out


def _append_back(out: list[Piece], blank: Piece, budget: int) -> None:
    if out and len(out[-1].content) + len(blank.content) <= budget:
        out[-1] = Piece(out[-1].content + blank.content, out[-1].heading)
    else:
        out.append(blank)


# --- code ----------------------------------------------------------------------------------------------------------


def _is_definition(line: str, indent: int) -> bool:
    if _blank(line) or _indent(line) != indent:
        return False
    stripped = line.strip()
    if _DEFINITION.match(stripped):
        return True
    if indent:
        return False
    return bool(_TOP_LEVEL.match(stripped)) or (
        "(" in stripped and len(stripped) <= _C_SIGNATURE_MAX and bool(_C_SIGNATURE.match(stripped))
    )


def _segment_starts(lines: list[str], indent: int) -> list[int]:
    """Start line of each segment: definitions at ``indent``, moved up over the blank, comment and decorator lines
    just before them (never past the previous definition)."""
    starts: list[int] = [0]
    floor = 0
    for number, line in enumerate(lines):
        if number == 0 or not _is_definition(line, indent):
            continue
        start = number
        while start - 1 > floor and (
            _blank(lines[start - 1])
            or (_indent(lines[start - 1]) <= indent + 1 and _PREFIX.match(lines[start - 1].lstrip()))
        ):
            start -= 1
        if start > starts[-1]:
            starts.append(start)
        floor = number
    return starts


def _code_units(lines: list[str], indent: int, budget: int) -> list[str]:
    """Segments of ``lines`` at definition starts of ``indent``; oversized ones split at nested definitions, else
    into line windows. Every unit fits ``budget``."""
    starts = _segment_starts(lines, indent)
    units: list[str] = []
    for begin, end in zip(starts, [*starts[1:], len(lines)]):
        segment = lines[begin:end]
        text = "".join(segment)
        if len(text) <= budget:
            units.append(text)
            continue
        levels = sorted(
            {_indent(line) for line in segment[1:] if _indent(line) > indent and _is_definition(line, _indent(line))}
        )
        if levels and len(_segment_starts(segment, levels[0])) > 1:
            units.extend(_code_units(segment, levels[0], budget))
        else:
            units.extend(line_windows(segment, budget))
    return units


def split_code(text: str, budget: int = DEFAULT_BUDGET) -> list[Piece]:
    """Split source code at top-level definitions (leading comments, blank lines and decorators go with the
    definition), merge consecutive segments under ``budget``; oversized segments split at nested definitions, then
    into line windows."""
    _check_budget(budget)
    if not text.strip():
        return []
    units = _code_units(split_lines(text), 0, budget)
    return absorb_blank([Piece(content) for content in pack(units, budget)], budget)


# --- text and Markdown -------------------------------------------------------------------------------------------


def _fence_after(line: str, fence: str | None) -> str | None:
    """The open fence (its marker, e.g. "```") after ``line``, given the fence open before it."""
    match = _FENCE.match(line)
    if match is None:
        return fence
    marker = match.group(1)
    if fence is None:
        return marker
    closes = marker[0] == fence[0] and len(marker) >= len(fence) and not line[match.end() :].strip()
    return None if closes else fence


def paragraphs(lines: list[str], fenced: bool = False) -> list[str]:
    """Paragraph units: non-blank lines plus the blank lines after them (leading blank lines go with the first).
    With ``fenced``, blank lines inside ``` or ~~~ fences do not end a paragraph."""
    units: list[str] = []
    current: list[str] = []
    fence: str | None = None
    previous_blank = False
    for line in lines:
        blank = _blank(line) and fence is None
        if not blank and previous_blank and any(not _blank(kept) for kept in current):
            units.append("".join(current))
            current = []
        current.append(line)
        if fenced:
            fence = _fence_after(line, fence)
        previous_blank = blank
    units.extend(filter(None, ["".join(current)]))
    return units


def split_text(text: str, budget: int = DEFAULT_BUDGET) -> list[Piece]:
    """Plain text: paragraphs merged greedily under ``budget``; oversized paragraphs go into line windows."""
    _check_budget(budget)
    if not text.strip():
        return []
    return absorb_blank([Piece(content) for content in pack(paragraphs(split_lines(text)), budget)], budget)


def _sections(lines: list[str]) -> list[tuple[list[str], str, bool]]:
    """(lines, heading path, has body) per ATX-heading section, ignoring "#" lines inside fences."""
    sections: list[tuple[list[str], str, bool]] = []
    stack: list[tuple[int, str]] = []
    current: list[str] = []
    path = ""
    body_from = 0  # 1 once the section starts with its heading line
    fence: str | None = None
    for line in lines:
        match = _HEADING.match(line.rstrip()) if fence is None else None
        if match:
            if current:
                sections.append((current, path, any(not _blank(kept) for kept in current[body_from:])))
            level = len(match.group(1))
            stack = [entry for entry in stack if entry[0] < level] + [(level, (match.group(2) or "").strip())]
            path = " > ".join(title for _, title in stack if title)
            current, body_from = [line], 1
        else:
            current.append(line)
        fence = _fence_after(line, fence)
    sections.append((current, path, any(not _blank(kept) for kept in current[body_from:])))
    return sections


def split_markdown(text: str, budget: int = DEFAULT_BUDGET) -> list[Piece]:
    """Markdown: one piece per ATX-heading section, headed by its heading path; a heading with no body joins the next
    section; sections over ``budget`` split at paragraphs (never inside fences), then line windows."""
    _check_budget(budget)
    if not text.strip():
        return []
    pieces: list[Piece] = []
    pending = ""
    sections = _sections(split_lines(text))
    for number, (lines, path, has_body) in enumerate(sections):
        section = pending + "".join(lines)
        if not has_body and number + 1 < len(sections):
            pending = section
            continue
        pending = ""
        units = [section] if len(section) <= budget else pack(paragraphs(split_lines(section), fenced=True), budget)
        pieces.extend(Piece(content, path) for content in units)
    return absorb_blank(pieces, budget)


def chunk_content(text: str, kind: str, budget: int = DEFAULT_BUDGET) -> list[Piece]:
    """Dispatch on a document kind: "code", "markdown", anything else as plain text."""
    if kind == "code":
        return split_code(text, budget)
    if kind == "markdown":
        return split_markdown(text, budget)
    return split_text(text, budget)
