"""A file's language, from its name: what each hit says (``language``) and what the run report counts.

``BY_EXTENSION`` is also the folder loader's list of what it reads as code: every extension here that is not
Markdown, a docs page or prose (``tasks/load/directory.py``). A JSON corpus's ``doc_id`` is no file name:
its language is None, and the report counts its chunks under the documents' kind.
"""

from __future__ import annotations

from collections import Counter
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxrag.tasks.common.models import Corpus

BY_EXTENSION: dict[str, str] = {
    "py": "python",
    "pyi": "python",
    "js": "javascript",
    "mjs": "javascript",
    "cjs": "javascript",
    "jsx": "javascript",
    "ts": "typescript",
    "tsx": "typescript",
    "go": "go",
    "java": "java",
    "rs": "rust",
    "c": "c",
    "h": "c",
    "cpp": "cpp",
    "hpp": "cpp",
    "cc": "cpp",
    "cxx": "cpp",
    "hh": "cpp",
    "hxx": "cpp",
    "rb": "ruby",
    "php": "php",
    "cs": "csharp",
    "swift": "swift",
    "kt": "kotlin",
    "kts": "kotlin",
    "scala": "scala",
    "sh": "shell",
    "bash": "shell",
    "zsh": "shell",
    "sql": "sql",
    "lua": "lua",
    "pl": "perl",
    "pm": "perl",
    "r": "r",
    "jl": "julia",
    "m": "objective-c",
    "mm": "objective-c",
    "dart": "dart",
    "ex": "elixir",
    "exs": "elixir",
    "erl": "erlang",
    "hs": "haskell",
    "ml": "ocaml",
    "clj": "clojure",
    "vue": "vue",
    "svelte": "svelte",
    "zig": "zig",
    "nim": "nim",
    "f90": "fortran",
    "ps1": "powershell",
    "groovy": "groovy",
    "gradle": "groovy",
    "cmake": "cmake",
    "md": "markdown",
    "markdown": "markdown",
    "mdx": "mdx",
    "rst": "restructuredtext",
    "adoc": "asciidoc",
    "ipynb": "jupyter",
    "txt": "text",
    "text": "text",
}
BY_FILENAME: dict[str, str] = {
    "Makefile": "make",
    "Dockerfile": "dockerfile",
    "Rakefile": "ruby",
    "Gemfile": "ruby",
    "CMakeLists.txt": "cmake",
}
TEXT = "text"  # any other file of a folder: read as plain text


def language_of(doc_id: str) -> str | None:
    """The language of a folder corpus's file (its ``doc_id`` is the path; an unknown extension is plain text), or
    None for an id with no extension (a JSON corpus's ``doc_1``, a ``LICENSE`` file) or a docs page's link."""
    if "://" in doc_id:  # a docs page's link
        return None
    name = file_name(doc_id)
    if name in BY_FILENAME:
        return BY_FILENAME[name]
    dot = name.rfind(".")
    extension = name[dot + 1 :].lower() if 0 < dot < len(name) - 1 else ""  # PurePosixPath's suffix, without its dot
    if not extension:
        return None
    return BY_EXTENSION.get(extension, TEXT)


def file_name(doc_id: str) -> str:
    """``PurePosixPath(doc_id).name`` by string operations: a service asks for every hit's language, and pathlib
    interns each part of a path it parses; a part no longer used leaves Python's table of interned strings again, and
    that churn regrows the table (~1.9 MB) every few thousand searches, each time in a new place of glibc's heap
    (docs/decisions.md, "No pathlib per hit")."""
    parts = [part for part in doc_id.split("/") if part and part != "."]
    return parts[-1] if parts else ""


PROSE_EXTENSIONS: frozenset[str] = frozenset(
    {"txt", "text"}
)  # plain text by their own kind (unwrapped paragraphs are not minification)
NAMED_FALLBACKS = 20  # the report names this many files read as plain text


def chunks_by_language(corpus: Corpus) -> dict[str, int]:
    """Chunks per language, most first; a source that names no file counts under its document's kind ("code")."""
    kinds = {document.doc_id: document.kind for document in corpus.documents}
    counts = Counter(language_of(chunk.doc_id) or kinds.get(chunk.doc_id, TEXT) for chunk in corpus.chunks)
    return dict(counts.most_common())


def read_as_plain_text(corpus: Corpus) -> dict[str, object]:
    """The folder's files that no chunker knows (an unknown extension, or none) and were cut as plain text: how many,
    and the first ``NAMED_FALLBACKS`` of them."""
    files = [
        document.doc_id
        for document in corpus.documents
        if document.kind == "text" and PurePosixPath(document.doc_id).suffix.lower().lstrip(".") not in PROSE_EXTENSIONS
    ]
    return {"files": len(files), "first": files[:NAMED_FALLBACKS]}


def chunked_by_regex(corpus: Corpus) -> dict[str, object]:
    """The folder's code files cut by the regex chunker, not on a syntax tree (no grammar for their language, or a
    syntax error; ``ctxrag.tasks.load.syntax``): how many, and the first ``NAMED_FALLBACKS`` of them."""
    files = corpus.chunked_by_regex
    return {"files": len(files), "first": files[:NAMED_FALLBACKS]}
