"""Structure read off a document without an LLM: its leading comment, the names it defines, headings.

Regex heuristics over many languages (Rust, Python, C/C++, Java, Go, JavaScript/TypeScript): good enough to situate a
chunk, not a parser. A file with a syntax tree (``ctxrag.tasks.common.syntax``) is read off the tree instead; the
heuristics serve the others, and chunks' own texts (``defined_names``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from ctxrag.storage.tokenize import stopwords
from ctxrag.tasks.common.syntax import Outline

_MODIFIERS = r"(?:(?:pub(?:\([^)]*\))?|export|default|async|unsafe|static|public|private|protected|final|abstract|inline|extern|virtual|override|sealed|internal|open|data)\s+)*"
_KEYWORD_DEF = re.compile(
    rf"^(?P<indent>[ \t]*){_MODIFIERS}(?P<kind>(?:fn|struct|enum|trait|impl|class|def|func|function|interface|type|mod|namespace|union)\b|macro_rules!)[ \t]*(?P<rest>[^\n]*)$",
    re.M,
)
# A C/C++/Java/C#-style function or method header: `Type name(args) {` (control statements excluded).
_CALL_DEF = re.compile(
    r"^(?P<indent>[ \t]*)(?!(?:if|for|while|switch|return|catch|else|new|do|case|throw|delete|sizeof|elif|assert|raise|await|yield|match)\b)"
    r"(?:[A-Za-z_][\w:<>,\[\]*&~]*[ \t]+)+[*&]*(?P<name>[A-Za-z_~][\w:~]*)[ \t]*\([^;=\"\n]*$",
    re.M,
)
_IDENT = re.compile(r"[A-Za-z_][\w]*")
_LICENSE = re.compile(r"licen[sc]e|copyright|spdx|all rights reserved", re.I)
_COMMENT_LINE = re.compile(
    r"^\s*(?://[/!]?|#(?![!\[]|include|pragma|define|if|endif|else|undef)|/\*+|\*/?|--|;;)\s?(?P<text>.*?)\s*(?:\*/)?$"
)


@dataclass(frozen=True)
class Definition:
    """A definition header found in a document: where it starts, how deep, its name and its header line."""

    offset: int
    indent: int
    name: str
    header: str


def find_definitions(text: str) -> list[Definition]:
    """Definition headers of a source file, in order of appearance."""
    found: dict[int, Definition] = {}
    for match in _KEYWORD_DEF.finditer(text):
        rest = match.group("rest")
        if match.group("kind") == "func":  # Go method: `func (s *Server) Start()` is named Start
            rest = re.sub(r"^\([^)]*\)\s*", "", rest)
        name_match = _IDENT.search(rest.split("(")[0]) if match.group("kind") != "impl" else None
        name = name_match.group(0) if name_match else _impl_name(rest)
        if not name:
            continue
        header = _header(match.group(0))
        found[match.start()] = Definition(match.start(), _width(match.group("indent")), name, header)
    for match in _CALL_DEF.finditer(text):
        if match.start() in found:
            continue
        name = match.group("name").split("::")[-1]
        found[match.start()] = Definition(match.start(), _width(match.group("indent")), name, _header(match.group(0)))
    return [found[offset] for offset in sorted(found)]


MIN_NAME = 3  # shorter defined names (i, fn, _x) would match too many questions


def defined_names(text: str) -> list[str]:
    """The names ``text``'s own definition headers define, lowercased, once each, in order of appearance."""
    return list(dict.fromkeys(d.name.lower() for d in find_definitions(text) if len(d.name.strip("_")) >= MIN_NAME))


def mentioned_names(question: str) -> set[str]:
    """The words of a question that could name a definition: identifiers, lowercased, stop words left out."""
    return {word.lower() for word in _IDENT.findall(question) if len(word.strip("_")) >= MIN_NAME} - stopwords()


def leading_comment(text: str, limit: int = 300) -> str:
    """The file's opening comment or docstring, license boilerplate left out."""
    lines: list[str] = []  # "" separates blocks: a blank line, or a change of comment style
    style = ""
    in_docstring = False

    def add(line: str, line_style: str) -> None:
        nonlocal style
        if line_style != style:
            lines.append("")
            style = line_style
        lines.append(line)

    for raw in text.splitlines()[:60]:
        stripped = raw.strip()
        if stripped.startswith(('"""', "'''")):
            body = stripped.strip("\"'").strip()
            add(body, "docstring")
            if in_docstring or (stripped.count('"""') + stripped.count("'''")) >= 2:
                if in_docstring:
                    break
                continue
            in_docstring = True
            continue
        if in_docstring or not stripped:
            add(stripped, style)
            continue
        comment = _COMMENT_LINE.match(raw)
        if comment:
            add(comment.group("text"), stripped[:3].rstrip(" ") if stripped.startswith("//") else stripped[:1])
        elif not stripped.startswith(("#!", "#pragma", "#include", "import ", "from ", "package ", "use ")):
            break
    return _clip(" ".join(_without_license(lines)), limit)


def opening_text(tree: Outline, text: str, limit: int = 300) -> str:
    """The file's opening doc comment as its syntax tree gives it (licence text left out), or, for a grammar with no
    rule for one, ``leading_comment``."""
    if tree.opening is None:
        return leading_comment(text, limit)
    return _clip(" ".join(_without_license(list(tree.opening))), limit)


def chunk_lines(text: str, offsets: list[int], pieces: list[str]) -> list[tuple[int, int] | None]:
    """Each piece's first and last line with code (0-based) in ``text``, from where it starts (-1: not found)."""
    ends = list(accumulate(len(line) + 1 for line in text.split("\n")))  # one past each line's "\n"
    found: list[tuple[int, int] | None] = []
    for offset, piece in zip(offsets, pieces):
        if offset < 0 or not piece.strip():
            found.append(None)
            continue
        first = offset + len(piece) - len(piece.lstrip())
        last = offset + len(piece.rstrip()) - 1
        found.append((bisect_right(ends, first), bisect_right(ends, last)))
    return found


def _without_license(lines: list[str]) -> list[str]:
    """Drop license boilerplate: a whole block (blank-line separated) of 3+ lines that mentions it, else the lines."""
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            blocks[-1].append(line.strip())
        elif blocks[-1]:
            blocks.append([])
    kept: list[str] = []
    for block in blocks:
        if len(block) >= 3 and any(_LICENSE.search(line) for line in block):
            continue
        kept.extend(line for line in block if not _LICENSE.search(line))
    return kept


def enclosing_definitions(definitions: list[Definition], offset: int, indent: int | None = None) -> list[Definition]:
    """The chain of definitions open at ``offset`` (a definition starting there included), outermost first.

    ``indent`` is the indentation of the code at ``offset``: definitions that started earlier at that depth or deeper
    are closed siblings, not enclosing ones.
    """
    chain: list[Definition] = []
    for definition in definitions:
        if definition.offset > offset:
            break
        while chain and chain[-1].indent >= definition.indent:
            chain.pop()
        chain.append(definition)
    if indent is not None:
        while chain and chain[-1].offset < offset and chain[-1].indent >= indent:
            chain.pop()
    return chain


def first_code_position(text: str, start: int) -> tuple[int, int]:
    """Offset of the first non-blank character at or after ``start``, and the indentation of its line."""
    position = start
    while position < len(text) and text[position].isspace():
        position += 1
    line_start = text.rfind("\n", 0, position) + 1
    return position, _width(text[line_start:position])


def url_path_words(link: str) -> str:
    """``https://host/en/docs/build-with-claude/tool-use#x`` -> ``build with claude > tool use``."""
    address = link.split("#", 1)[0].split("://", 1)[-1]
    path = address.split("/", 1)[1] if "/" in address else ""
    segments = [s for s in path.split("/") if s and s not in {"en", "docs", "api"}]
    return " > ".join(s.replace("-", " ").replace("_", " ") for s in segments)


def _impl_name(rest: str) -> str:
    rest = re.sub(r"^<[^>]*>\s*", "", rest)
    target = rest.split(" for ", 1)[-1]
    match = _IDENT.search(target)
    return match.group(0) if match else ""


def _header(line: str) -> str:
    return _clip(line.strip().rstrip("{:").strip(), 120)


def _width(indent: str) -> int:
    return len(indent.expandtabs(4))


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def chunk_offsets(content: str, pieces: list[str]) -> list[int]:
    """Where each piece starts in ``content`` (-1 when not found verbatim); pieces are searched in order."""
    offsets, cursor = [], 0
    for piece in pieces:
        position = content.find(piece, cursor)
        if position < 0:
            position = content.find(piece)
        offsets.append(position)
        if position >= 0:
            cursor = position + 1
    return offsets
