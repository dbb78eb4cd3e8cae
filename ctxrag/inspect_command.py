"""``ctxrag inspect NAME PATH``: how one file of an index was chunked, each chunk's lines and heading, and the context it
got, so a user whose search misses can see why. Reads the live version's chunk table; no Prefect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ctxrag.errors import user_errors
from ctxrag.storage.environment import ctxrag_home
from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.common.display import console


def chunk_rows(name: str, path: str) -> list[dict[str, Any]]:
    """The live version's chunks of ``path`` (its document id, or a file under the indexed folder), in order, each with
    its 1-based line range (``Locator``'s, as a hit's; None where the stored chunks do not make up the document)."""
    from ctxrag.storage.chunk_table import ChunkTable
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.retrieval.locate import Locator

    store = IndexStore(ctxrag_home())
    live = store.live_version(name)
    if live is None:
        store.open(name)  # refuses, naming the indexes there are
    assert live is not None
    doc_id = _doc_id(path, Path(str((store.manifest(name) or {}).get("source") or ".")))
    table = ChunkTable(path=live / "chunks.parquet")  # the file's rows only are read, with its whole doc_id column
    rows = sorted(
        (row for row, found in enumerate(table["doc_id"].to_pylist()) if found == doc_id),
        key=lambda row: table.value("chunk_index", row),
    )
    if not rows:
        raise InvalidInput(
            f"{path}: no chunks of it in index {name!r} (documents are named as a search hit's `source`)"
        )
    locator = Locator(table)
    columns = ("doc_id", "chunk_index", "heading", "content", "context")
    return [
        {
            **{column: table.value(column, row) for column in columns},
            "lines": list(lines) if (lines := locator.lines(row)) else None,
        }
        for row in rows
    ]


def _doc_id(path: str, source: Path) -> str:
    """``path`` as the index names it: relative to the indexed folder when it is a file under it."""
    candidate = Path(path)
    if source.is_dir() and candidate.exists():
        try:
            return candidate.resolve().relative_to(source.resolve()).as_posix()
        except ValueError:
            pass
    return path


def inspect(
    name: str = typer.Argument(..., help="Index name."),
    path: str = typer.Argument(..., help="A file of the indexed folder (or a document id)."),
    as_json: bool = typer.Option(
        False, "--json", help="Print a JSON list of chunks: doc_id, chunk_index, lines, heading, content, context."
    ),
) -> None:
    """Show how a file was chunked: each chunk's lines, heading and the context it got."""
    with user_errors():
        rows = chunk_rows(name, path)
    if as_json:
        print(json.dumps(rows))
        return
    out = console(soft_wrap=True)
    for row in rows:
        lines = f"lines {row['lines'][0]}-{row['lines'][1]}" if row["lines"] else "lines ?"
        out.print(f"[bold]#{row['chunk_index']}[/]  {lines}  {row['heading'] or ''}".rstrip(), highlight=False)
        for line in (row["context"] or "(no context)").splitlines():
            out.print(f"   {line}", highlight=False, markup=False)
