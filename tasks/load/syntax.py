"""Code chunked on its syntax tree: cut at definitions (``ctxrag.tasks.common.syntax``), under the character budget
and with the invariant of ``chunking`` (pieces are exact slices that join back to the file; whitespace goes with a
neighbour). A file with no outline (no grammar for its language, or too many syntax errors), or of a language in
``grammars.REGEX_BY_CHOICE``, is cut by ``chunking.split_code``.
"""

from __future__ import annotations

from ctxrag.tasks.common.grammars import regex_by_choice
from ctxrag.tasks.common.syntax import Outline, outline
from ctxrag.tasks.load.chunking import (
    DEFAULT_BUDGET,
    Piece,
    absorb_blank,
    chunk_content,
    line_windows,
    pack,
    split_code,
    split_lines,
)


def split_tree(text: str, tree: Outline, budget: int = DEFAULT_BUDGET) -> list[Piece]:
    """Split source code at its top-level definitions (each with the comments, attributes and blank lines before
    it), merge consecutive segments under ``budget``; an oversized segment splits at the definitions inside its
    definition, then into line windows."""
    if budget < 1:
        raise ValueError(f"budget must be a positive number of characters, got {budget}")
    if not text.strip():
        return []
    lines = split_lines(text)
    units = _units(lines, 0, len(lines), tree, tree.children(-1), budget)
    return absorb_blank([Piece(content) for content in pack(units, budget)], budget)


def _units(lines: list[str], begin: int, end: int, tree: Outline, siblings: list[int], budget: int) -> list[str]:
    """Lines ``begin`` to ``end`` cut where each of ``siblings`` (definitions) leads; every unit fits ``budget``."""
    starts, owners = [begin], [-1]  # owners: the definition each segment starts with (-1: none)
    for index in siblings:
        lead = tree.definitions[index].lead
        if starts[-1] < lead < end:
            starts.append(lead)
            owners.append(index)
        elif lead == starts[-1] and owners[-1] == -1 and lead == begin:
            owners[-1] = index
    units: list[str] = []
    for first, last, owner in zip(starts, [*starts[1:], end], owners):
        segment = lines[first:last]
        text = "".join(segment)
        if len(text) <= budget:
            units.append(text)
            continue
        inner = tree.children(owner) if owner >= 0 else []
        if any(first < tree.definitions[index].lead < last for index in inner):
            units.extend(_units(lines, first, last, tree, inner, budget))
        else:
            units.extend(line_windows(segment, budget))
    return units


def chunk_file(text: str, kind: str, path: str, budget: int = DEFAULT_BUDGET) -> tuple[list[Piece], bool]:
    """The pieces of the file at ``path`` (``chunking.chunk_content`` for prose), and whether it is code that fell
    back to the regex chunker (no grammar for its language, or too many syntax errors), not by choice."""
    if kind != "code":
        return chunk_content(text, kind, budget), False
    if regex_by_choice(path):
        return split_code(text, budget), False
    tree = outline(text, path)
    if tree is None:
        return split_code(text, budget), True
    return split_tree(text, tree, budget), False
