"""A directory of source code, Markdown and text files, walked in sorted order and chunked by ``chunking``."""

from __future__ import annotations

import os
from pathlib import Path

from tasks.load.chunking import DEFAULT_BUDGET, chunk_content
from tasks.models import Chunk, Corpus, CorpusError, Document

SKIP_DIRS: frozenset[str] = frozenset({"__pycache__", "node_modules", "venv", "build", "dist"})  # plus hidden ones
CODE_EXTENSIONS: frozenset[str] = frozenset(
    """py pyi rs go c h cpp hpp cc cxx hh hxx java js mjs cjs ts tsx jsx rb php cs swift kt kts scala sh bash zsh
    sql lua pl pm r jl m mm dart ex exs erl hs ml clj vue svelte zig nim f90 ps1 groovy gradle cmake""".split()
)
CODE_FILENAMES: frozenset[str] = frozenset({"Makefile", "Dockerfile", "Rakefile", "Gemfile", "CMakeLists.txt"})
MARKDOWN_EXTENSIONS: frozenset[str] = frozenset({"md", "markdown", "rst"})
BINARY_SNIFF = 8192  # a NUL byte within this many leading bytes marks a file as binary


def file_kind(path: Path) -> str:
    """"code", "markdown" or "text", from the file's name."""
    if path.name in CODE_FILENAMES:
        return "code"
    extension = path.suffix.lower().lstrip(".")
    if extension in CODE_EXTENSIONS:
        return "code"
    if extension in MARKDOWN_EXTENSIONS:
        return "markdown"
    return "text"


def iter_files(root: Path, warnings: list[str] | None = None) -> list[Path]:
    """Files under ``root`` in sorted order, skipping hidden entries and build/vendor directories; directories that
    cannot be listed are reported in ``warnings``."""

    def unlistable(error: OSError) -> None:
        if warnings is not None:
            warnings.append(f"{error.filename}: skipped: cannot list directory ({error.strerror or error})")

    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(root, onerror=unlistable):
        dirnames[:] = sorted(name for name in dirnames if not name.startswith(".") and name not in SKIP_DIRS)
        found.extend(Path(folder, name) for name in sorted(filenames) if not name.startswith("."))
    return found


def read_text(path: Path) -> tuple[str | None, str]:
    """The file's text, or (None, why it was skipped)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"cannot read file ({exc.strerror or exc})"
    if b"\0" in raw[:BINARY_SNIFF]:
        return None, "binary (NUL byte in the first 8 KiB)"
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (invalid byte at offset {exc.start})"


def load_directory(path: str | Path, budget: int = DEFAULT_BUDGET) -> Corpus:
    """Load every text file under ``path`` as a document and chunk it by kind with a ``budget`` in characters.

    ``doc_id`` and ``title`` are the POSIX path relative to ``path``; chunk ids are ``f"{relpath}#{index}"``.
    Binary, non-UTF-8, unreadable and empty files are skipped with a warning; no loadable file is a ``CorpusError``.
    """
    root = Path(path)
    if not root.is_dir():
        raise CorpusError(f"{root}: not a directory")
    corpus = Corpus(source=str(root))
    for file in iter_files(root, corpus.warnings):
        relpath = file.relative_to(root).as_posix()
        if not file.is_file():
            corpus.warnings.append(f"{file}: skipped: not a regular file")
            continue
        text, why = read_text(file)
        if text is None:
            corpus.warnings.append(f"{file}: skipped: {why}")
            continue
        if not text.strip():
            corpus.warnings.append(f"{file}: skipped: empty file")
            continue
        kind = file_kind(file)
        document = Document(doc_id=relpath, title=relpath, content=text, kind=kind, source=str(file))
        pieces = [piece for piece in chunk_content(text, kind, budget) if piece.content.strip()]
        corpus.documents.append(document)
        corpus.chunks.extend(
            Chunk(
                chunk_id=f"{relpath}#{index}",
                doc_id=relpath,
                chunk_index=index,
                content=piece.content,
                doc_sha=document.doc_sha,
                heading=piece.heading,
            )
            for index, piece in enumerate(pieces)
        )
    if not corpus.documents:
        raise CorpusError(f"{root}: no loadable files (text, Markdown or source code) in the directory")
    return corpus
