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
    its 1-based line range in the text as indexed (None where the file is gone or no longer holds the chunk)."""
    import pyarrow.parquet as pq

    from ctxrag.storage.index_store import IndexStore

    store = IndexStore(ctxrag_home())
    live = store.live_version(name)
    if live is None:
        store.open(name)  # refuses, naming the indexes there are
    assert live is not None
    source = Path(str((store.manifest(name) or {}).get("source") or "."))
    doc_id = _doc_id(path, source)
    table = pq.ParquetFile(live / "chunks.parquet").read(columns=["doc_id", "chunk_index", "heading", "content", "context"])
    rows = sorted((row for row in table.to_pylist() if row["doc_id"] == doc_id), key=lambda row: row["chunk_index"])
    if not rows:
        raise InvalidInput(f"{path}: no chunks of it in index {name!r} (documents are named as in `ctxrag search --json`'s doc_id)")
    text = _indexed_text(source / doc_id) if source.is_dir() else None
    cursor = 0
    for row in rows:
        found = text.find(row["content"], cursor) if text is not None else -1
        if found < 0:
            row["lines"] = None
            continue
        first = text.count("\n", 0, found) + 1  # type: ignore[union-attr]
        row["lines"] = [first, first + row["content"].rstrip("\n").count("\n")]
        cursor = found + len(row["content"])
    return rows


def _doc_id(path: str, source: Path) -> str:
    """``path`` as the index names it: relative to the indexed folder when it is a file under it."""
    candidate = Path(path)
    if source.is_dir() and candidate.exists():
        try:
            return candidate.resolve().relative_to(source.resolve()).as_posix()
        except ValueError:
            pass
    return path


def _indexed_text(file: Path) -> str | None:
    """The file's text as the loader chunked it (docs pages converted to Markdown), None when unreadable."""
    from ctxrag.tasks.load.directory import file_kind
    from ctxrag.tasks.load.markup import as_markdown

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return as_markdown(text, file.suffix.lower().lstrip(".")).text if file_kind(file) == "markdown" else text


def inspect(
    name: str = typer.Argument(..., help="Index name."),
    path: str = typer.Argument(..., help="A file of the indexed folder (or a document id)."),
    as_json: bool = typer.Option(False, "--json"),
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
