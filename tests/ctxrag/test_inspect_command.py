"""``ctxrag inspect NAME PATH``: each chunk of a file with its lines, heading and context (one file of each kind, and
one of each language cut on its syntax tree, whose chunks name the definitions around them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ctxrag.cli as cli
from tests.helpers import index_options

FILES = {
    "src/shapes.py": '"""Shapes and their areas."""\n\n\nclass Circle:\n'
    + "".join(f"    def area_{n}(self):\n        return 3.14 * {n}\n\n" for n in range(60)),
    "web/format.js": "// Formatting helpers.\n\nexport function money(value) {\n  return value.toFixed(2);\n}\n",
    "docs/guide.mdx": "---\ntitle: Guide\n---\nimport X from 'x';\n\nIntro.\n\n## Setup\n\n<Note>Install it.</Note>\n",
}
MANY = range(45)  # definitions (or lines) enough for a file of several chunks
# A file of each language the syntax-tree chunker covers, and the definition path some of its chunks are inside.
TREES = {
    "lang/money.js": (
        "/** Money. */\nexport class Money {\n"
        + "".join(f"  cents_{n}(v) {{\n    return Math.round(v * {n});\n  }}\n\n" for n in MANY)
        + "}\n",
        "Inside: export class Money",
    ),
    "lang/view.tsx": (
        "export class View extends Component<Props> {\n"
        + "".join(f"  part_{n}() {{\n    return <li key={{{n}}}>{{this.props.name}}</li>;\n  }}\n" for n in MANY)
        + "}\n",
        "Inside: export class View extends Component<Props>",
    ),
    "lang/api.ts": (
        "export class Api {\n"
        + "".join(f"  get_{n}(id: number): string {{\n    return String(id * {n});\n  }}\n" for n in MANY)
        + "}\n",
        "Inside: export class Api",
    ),
    "lang/server.go": (
        "// Package server serves.\npackage server\n\nfunc (s *Server) Start() error {\n"
        + "".join(f"\ts.count += {n} // step {n} of the start\n" for n in MANY)
        + "\treturn nil\n}\n",
        "Inside: func (s *Server) Start() error",
    ),
    "lang/Registry.java": (
        "/** Registry. */\npublic class Registry {\n"
        + "".join(f"    public int size{n}() {{\n        return {n} * count;\n    }}\n\n" for n in MANY)
        + "}\n",
        "Inside: public class Registry",
    ),
    "lang/shapes.rs": (
        "//! Shapes.\nimpl Shape for Circle {\n"
        + "".join(f"    fn area_{n}(&self) -> f64 {{\n        self.r * {n}.0\n    }}\n\n" for n in MANY)
        + "}\n",
        "Inside: impl Shape for Circle",
    ),
    "lang/deploy.sh": (
        "#!/bin/sh\n# Deploys.\ndeploy() {\n" + "".join(f'  echo "step {n} of the deployment"\n' for n in MANY) + "}\n",
        "Inside: deploy()",
    ),
    "lang/sum.c": (
        "/* Sums. */\nint sum(int n)\n{\n    int total = 0;\n"
        + "".join(f"    total += n * {n}; /* term {n} */\n" for n in MANY)
        + "    return total;\n}\n",
        "Inside: int sum(int n)",
    ),
    "lang/box.cpp": (
        "namespace geo {\nclass Box {\n public:\n"
        + "".join(f"  int side_{n}() const {{ return width * {n}; }}\n" for n in MANY)
        + "};\n}\n",
        "Inside: namespace geo > class Box",
    ),
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> Path:  # type: ignore[no-untyped-def]
    from ctxrag.flows.index import index_corpus

    root = tmp_path_factory.mktemp("inspect")
    corpus = root / "corpus"
    for relpath, text in {**FILES, **{path: text for path, (text, _) in TREES.items()}}.items():
        (corpus / relpath).parent.mkdir(parents=True, exist_ok=True)
        (corpus / relpath).write_text(text)
    index_corpus(
        source=str(corpus), name="files", home=str(root / "home"), options=index_options(contextualizer="structural")
    )
    return root


def inspect(root: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(cli.app, ["inspect", "files", *args, "--json"], env={"CTXRAG_HOME": str(root / "home")})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.mark.parametrize("relpath", sorted(FILES))
def test_each_chunk_has_its_lines_and_its_context(indexed: Path, relpath: str) -> None:
    rows = inspect(indexed, str(indexed / "corpus" / relpath))  # a path to the file, as a user has it
    assert [row["chunk_index"] for row in rows] == list(range(len(rows))) and all(row["context"] for row in rows)
    assert rows[0]["lines"][0] == 1 and all(a["lines"][1] < b["lines"][0] for a, b in zip(rows, rows[1:]))
    if relpath.endswith(".py"):
        assert len(rows) > 1 and all("Inside: class Circle" in row["context"] for row in rows[1:])
    if relpath.endswith(".mdx"):
        assert rows[-1]["heading"] == "Guide > Setup" and "Section: Guide > Setup." in rows[-1]["context"]


@pytest.mark.parametrize("relpath", sorted(TREES))
def test_code_cut_on_its_syntax_tree_shows_its_lines_and_definition_paths(indexed: Path, relpath: str) -> None:
    rows = inspect(indexed, relpath)
    text, inside = TREES[relpath]
    assert len(rows) > 1 and rows[0]["lines"][0] == 1 and rows[-1]["lines"][1] == text.count("\n")
    assert all(a["lines"][1] < b["lines"][0] for a, b in zip(rows, rows[1:]))
    assert all(row["context"].startswith(f"File: {relpath}.") for row in rows)
    assert any(row["context"].endswith(inside) for row in rows[1:]), [row["context"] for row in rows]


def test_a_file_the_index_does_not_hold_is_named_in_one_line(indexed: Path) -> None:
    result = CliRunner().invoke(cli.app, ["inspect", "files", "missing.py"], env={"CTXRAG_HOME": str(indexed / "home")})
    assert result.exit_code == 2 and "missing.py: no chunks of it in index 'files'" in result.stderr
    assert inspect(indexed, "web/format.js")[0]["lines"] == [1, 5]  # the document id works too
