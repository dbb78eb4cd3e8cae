"""The loading stage: a SOURCE (a cookbook or docs JSON file, or a directory) becomes a ``Corpus``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxrag.tasks.common.models import Corpus, CorpusError
from ctxrag.tasks.load.chunking import (
    DEFAULT_BUDGET,
    Piece,
    chunk_content,
    split_code,
    split_markdown,
    split_text,
)
from ctxrag.tasks.load.cookbook import COOKBOOK_FIELDS, load_cookbook, parse_cookbook
from ctxrag.tasks.load.directory import DEFAULT_MAX_FILE_BYTES, load_directory
from ctxrag.tasks.load.docs import DOCS_FIELDS, load_docs, parse_docs
from ctxrag.tasks.load.jsonio import read_records, type_name

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_FILE_BYTES",
    "Piece",
    "chunk_content",
    "detect_format",
    "load_cookbook",
    "load_directory",
    "load_docs",
    "load_source",
    "parse_cookbook",
    "parse_docs",
    "split_code",
    "split_markdown",
    "split_text",
]


def detect_format(records: list[Any], source: str) -> str:
    """ "cookbook" or "docs", from the fields of the first record (the chosen parser then checks every record)."""
    first = records[0]
    if not isinstance(first, dict):
        raise CorpusError(f"{source}: record 0: must be an object, got {type_name(first)}")
    cookbook = sum(name in first for name in COOKBOOK_FIELDS)
    docs = sum(name in first for name in DOCS_FIELDS)
    if cookbook != docs:
        return "cookbook" if cookbook > docs else "docs"
    raise CorpusError(
        f"{source}: record 0 matches no known format (fields: {', '.join(sorted(map(str, first))) or 'none'}); "
        f"the cookbook format needs {', '.join(COOKBOOK_FIELDS)} (chunks: chunk_id, original_index, content); "
        f"the docs format needs {', '.join(DOCS_FIELDS)} (optional: summary)"
    )


def load_source(
    path: str | Path,
    budget: int = DEFAULT_BUDGET,
    *,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> Corpus:
    """Load SOURCE: a directory (chunked with ``budget`` characters per chunk; files picked by ``.gitignore``,
    ``include``/``exclude`` and ``max_file_bytes``, see ``load_directory``) or a JSON file whose format is detected
    from its fields (the folder options do not apply)."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file or directory")
    if path.is_dir():
        return load_directory(path, budget, include=include, exclude=exclude, max_file_bytes=max_file_bytes)
    if path.suffix.lower() != ".json":
        raise CorpusError(f"{path}: expected a directory or a .json file (cookbook or docs format)")
    records = read_records(path)
    if detect_format(records, str(path)) == "cookbook":
        return parse_cookbook(records, str(path))
    return parse_docs(records, str(path))
