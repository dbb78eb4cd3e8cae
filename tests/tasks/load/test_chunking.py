"""The pure chunkers: exact slices, definition and heading boundaries, the budget."""

from __future__ import annotations

import pytest

from ctxrag.tasks.load.chunking import (
    Piece,
    chunk_content,
    line_windows,
    paragraphs,
    split_code,
    split_lines,
    split_markdown,
    split_text,
)

PYTHON = '''"""A module docstring."""

import os


# A comment that belongs to greet.
def greet(name):
    return f"hello {name}"


@decorator
@other(option=1)
def decorated():
    return 1


class Thing:
    """A class."""

    def method(self):
        return 2
'''

RUST = """use std::fmt;

/// Documented struct.
#[derive(Debug)]
pub struct Point {
    x: i32,
}

impl Point {
    pub fn new() -> Self {
        Point { x: 0 }
    }
}

pub(crate) fn helper() {}
"""

MARKDOWN = """Intro text before any heading.

# Install

Run the installer.

## From source

Clone it:

```bash
# not a heading: a shell comment
make install
```

## From a wheel

pip install it.

# Usage

Use it.
"""


def joined(pieces: list[Piece]) -> str:
    return "".join(piece.content for piece in pieces)


def assert_blank_pieces_only_when_unmergeable(pieces: list[Piece], budget: int) -> None:
    """A whitespace-only piece survives only when joining it to a neighbour would break the budget."""
    sizes = [len(piece.content) for piece in pieces]
    for number, piece in enumerate(pieces):
        if not piece.content.strip():
            neighbours = sizes[max(number - 1, 0) : number] + sizes[number + 1 : number + 2]
            assert all(size + sizes[number] > budget for size in neighbours), (number, pieces)


def test_split_lines_keeps_newlines() -> None:
    for text in ["", "a", "a\n", "a\nb", "a\n\nb\n", "\n\n"]:
        assert "".join(split_lines(text)) == text


@pytest.mark.parametrize("budget", [1, 7, 40, 120, 1500])
@pytest.mark.parametrize("text", [PYTHON, RUST])
def test_code_pieces_are_exact_and_under_budget(text: str, budget: int) -> None:
    pieces = split_code(text, budget)
    assert joined(pieces) == text
    assert all(len(piece.content) <= budget for piece in pieces)
    assert_blank_pieces_only_when_unmergeable(pieces, budget)


@pytest.mark.parametrize("budget", [1, 10, 50, 200, 1500])
def test_markdown_pieces_are_exact_and_under_budget(budget: int) -> None:
    pieces = split_markdown(MARKDOWN, budget)
    assert joined(pieces) == MARKDOWN
    assert all(len(piece.content) <= budget for piece in pieces)


@pytest.mark.parametrize("budget", [1, 10, 50, 1500])
def test_text_pieces_are_exact_and_under_budget(budget: int) -> None:
    text = "\n\nFirst paragraph\nstill first.\n\n\nSecond one.\n\nThird one, a bit longer than the rest.\n\n"
    pieces = split_text(text, budget)
    assert joined(pieces) == text
    assert all(len(piece.content) <= budget for piece in pieces)
    assert_blank_pieces_only_when_unmergeable(pieces, budget)


def test_code_splits_at_definitions_with_comments_and_decorators_attached() -> None:
    pieces = split_code(PYTHON, budget=60)
    starts = [piece.content.lstrip("\n") for piece in pieces]
    assert any(start.startswith("# A comment that belongs to greet.\ndef greet") for start in starts)
    assert any(start.startswith("@decorator\n@other(option=1)\ndef decorated") for start in starts)
    assert any(start.startswith("class Thing:") for start in starts)
    assert not any(start.startswith("def decorated") for start in starts)


def test_code_merges_small_definitions_under_the_budget() -> None:
    assert [piece.content for piece in split_code(PYTHON)] == [PYTHON]


def test_rust_definitions_keep_doc_comments_and_attributes() -> None:
    pieces = split_code(RUST, budget=80)
    starts = [piece.content.lstrip("\n") for piece in pieces]
    assert any(start.startswith("/// Documented struct.\n#[derive(Debug)]\npub struct Point") for start in starts)
    assert any(start.startswith("impl Point") for start in starts)
    assert any(start.startswith("pub(crate) fn helper") for start in starts)


def test_huge_function_is_split_into_line_windows() -> None:
    body = "".join(f"    value_{n} = compute({n})\n" for n in range(300))
    text = f"def huge():\n{body}    return 0\n\n\ndef small():\n    return 1\n"
    pieces = split_code(text, budget=500)
    assert joined(pieces) == text
    assert len(pieces) > 10
    assert all(len(piece.content) <= 500 for piece in pieces)
    assert all(piece.content.endswith("\n") for piece in pieces)  # never split inside a line


def test_oversized_class_splits_at_its_methods() -> None:
    methods = "".join(f"    def method_{n}(self):\n        return {n}\n\n" for n in range(40))
    text = f'class Big:\n    """Doc."""\n\n{methods}'
    pieces = split_code(text, budget=200)
    assert joined(pieces) == text
    for piece in pieces[1:]:
        assert piece.content.lstrip("\n").startswith("    def method_")


def test_single_huge_line_is_hard_split() -> None:
    line = "x" * 4000
    for splitter in (split_code, split_text, split_markdown):
        pieces = splitter(line + "\n", 1500)
        assert joined(pieces) == line + "\n"
        assert [len(piece.content) for piece in pieces] == [1500, 1500, 1001]


def test_line_windows_prefer_blank_lines() -> None:
    lines = split_lines("a" * 30 + "\n" + "b" * 30 + "\n\n" + "c" * 30 + "\n")
    assert line_windows(lines, 80) == ["a" * 30 + "\n" + "b" * 30 + "\n\n", "c" * 30 + "\n"]


def test_empty_and_whitespace_input_give_no_pieces() -> None:
    for splitter in (split_code, split_text, split_markdown):
        assert splitter("", 100) == []
        assert splitter(" \n\n\t\n", 100) == []


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="budget"):
        split_text("x", 0)


def test_markdown_heading_paths_and_fences() -> None:
    pieces = split_markdown(MARKDOWN)
    assert [piece.heading for piece in pieces] == [
        "",
        "Install",
        "Install > From source",
        "Install > From a wheel",
        "Usage",
    ]
    from_source = pieces[2].content
    assert "# not a heading: a shell comment" in from_source
    assert from_source.startswith("## From source")


def test_markdown_heading_without_body_joins_the_next_section() -> None:
    text = "# Guide\n\n## Setup\n\nDo this.\n\n### Deep\n\nDetails ###.\n"
    pieces = split_markdown(text)
    assert [(piece.heading, piece.content.splitlines()[0]) for piece in pieces] == [
        ("Guide > Setup", "# Guide"),
        ("Guide > Setup > Deep", "### Deep"),
    ]
    assert joined(pieces) == text


def test_markdown_tilde_fence_and_closing_hashes() -> None:
    text = "~~~\n# inside\n~~~\n\n## Title ##\n\nbody\n"
    pieces = split_markdown(text)
    assert [piece.heading for piece in pieces] == ["", "Title"]
    assert pieces[0].content == "~~~\n# inside\n~~~\n\n"


def test_oversized_markdown_section_splits_at_paragraphs_not_inside_fences() -> None:
    fence = "```\n" + "line\n\n" * 10 + "```\n"
    paragraphs_text = "".join(f"Paragraph {n} " + "word " * 10 + "\n\n" for n in range(8))
    text = "# Big\n\n" + paragraphs_text + fence
    pieces = split_markdown(text, budget=150)
    assert joined(pieces) == text
    assert all(piece.heading == "Big" for piece in pieces)
    assert any(piece.content == fence for piece in pieces)  # the fence (<150 chars) stays whole
    assert all(len(piece.content) <= 150 for piece in pieces)


def test_paragraphs_attach_blank_lines_to_the_paragraph_before() -> None:
    assert paragraphs(split_lines("\na\nb\n\n\nc\n")) == ["\na\nb\n\n\n", "c\n"]


def test_chunk_content_dispatches_on_kind() -> None:
    assert chunk_content(MARKDOWN, "markdown")[1].heading == "Install"
    assert chunk_content("x = 1\n", "code") == [Piece("x = 1\n")]
    assert chunk_content("plain\n", "text") == [Piece("plain\n")]


FUZZ_LINES = [
    "",
    "   ",
    "def f(x):",
    "    return x",
    "class K:",
    "    def m(self):",
    "        pass",
    "@decorator",
    "# comment or heading",
    "## Sub heading",
    "```",
    "~~~~",
    "fn main() {",
    "}",
    "plain words in a sentence",
    "y" * 90,
    "\t\tindented with tabs",
    "a line with trailing spaces   ",
    "crlf line\r",
]


@pytest.mark.parametrize("seed", range(40))
def test_random_inputs_are_exact_and_under_budget(seed: int) -> None:
    import random

    rng = random.Random(seed)
    text = "\n".join(rng.choice(FUZZ_LINES) for _ in range(rng.randint(1, 120)))
    if rng.random() < 0.5:
        text += "\n"
    budget = rng.choice([5, 30, 80, 200, 1500])
    for splitter in (split_code, split_markdown, split_text):
        pieces = splitter(text, budget)
        assert joined(pieces) == (text if text.strip() else "")
        assert all(len(piece.content) <= budget for piece in pieces)
        assert_blank_pieces_only_when_unmergeable(pieces, budget)
