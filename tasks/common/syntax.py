"""A source file's outline from its syntax tree: its definitions, how they nest, the lines each spans, and its opening
doc comment. The chunker (``ctxrag.tasks.load.syntax``) cuts at the definitions; the structural contextualizer names
the ones that enclose a chunk.

Lines are 0-based and counted as ``ctxrag.tasks.load.chunking.split_lines`` counts them (by "\\n"). A file whose
language has no grammar (``ctxrag.tasks.common.grammars``), or whose tree is more than a little broken under every
grammar tried, has no outline: its callers fall back to the regex heuristics. A definition with a syntax error in it
is left out of an outline (where it ends is a guess); the ones inside it are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxrag.tasks.common.doc_comments import last_row, opening_comment
from ctxrag.tasks.common.grammars import GRAMMARS, Grammar, grammars_for, loaded, parser

if TYPE_CHECKING:
    from tree_sitter import Node

MAX_ERROR_SHARE = 0.05  # a tree with more of its bytes in syntax errors is not used (a C header's extern "C" { in
# an #ifdef is one small error; a file in another dialect is many)
MAX_HEADER = 120  # characters of a definition's header line kept
MAX_NAME = 80
_HEADER_END = re.compile(r"(?:\s|[{:(;]|=>?)+$")  # what a header line ends with before the body: " {", ":", " =>", " ="


@dataclass(frozen=True)
class Definition:
    """A definition: its name and header (``def area(self)``, ``impl Foo for Bar``); ``lead``, the first line of
    what goes with it (the comments, attributes and blank lines just before it); ``start``, ``header_line`` and
    ``end``, its first, its name's and its last line; ``parent``, the index of the definition around it (-1: none)."""

    name: str
    header: str
    lead: int
    start: int
    header_line: int
    end: int
    parent: int


@dataclass(frozen=True)
class Outline:
    """A parsed file: the grammar that read it, its definitions in order of their first line, and the lines of its
    opening doc comment ("" between blocks; None when the grammar has no rule for one)."""

    grammar: str
    definitions: tuple[Definition, ...]
    opening: tuple[str, ...] | None

    def children(self, parent: int) -> list[int]:
        """Indexes of the definitions directly inside definition ``parent`` (-1: the top level), in order."""
        return [index for index, definition in enumerate(self.definitions) if definition.parent == parent]

    def enclosing(self, first: int, last: int) -> list[Definition]:
        """The definitions around the code from line ``first`` to ``last``, outermost first: those that line
        ``first`` is in (its leading comments count), less any that the code shows whole and then goes past (the
        code is then beside it, not in it)."""
        chain: list[int] = []
        for index, definition in enumerate(self.definitions):
            if definition.lead > first:
                break
            if definition.end < first:
                continue
            while chain and not self._inside(index, chain[-1]):
                chain.pop()
            chain.append(index)
        while chain and self.definitions[chain[-1]].end < last and first <= self.definitions[chain[-1]].header_line:
            chain.pop()
        return [self.definitions[index] for index in chain]

    def _inside(self, index: int, ancestor: int) -> bool:
        while index >= 0:
            index = self.definitions[index].parent
            if index == ancestor:
                return True
        return False


def outline(text: str, path: str) -> Outline | None:
    """The outline of ``text``, the file at ``path`` (its name picks the grammar), or None: no grammar for its
    language, or syntax errors over more than ``MAX_ERROR_SHARE`` of it under each grammar tried (the first clean
    reading wins, else the least broken)."""
    source = text.encode("utf-8", "replace")
    best: tuple[float, str, Node] | None = None
    for name in grammars_for(path):
        root = parser(name).parse(source).root_node
        if not root.has_error:
            return _outline(source, name, root)
        share = _error_share(root, len(source))
        if share <= MAX_ERROR_SHARE and (best is None or share < best[0]):
            best = (share, name, root)
    return None if best is None else _outline(source, best[1], best[2])


def _error_share(node: Node, size: int) -> float:
    """The share of the file's bytes in syntax-error nodes (a missing token has none)."""
    pending, broken = [node], 0
    while pending:
        current = pending.pop()
        if current.type == "ERROR":
            broken += current.end_byte - current.start_byte
        elif current.has_error:
            pending.extend(current.children)
    return broken / max(size, 1)


def _outline(source: bytes, name: str, root: Node) -> Outline:
    from tree_sitter import QueryCursor

    grammar, ready = GRAMMARS[name], loaded(name)
    found: dict[tuple[int, int], tuple[Node, Node, Node]] = {}  # the definition's node (wrappers included) -> it, the
    # captured node and its name
    for pattern, captures in QueryCursor(ready.query).matches(root):
        inner, named = captures["definition"][0], captures["name"][0]
        node = inner
        while node.parent is not None and node.parent.type in grammar.wrappers:
            node = node.parent
        if (pattern in ready.top_level and node.parent != root) or node.has_error:  # an error: its extent is a guess
            continue
        found.setdefault((node.start_byte, node.end_byte), (node, inner, named))
    lines = source.split(b"\n")
    definitions: list[Definition] = []
    open_ends: list[tuple[int, int]] = []  # (end byte, index) of the definitions open at the current one
    for (_start, end), (node, inner, named) in sorted(found.items(), key=lambda item: (item[0][0], -item[0][1])):
        while open_ends and open_ends[-1][0] < end:
            open_ends.pop()
        parent = open_ends[-1][1] if open_ends else -1
        definitions.append(
            Definition(
                name=_name(named),
                header=_header(source, node, inner, named),
                lead=_lead(node, lines, grammar),
                start=node.start_point.row,
                header_line=named.start_point.row,
                end=last_row(node),
                parent=parent,
            )
        )
        open_ends.append((end, len(definitions) - 1))
    return Outline(name, tuple(definitions), opening_comment(root, name))


def _name(node: Node) -> str:
    text = (node.text or b"").decode("utf-8", "replace").strip("'\"` ")
    return text.rsplit("::", 1)[-1].split("<", 1)[0][:MAX_NAME]


def _header(source: bytes, node: Node, inner: Node, named: Node) -> str:
    """The definition's text up to the end of its name's line or the start of its body, without the decorator,
    annotation and attribute lines before it."""
    end = source.find(b"\n", named.end_byte)
    end = min(len(source) if end < 0 else end, node.end_byte, _body_start(inner) or node.end_byte)
    lines = source[node.start_byte : max(end, named.end_byte)].decode("utf-8", "replace").splitlines()
    while len(lines) > 1 and lines[0].lstrip().startswith(("@", "#[")):
        lines.pop(0)
    text = " ".join(" ".join(lines).split())
    text = text if len(text) <= MAX_HEADER else text[: MAX_HEADER - 1].rsplit(" ", 1)[0] + "…"
    return _HEADER_END.sub("", text) or text


def _body_start(node: Node) -> int | None:
    """Where the definition's body or value starts (a function's, or that of the function a constant holds)."""
    for _ in range(4):
        body = node.child_by_field_name("body")
        if body is not None:
            return body.start_byte
        value = node.child_by_field_name("value") or node.child_by_field_name("right")
        if value is not None and value.child_by_field_name("body") is None:
            return value.start_byte
        following = value or (node.named_children[0] if node.named_child_count else None)
        if following is None:
            return None
        node = following
    return None


def _lead(node: Node, lines: list[bytes], grammar: Grammar) -> int:
    """The first line that goes with ``node``: the comments (or attributes) on lines of their own just before it,
    and the blank lines before those, never past the code before it."""
    lead = node.start_point.row
    previous = node.prev_named_sibling
    if (
        previous is None
        and node.parent is not None
        and node.parent.parent is not None
        and node.parent.start_byte == node.start_byte
    ):
        previous = node.parent.prev_named_sibling  # a body that starts at its first statement (Python's): the comments
        # before that statement are the body's siblings
    while (
        previous is not None
        and previous.type in grammar.prefixes
        and last_row(previous) < lead
        and _own_line(previous, lines)
    ):
        lead = previous.start_point.row
        previous = previous.prev_named_sibling
    if previous is not None:
        floor = last_row(previous) + 1
    elif node.parent is not None and node.parent.parent is not None:  # inside a body: not above its opening line
        floor = min(node.parent.start_point.row + 1, lead)
    else:
        floor = 0
    while lead > floor and not lines[lead - 1].strip():
        lead -= 1
    return lead


def _own_line(node: Node, lines: list[bytes]) -> bool:
    row, column = node.start_point
    return not lines[row][:column].strip()
