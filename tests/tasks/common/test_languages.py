"""A file's language from its name, and the run report's counts by language."""

from __future__ import annotations

import pytest

from ctxrag.tasks.common.languages import (
    BY_EXTENSION,
    BY_FILENAME,
    TEXT,
    chunked_by_regex,
    chunks_by_language,
    file_name,
    language_of,
    read_as_plain_text,
)
from ctxrag.tasks.common.models import Chunk, Corpus, Document
from ctxrag.tasks.load.directory import CODE_EXTENSIONS, CODE_FILENAMES, MARKDOWN_EXTENSIONS, PROSE_EXTENSIONS


def test_every_kind_of_file_the_loader_reads_has_a_language() -> None:
    assert (CODE_EXTENSIONS | MARKDOWN_EXTENSIONS | PROSE_EXTENSIONS) <= set(BY_EXTENSION)
    assert CODE_FILENAMES <= set(BY_FILENAME)


@pytest.mark.parametrize(
    "doc_id, language",
    [
        ("src/app/page.tsx", "typescript"),
        ("lib/index.mjs", "javascript"),
        ("cmd/main.go", "go"),
        ("src/lib.rs", "rust"),
        ("pkg/Main.java", "java"),
        ("tinyq/worker.py", "python"),
        ("docs/guide.MDX", "mdx"),
        ("docs/index.rst", "restructuredtext"),
        ("build/Makefile", "make"),
        ("setup.cfg", TEXT),
        ("LICENSE", None),
        ("doc_1", None),
        ("https://docs.anthropic.com/en/docs/intro.html", None),
    ],
)
def test_a_sources_language_comes_from_its_name(doc_id: str, language: str | None) -> None:
    assert language_of(doc_id) == language


@pytest.mark.parametrize(
    "doc_id",
    [
        "src/app.py",
        "app.py",
        "a//b.py",
        "a/./b.py",
        "dir/",
        "a/b/.",
        ".bashrc",
        "a.",
        "x..py",
        "/abs/Makefile",
        "",
        ".",
        "docs/v1.2/read.me.md",
    ],
)
def test_a_file_name_is_pathlibs_without_pathlib(doc_id: str) -> None:
    """``file_name`` stands in for ``PurePosixPath(doc_id).name`` (which interns each part: a service's memory grew)."""
    from pathlib import PurePosixPath

    path = PurePosixPath(doc_id)
    assert file_name(doc_id) == path.name
    assert language_of(doc_id) == (
        BY_FILENAME.get(path.name) or (BY_EXTENSION.get(path.suffix[1:].lower(), TEXT) if path.suffix else None)
    )


def _corpus(*files: tuple[str, str, int]) -> Corpus:
    documents = [Document(doc_id=name, title=name, content="x", kind=kind, source=name) for name, kind, _ in files]
    chunks = [Chunk(f"{name}#{i}", name, i, "x", "sha") for name, _, count in files for i in range(count)]
    return Corpus(source="folder", documents=documents, chunks=chunks)


def test_the_report_counts_chunks_by_language_most_first_and_a_json_corpus_by_kind() -> None:
    corpus = _corpus(("a.py", "code", 2), ("b.ts", "code", 3), ("doc_7", "code", 1), ("notes.txt", "text", 1))
    assert list(chunks_by_language(corpus).items()) == [("typescript", 3), ("python", 2), ("code", 1), ("text", 1)]


def test_the_report_names_the_files_cut_as_plain_text_for_want_of_a_chunker_but_not_prose() -> None:
    corpus = _corpus(
        ("setup.cfg", "text", 1),
        ("LICENSE", "text", 1),
        ("notes.txt", "text", 1),
        ("a.py", "code", 1),
        *((f"data/{i}.conf", "text", 1) for i in range(25)),
    )
    fallback = read_as_plain_text(corpus)
    assert (
        fallback["files"] == 27 and fallback["first"][:2] == ["setup.cfg", "LICENSE"] and len(fallback["first"]) == 20
    )


def test_the_report_names_the_code_files_cut_by_the_regex_chunker() -> None:
    corpus = _corpus(("a.rb", "code", 1))
    corpus.chunked_by_regex.extend(["a.rb", *(f"lib/{i}.php" for i in range(25))])
    assert chunked_by_regex(corpus) == {"files": 26, "first": ["a.rb", *(f"lib/{i}.php" for i in range(19))]}
