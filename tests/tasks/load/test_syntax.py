"""The syntax-tree chunker: exact slices under the budget, cuts at definitions with their comments, and the regex
chunker only where there is no tree."""

from __future__ import annotations

import random

import pytest

from ctxrag.tasks.common.syntax import Outline, outline
from ctxrag.tasks.load.chunking import Piece, split_code
from ctxrag.tasks.load.syntax import chunk_file, split_tree
from tests.tasks.load.test_chunking import assert_blank_pieces_only_when_unmergeable

SOURCES = {
    "shapes.py": '"""Shapes."""\n\nimport math\n\n\n# The unit circle.\nclass Circle:\n    """A circle."""\n\n'
    "    @property\n    def area(self):\n        return math.pi\n\n    def scaled(self, k):\n"
    "        return k * self.area\n\n\ndef unit():\n    return Circle()\n",
    "format.js": "'use strict';\n/** Formatting. */\nconst isThing = (v) => v != null;\n\nexport const money = function (v) {\n"
    "  return v.toFixed(2);\n};\n\nexport default cond && function named(a) {\n  return a;\n};\n\n"
    "export class Fmt {\n  // Pads.\n  pad(s) {\n    return s.padStart(2);\n  }\n}\n",
    "view.tsx": "export interface Props { name: string }\n\nexport const View = ({ name }: Props) => (\n"
    '  <div className="view">{name}</div>\n);\n\nexport function helper(n: number): string {\n  return String(n);\n}\n',
    "server.go": "// Package server serves.\npackage server\n\n// Server serves.\ntype Server struct {\n\taddr string\n}\n\n"
    "// Start starts it.\nfunc (s *Server) Start() error {\n\treturn nil\n}\n",
    "Registry.java": "package p;\n\n/** Registry. */\npublic class Registry {\n    /** Counts. */\n    @Override\n"
    "    public int size() {\n        return 0;\n    }\n\n    public void clear() {\n    }\n}\n",
    "lib.rs": "//! Bars.\nuse std::fmt;\n\n/// A bar.\n#[derive(Debug)]\npub struct Bar;\n\nimpl Foo for Bar {\n"
    "    fn go(&self) -> i32 {\n        1\n    }\n}\n",
    "deploy.sh": "#!/bin/sh\n# Deploys.\nset -e\n\nbuild() {\n  make all\n}\n\n# Cleans.\nclean() {\n  rm -rf out\n}\n",
    "add.c": "/* Adds. */\n#include <stdio.h>\n\nstatic int\nadd(int a, int b)\n{\n    return a + b;\n}\n",
}


def tree(text: str, path: str) -> Outline:
    found = outline(text, path)
    assert found is not None, path
    return found


def joined(pieces: list[Piece]) -> str:
    return "".join(piece.content for piece in pieces)


@pytest.mark.parametrize("budget", [1, 7, 40, 120, 1500])
@pytest.mark.parametrize("path", sorted(SOURCES))
def test_pieces_are_exact_and_under_budget(path: str, budget: int) -> None:
    text = SOURCES[path]
    pieces = split_tree(text, tree(text, path), budget)
    assert joined(pieces) == text
    assert all(len(piece.content) <= budget for piece in pieces)
    assert_blank_pieces_only_when_unmergeable(pieces, budget)  # whitespace goes with a neighbour where it fits


@pytest.mark.parametrize(
    "path, budget, starts",
    [
        (
            "shapes.py",
            60,
            ["# The unit circle.\nclass Circle:", "    @property\n    def area", "    def scaled", "def unit"],
        ),
        (
            "format.js",
            60,
            [
                "/** Formatting. */\nconst isThing",
                "export const money",
                "export default cond",
                "export class Fmt",
                "  // Pads.\n  pad(s)",
            ],
        ),
        ("server.go", 60, ["// Server serves.\ntype Server", "// Start starts it.\nfunc (s *Server) Start"]),
        (
            "Registry.java",
            60,
            ["/** Registry. */\npublic class Registry", "    /** Counts. */\n    @Override", "    public void clear"],
        ),
        ("lib.rs", 50, ["/// A bar.\n#[derive(Debug)]\npub struct Bar", "impl Foo for Bar", "    fn go"]),
        ("deploy.sh", 40, ["build()", "# Cleans.\nclean()"]),
    ],
)
def test_cuts_at_definitions_with_their_comments_decorators_and_attributes(
    path: str, budget: int, starts: list[str]
) -> None:
    """Each definition starts a piece, or follows only small ones merged before it, with its comments in front."""
    text = SOURCES[path]
    found = [piece.content for piece in split_tree(text, tree(text, path), budget)]
    for start in starts:
        assert any(piece.lstrip("\n").startswith(start) or "\n" + start in piece for piece in found), (start, found)


def test_small_files_stay_whole() -> None:
    for path, text in SOURCES.items():
        assert [piece.content for piece in split_tree(text, tree(text, path))] == [text]


def test_an_oversized_class_splits_at_its_methods_and_a_huge_function_into_windows() -> None:
    methods = "".join(f"    def method_{n}(self):\n        return {n}\n\n" for n in range(40))
    text = f'class Big:\n    """Doc."""\n\n{methods}'
    pieces = split_tree(text, tree(text, "big.py"), 200)
    assert joined(pieces) == text and all(
        piece.content.lstrip("\n").startswith("    def method_") for piece in pieces[1:]
    )
    body = "".join(f"  const v{n} = compute({n});\n" for n in range(300))
    text = f"function huge() {{\n{body}  return 0;\n}}\n\nfunction small() {{\n  return 1;\n}}\n"
    pieces = split_tree(text, tree(text, "huge.js"), 500)
    assert joined(pieces) == text and len(pieces) > 10 and all(piece.content.endswith("\n") for piece in pieces)
    assert pieces[-1].content.endswith("}\n\nfunction small() {\n  return 1;\n}\n")  # the last window and what follows


def test_a_class_inside_a_namespace_splits_at_its_methods() -> None:
    methods = "".join(f"  int get_{n}() const {{ return {n}; }}\n" for n in range(30))
    text = f"namespace ns {{\nclass Box {{\n public:\n{methods}}};\n}}\n"
    pieces = split_tree(text, tree(text, "box.cpp"), 200)
    assert joined(pieces) == text and all(piece.content.startswith("  int get_") for piece in pieces[1:])


_PYTHON_BLOCKS = [
    "def f(x):\n    return x\n",
    "class K:\n    def m(self):\n        pass\n",
    "\n",
    "# comment\n",
    "@decorator\ndef g():\n    pass\n",
    "x = [\n    1,\n    2,\n]\n",
    "   \n",
    "y = 'z' * 90\n",
]


@pytest.mark.parametrize("seed", range(30))
def test_random_valid_code_is_exact_and_under_budget(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice(_PYTHON_BLOCKS) for _ in range(rng.randint(1, 60)))
    found = outline(text, "fuzz.py")
    if found is None or not text.strip():
        return
    budget = rng.choice([5, 30, 80, 200, 1500])
    pieces = split_tree(text, found, budget)
    assert joined(pieces) == text and all(len(piece.content) <= budget for piece in pieces)


def test_the_regex_chunker_takes_what_has_no_tree_and_says_so() -> None:
    ruby = "class A\n  def b\n  end\nend\n"
    assert chunk_file(ruby, "code", "a.rb") == (split_code(ruby), True)
    broken = "function f( {\n  return 1;\n}\n"
    assert chunk_file(broken, "code", "broken.js") == (split_code(broken), True)
    assert chunk_file(SOURCES["lib.rs"], "code", "lib.rs")[1] is False
    assert chunk_file("# Title\n\nText.\n", "markdown", "README.md")[1] is False


def test_python_is_cut_by_the_regex_chunker_by_choice_and_not_named_a_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    text = SOURCES["shapes.py"] * 8
    assert chunk_file(text, "code", "shapes.py") == (split_code(text), False)
    from ctxrag.tasks.common import grammars

    monkeypatch.setattr(grammars, "REGEX_BY_CHOICE", frozenset())  # the switch: Python on its tree
    assert chunk_file(text, "code", "shapes.py") == (split_tree(text, tree(text, "shapes.py")), False)
