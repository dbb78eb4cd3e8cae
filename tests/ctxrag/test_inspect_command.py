"""``ctxrag inspect NAME PATH``: each chunk of a file with its lines, heading and context (one file of each kind)."""

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


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> Path:  # type: ignore[no-untyped-def]
    from ctxrag.flows.index import index_corpus

    root = tmp_path_factory.mktemp("inspect")
    corpus = root / "corpus"
    for relpath, text in FILES.items():
        (corpus / relpath).parent.mkdir(parents=True, exist_ok=True)
        (corpus / relpath).write_text(text)
    index_corpus(source=str(corpus), name="files", home=str(root / "home"), options=index_options(contextualizer="structural"))
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


def test_a_file_the_index_does_not_hold_is_named_in_one_line(indexed: Path) -> None:
    result = CliRunner().invoke(cli.app, ["inspect", "files", "missing.py"], env={"CTXRAG_HOME": str(indexed / "home")})
    assert result.exit_code == 2 and "missing.py: no chunks of it in index 'files'" in result.stderr
    assert inspect(indexed, "web/format.js")[0]["lines"] == [1, 5]  # the document id works too
