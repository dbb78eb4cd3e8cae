"""Contextualizers: structural (code and prose), none, the CLI names, and the cache key."""

from __future__ import annotations

import pytest

from ctxrag.tasks.common.models import Chunk, Document
from ctxrag.tasks.context.claude.contextualizer import ClaudeContextualizer, ClaudeSummarizer
from ctxrag.tasks.context.offline import (
    MAX_DEFINED_NAMES,
    ContextualizerKind,
    NoContext,
    StructuralContextualizer,
    context_key,
    context_key_of,
    shorten_defines,
)
from ctxrag.tasks.context.spec import make_contextualizer

PY = '''\
"""Retry helpers for workers."""


class Retry:
    def __init__(self, attempts):
        self.attempts = attempts

    def run(self, job):
        return job()


def backoff(n):
    return 2 ** n
'''


def code_document(content: str = PY, title: str = "tinyq/retry.py") -> Document:
    return Document(title, title, content, "code", f"src/{title}")


def chunks_of(document: Document, pieces: list[str], **extra: str) -> list[Chunk]:
    return [
        Chunk(f"{document.doc_id}#{i}", document.doc_id, i, piece, document.doc_sha, **extra)
        for i, piece in enumerate(pieces)
    ]


# --- structural, code --------------------------------------------------------------------------------------------


def test_code_context_has_file_comment_defined_names_and_enclosing_definitions() -> None:
    document = code_document()
    [context] = StructuralContextualizer().contextualize(document, chunks_of(document, ["        return job()\n"]))
    assert context.split("\n") == [
        "File: tinyq/retry.py.",
        "Retry helpers for workers.",
        "Defines: Retry, __init__, run, backoff.",
        "Inside: class Retry > def run(self, job)",
    ]


def test_code_contexts_one_per_chunk_in_order() -> None:
    document = code_document()
    pieces = ["        self.attempts = attempts\n", "        return job()\n", "    return 2 ** n\n"]
    contexts = StructuralContextualizer().contextualize(document, chunks_of(document, pieces))
    assert len(contexts) == 3
    assert [context.split("\n")[-1] for context in contexts] == [
        "Inside: class Retry > def __init__(self, attempts)",
        "Inside: class Retry > def run(self, job)",
        "Inside: def backoff(n)",
    ]
    assert all(
        context.startswith("File: tinyq/retry.py.\nRetry helpers for workers.\nDefines: ") for context in contexts
    )


def test_code_chunk_before_any_definition_has_no_inside_line() -> None:
    document = code_document()
    [context] = StructuralContextualizer().contextualize(document, chunks_of(document, ['"""Retry helpers']))
    assert "Inside:" not in context
    assert "Defines: Retry, __init__, run, backoff." in context


def test_code_chunk_not_found_verbatim_has_no_inside_line() -> None:
    document = code_document()
    [context] = StructuralContextualizer().contextualize(document, chunks_of(document, ["rewritten text"]))
    assert context == "File: tinyq/retry.py.\nRetry helpers for workers.\nDefines: Retry, __init__, run, backoff."


def test_repeated_chunk_text_is_located_in_order() -> None:
    content = "def a():\n    pass\n\n\ndef b():\n    pass\n"
    document = code_document(content, "x.py")
    contexts = StructuralContextualizer().contextualize(document, chunks_of(document, ["    pass\n", "    pass\n"]))
    assert [context.split("\n")[-1] for context in contexts] == ["Inside: def a()", "Inside: def b()"]


def test_code_summary_is_appended() -> None:
    document = code_document()
    chunks = chunks_of(document, ["        return job()\n"], summary="Runs one job.")
    [context] = StructuralContextualizer().contextualize(document, chunks)
    assert context.endswith("Inside: class Retry > def run(self, job)\nRuns one job.")


def test_code_title_without_a_path_gets_no_file_line() -> None:
    document = code_document("def build():\n    pass\n", "Makefile")
    [context] = StructuralContextualizer().contextualize(document, chunks_of(document, ["    pass\n"]))
    assert context == "Defines: build.\nInside: def build()"


def test_defined_names_are_unique_and_capped() -> None:
    content = "".join(f"def f{i}():\n    pass\n" for i in range(MAX_DEFINED_NAMES + 5)) + "def f0():\n    pass\n"
    document = code_document(content, "many.py")
    [context] = StructuralContextualizer().contextualize(document, chunks_of(document, ["def f1"]))
    defines = next(line for line in context.split("\n") if line.startswith("Defines: "))
    listed = defines.removeprefix("Defines: ").removesuffix(".").split(", ")
    assert listed == [f"f{i}" for i in range(MAX_DEFINED_NAMES)]


def test_shorten_defines_cuts_only_the_defines_line_at_a_name_boundary() -> None:
    context = "File: a.py.\nDefines: alpha, beta, gamma, delta.\nInside: class A"
    assert shorten_defines(context, 26) == "File: a.py.\nDefines: alpha, beta, ...\nInside: class A"
    assert shorten_defines(context, 200) == context  # short enough already
    assert (
        shorten_defines("Page: intro.\nSection: Defines: a, b, c, d, e, f.", 10)
        == "Page: intro.\nSection: Defines: a, b, c, d, e, f."
    )


def test_code_document_without_structure_gives_empty_contexts() -> None:
    document = code_document("x = 1\n", "script")
    assert StructuralContextualizer().contextualize(document, chunks_of(document, ["x = 1\n"])) == [""]


def test_no_chunks_gives_no_contexts() -> None:
    document = code_document()
    assert StructuralContextualizer().contextualize(document, []) == []
    assert NoContext().contextualize(document, []) == []


DECORATED = """\
class Retry:
    def run(self, job):
        return job()


@cache
def backoff(n):
    return 2 ** n
"""


@pytest.mark.parametrize(
    ("content", "piece"),
    [
        (PY, "def backoff(n):\n    return 2 ** n\n"),  # starts exactly at the definition
        (PY, "\n\n\ndef backoff(n):\n    return 2 ** n\n"),  # the chunker keeps the blank lines before it
        (DECORATED, "\n\n@cache\ndef backoff(n):\n    return 2 ** n\n"),  # a decorator before it
    ],
    ids=["at-definition", "blank-lines-before", "decorator-before"],
)
def test_chunk_starting_at_a_top_level_definition_is_not_inside_the_previous_one(content: str, piece: str) -> None:
    document = code_document(content)
    [context] = StructuralContextualizer().contextualize(document, chunks_of(document, [piece]))
    assert "Inside: class Retry" not in context


JS = """'use strict';
/** Formatting helpers. */
import x from 'y';

export default cond && function named(a) {
  return a;
};

export class Fmt {
  pad(s) {
    abort();
    return s;
  }
}
"""


def test_a_tree_gives_the_doc_comment_and_paths_a_function_expression_does_not_leak_into() -> None:
    document = code_document(JS, "web/fmt.js")
    pieces = ["  return a;\n", "    abort();\n", "    return s;\n"]
    contexts = StructuralContextualizer().contextualize(document, chunks_of(document, pieces))
    assert contexts[0].split("\n") == ["File: web/fmt.js.", "Formatting helpers.", "Defines: Fmt, pad."]  # no `named`
    assert [context.split("\n")[-1] for context in contexts[1:]] == ["Inside: export class Fmt > pad(s)"] * 2


@pytest.mark.parametrize(
    "path, text, piece, inside",
    [
        (
            "server.go",
            "// Package server serves.\npackage server\n\nfunc (s *Server) Start() error {\n\treturn nil\n}\n",
            "\treturn nil\n",
            "Inside: func (s *Server) Start() error",
        ),
        (
            "src/lib.rs",
            "//! Bars.\nimpl Foo for Bar {\n    fn go(&self) -> i32 {\n        1\n    }\n}\n",
            "        1\n",
            "Inside: impl Foo for Bar > fn go(&self) -> i32",
        ),
    ],
)
def test_go_receivers_and_rust_impl_blocks_in_the_path(path: str, text: str, piece: str, inside: str) -> None:
    document = code_document(text, path)
    [context] = StructuralContextualizer().contextualize(document, chunks_of(document, [piece]))
    assert context.split("\n")[1] in ("Package server serves.", "Bars.") and context.endswith(inside)


def test_python_gets_the_heuristic_contexts_by_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    content = "class Retry:\n    # Runs it.\n    def run(self, job):\n        return job()\n"
    document = code_document(content, "retry.py")
    chunk = chunks_of(document, ["    # Runs it.\n    def run(self, job):\n        return job()\n"])
    assert (
        StructuralContextualizer().contextualize(document, chunk)[0].endswith("Inside: class Retry")
    )  # the regex path
    from ctxrag.tasks.common import grammars

    monkeypatch.setattr(grammars, "REGEX_BY_CHOICE", frozenset())  # on its tree the comment goes with its method
    assert (
        StructuralContextualizer()
        .contextualize(document, chunk)[0]
        .endswith("Inside: class Retry > def run(self, job)")
    )


def test_a_file_with_a_syntax_error_gets_the_heuristic_contexts() -> None:
    document = code_document("// Broken.\nfunction f( {\n  return 1;\n}\n", "broken.js")
    [context] = StructuralContextualizer().contextualize(document, chunks_of(document, ["  return 1;\n"]))
    assert context == "File: broken.js.\nBroken.\nDefines: f.\nInside: function f("


# --- structural, prose -------------------------------------------------------------------------------------------


def test_docs_page_context_has_page_title_section_and_summary() -> None:
    link = "https://docs.example.com/en/docs/build-with-claude/tool-use"
    document = Document(link, "Tool use", "Body text.", "docs", "eval.json")
    chunk = Chunk(
        f"{link}#chunk_0", link, 0, "Body text.", document.doc_sha, heading="Examples", summary="About tools."
    )
    assert StructuralContextualizer().contextualize(document, [chunk]) == [
        "Page: build with claude > tool use.\nTitle: Tool use.\nSection: Examples.\nAbout tools."
    ]


def test_prose_context_without_summary() -> None:
    link = "https://docs.example.com/en/docs/tokens"
    document = Document(link, "Tokens", "Body.", "docs", "eval.json")
    chunk = Chunk(f"{link}#chunk_1", link, 1, "Body.", document.doc_sha, heading="Counting")
    assert StructuralContextualizer().contextualize(document, [chunk]) == [
        "Page: tokens.\nTitle: Tokens.\nSection: Counting."
    ]


def test_markdown_context_uses_the_title_as_page_and_skips_repeats() -> None:
    document = Document("docs/guide.md", "Guide", "# Guide\n\n## Setup\n\nText.\n", "markdown", "docs/guide.md")
    chunks = [
        Chunk("docs/guide.md#0", document.doc_id, 0, "# Guide", document.doc_sha, heading="Guide"),
        Chunk("docs/guide.md#1", document.doc_id, 1, "Text.", document.doc_sha, heading="Guide > Setup"),
    ]
    # the page is the title, so no separate Title line; a heading equal to the title is not repeated
    assert StructuralContextualizer().contextualize(document, chunks) == [
        "Page: Guide.",
        "Page: Guide.\nSection: Guide > Setup.",
    ]


def test_text_document_without_title_or_heading() -> None:
    document = Document("notes", "", "plain", "text", "notes")
    chunk = Chunk("notes#0", "notes", 0, "plain", document.doc_sha)
    assert StructuralContextualizer().contextualize(document, [chunk]) == [""]
    chunk = Chunk("notes#0", "notes", 0, "plain", document.doc_sha, summary="A summary.")
    assert StructuralContextualizer().contextualize(document, [chunk]) == ["A summary."]


# --- none, names, keys -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["code", "docs", "markdown", "text"])
def test_none_gives_empty_strings(kind: str) -> None:
    document = Document("tinyq/retry.py", "tinyq/retry.py", PY, kind, "x")
    chunks = chunks_of(document, ["        return job()\n", "def backoff"], summary="Has a summary.")
    assert NoContext().contextualize(document, chunks) == ["", ""]


def test_make_contextualizer() -> None:
    assert isinstance(make_contextualizer("structural"), StructuralContextualizer)
    assert isinstance(make_contextualizer("none"), NoContext)
    assert [kind.value for kind in ContextualizerKind] == ["structural", "none", "claude", "claude-summary"]


@pytest.mark.parametrize("kind", list(ContextualizerKind))
def test_every_kind_has_a_contextualizer_named_after_it(kind: ContextualizerKind) -> None:
    assert ContextualizerKind.from_str(kind.value) is kind
    assert make_contextualizer(kind.value).name == kind.value


@pytest.mark.parametrize("value", ["llm", "Structural", ""])
def test_from_str_error_lists_the_choices(value: str) -> None:
    with pytest.raises(ValueError) as raised:
        ContextualizerKind.from_str(value)
    assert (
        str(raised.value)
        == f"unknown contextualizer {value!r}; choose one of: structural, none, claude, claude-summary"
    )
    with pytest.raises(ValueError, match="choose one of: structural, none, claude, claude-summary"):
        make_contextualizer(value)


def test_context_key() -> None:
    document = code_document()
    chunk, other = chunks_of(document, ["        return job()\n", "    return 2 ** n\n"])
    key = context_key(chunk, StructuralContextualizer(), document)
    assert len(key) == 32 and int(key, 16) >= 0
    assert context_key(chunk, StructuralContextualizer(), document) == key  # stable
    assert context_key(chunk, StructuralContextualizer(version="next"), document) != key  # version is part of the key
    assert context_key(chunk, NoContext(), document) != key  # so is the contextualizer
    assert context_key(other, StructuralContextualizer(), document) != key  # and the chunk


def test_context_key_follows_the_chunk_content_not_its_id() -> None:
    document = code_document()
    [chunk] = chunks_of(document, ["        return job()\n"])
    renamed = Chunk("another-id", chunk.doc_id, chunk.chunk_index, chunk.content, chunk.doc_sha)
    assert context_key(renamed, StructuralContextualizer(), document) == context_key(
        chunk, StructuralContextualizer(), document
    )
    moved = Chunk(chunk.chunk_id, chunk.doc_id, chunk.chunk_index + 1, chunk.content, chunk.doc_sha)
    assert context_key(moved, StructuralContextualizer(), document) != context_key(
        chunk, StructuralContextualizer(), document
    )


def test_structural_key_covers_what_it_writes_beyond_the_chunk_the_title_heading_and_summary() -> None:
    page = Document("https://docs.example/page", "Get started", "Install it.", "docs", "docs.json")
    [plain] = chunks_of(page, ["Install it."], heading="Get started")
    [summarized] = chunks_of(page, ["Install it."], heading="Get started", summary="How to install.")
    [moved] = chunks_of(page, ["Install it."], heading="Installing")
    retitled = Document(page.doc_id, "Start here", page.content, "docs", "docs.json")
    assert plain.key == summarized.key == moved.key  # the chunk key sees only the document's and the chunk's bytes
    structural = StructuralContextualizer()
    assert StructuralContextualizer().contextualize(page, [plain]) != structural.contextualize(page, [summarized])
    keys = {
        context_key(plain, structural, page),
        context_key(summarized, structural, page),
        context_key(moved, structural, page),
        context_key(plain, structural, retitled),
    }
    assert len(keys) == 4  # so each context has its own key: a corpus indexed with and without summaries shares none


def test_keys_of_contexts_that_read_nothing_more_are_the_chunk_keys_alone_as_before() -> None:
    page = Document("https://docs.example/page", "Get started", "Install it.", "docs", "docs.json")
    [chunk] = chunks_of(page, ["Install it."], heading="Get started", summary="How to install.")
    for worker in (NoContext(), ClaudeContextualizer(), ClaudeSummarizer()):  # paid keys must never move
        assert context_key(chunk, worker, page) == context_key_of(chunk.key, worker.name, worker.version)
