"""A file's opening doc comment, read off its syntax tree: Python's module docstring, the JSDoc/TSDoc block at the
top (``'use strict'`` and imports skipped), Go's package comment, Rust's ``//!`` lines, the Javadoc of a Java file's
class. Comment markers are taken off; "" separates blocks. Licence text is for the caller to drop
(``ctxrag.tasks.context.structure``): it does so the same way for every language.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

_MARKER = re.compile(r"^(?:/\*+!?|\*+(?!/)|//[/!]?|#+)\s?")
_FILE_TAG = re.compile(r"^@(?:file|fileoverview|overview)\b\s*")
_JS_SKIPPED = frozenset({"import_statement", "hash_bang_line", "empty_statement"})
_JAVA_TYPES = frozenset(
    {
        "class_declaration",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "annotation_type_declaration",
    }
)


def text_of(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def comment_lines(text: str) -> list[str]:
    """A comment's lines without their markers (``/**``, `` * ``, ``*/``, ``//``, ``///``, ``//!``, ``#``); JSDoc
    tag lines left out but for a file tag's text (``@fileoverview Helpers.`` -> ``Helpers.``)."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("*/"):
            line = line[:-2].rstrip()
        line = _MARKER.sub("", line).strip()
        if line.startswith("@"):
            if not _FILE_TAG.match(line):
                continue
            line = _FILE_TAG.sub("", line)
        lines.append(line)
    return lines


def _blocks(comments: list[Node]) -> list[list[Node]]:
    """Comments grouped into blocks: a comment starting on the line after the previous one's joins its block."""
    blocks: list[list[Node]] = []
    for comment in comments:
        if blocks and comment.start_point.row - last_row(blocks[-1][-1]) <= 1:
            blocks[-1].append(comment)
        else:
            blocks.append([comment])
    return blocks


def last_row(node: Node) -> int:
    """The last line ``node`` has text on (a node that ends with its line break ends on the line before)."""
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point.row else row


def _lines(blocks: list[list[Node]]) -> tuple[str, ...]:
    out: list[str] = []
    for block in blocks:
        out.append("")
        for comment in block:
            out.extend(comment_lines(text_of(comment)))
    return tuple(out)


def _python(root: Node) -> tuple[str, ...] | None:
    for child in root.named_children:
        if child.type == "comment":
            continue
        strings = (
            [part for part in child.named_children if part.type == "string"]
            if child.type == "expression_statement"
            else []
        )
        if len(strings) == 1 and child.named_child_count == 1:
            raw = text_of(strings[0]).lstrip("rRuUbBfF")
            quote = raw[:3] if raw[:3] in ('"""', "'''") else raw[:1]
            return tuple(inspect.cleandoc(raw[len(quote) : len(raw) - len(quote)]).splitlines())
        break
    return None


def _javascript(root: Node) -> tuple[str, ...] | None:
    comments: list[Node] = []
    for child in root.named_children:
        if child.type == "comment":
            if not text_of(child).startswith("/*!"):  # a bundle's or library's preserved licence banner
                comments.append(child)
        elif (
            child.type == "expression_statement"
            and child.named_child_count == 1
            and child.named_children[0].type == "string"
        ):
            continue  # 'use strict' and other directives
        elif child.type not in _JS_SKIPPED:
            break
    blocks = _blocks(comments)
    tagged = [
        block
        for block in blocks
        if any(
            _FILE_TAG.search(line) for c in block for line in (text.lstrip("/* ") for text in text_of(c).splitlines())
        )
    ]
    return _lines(tagged[:1] or blocks) if blocks else None


def _go(root: Node) -> tuple[str, ...] | None:
    children = root.named_children
    for index, child in enumerate(children):
        if child.type == "package_clause":
            block: list[Node] = []
            row = child.start_point.row
            for previous in reversed(children[:index]):
                if previous.type != "comment" or last_row(previous) != row - 1:
                    break
                block.insert(0, previous)
                row = previous.start_point.row
            return _lines([block]) if block else ()
    return None


def _rust(root: Node) -> tuple[str, ...] | None:
    inner = []
    for child in root.named_children:
        if child.type in ("line_comment", "block_comment"):
            if text_of(child).startswith(("//!", "/*!")):
                inner.append(child)
        elif child.type != "inner_attribute_item":
            break
    return _lines(_blocks(inner)) if inner else None


def _java(root: Node) -> tuple[str, ...] | None:
    for child in root.named_children:
        if child.type in _JAVA_TYPES:
            previous = child.prev_named_sibling
            if previous is not None and previous.type == "block_comment" and text_of(previous).startswith("/**"):
                return _lines([[previous]])
            return None
    return None


_RULES: dict[str, Callable[[Node], tuple[str, ...] | None]] = {
    "python": _python,
    "javascript": _javascript,
    "typescript": _javascript,
    "tsx": _javascript,
    "go": _go,
    "rust": _rust,
    "java": _java,
}


def opening_comment(root: Node, grammar: str) -> tuple[str, ...] | None:
    """The opening doc comment's lines ("" between blocks; () when the file has none where its language puts one),
    or None when ``grammar`` has no rule for it or the file has no such comment and another rule may find one."""
    rule = _RULES.get(grammar)
    return rule(root) if rule else None
