"""A directory of source, Markdown and text files."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ctxrag.tasks.common.models import Corpus, CorpusError
from ctxrag.tasks.load import load_directory, load_source
from ctxrag.tasks.load.chunking import split_text
from ctxrag.tasks.load.directory import file_kind, iter_files

PY = '''"""Tools."""


def one():
    return 1


class Two:
    """Two."""
'''

MD = "# Title\n\nIntro.\n\n## Part\n\nText.\n"


def make(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def test_happy_path_ids_kinds_and_order(tmp_path: Path) -> None:
    root = make(tmp_path / "proj", {"src/b.py": PY, "src/a.rs": "fn a() {}\n", "README.md": MD, "notes.txt": "hi\n"})
    corpus = load_source(root)
    assert corpus.source == str(root)
    assert corpus.warnings == []
    assert [(d.doc_id, d.title, d.kind) for d in corpus.documents] == [
        ("README.md", "README.md", "markdown"),
        ("notes.txt", "notes.txt", "text"),
        ("src/a.rs", "src/a.rs", "code"),
        ("src/b.py", "src/b.py", "code"),
    ]
    assert corpus.documents[3].source == str(root / "src" / "b.py")
    ids = [c.chunk_id for c in corpus.chunks]
    assert ids[:2] == ["README.md#0", "README.md#1"]
    assert [c.heading for c in corpus.chunks[:2]] == ["Title", "Title > Part"]
    for document in corpus.documents:
        chunks = [c for c in corpus.chunks if c.doc_id == document.doc_id]
        assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
        assert all(c.chunk_id == f"{document.doc_id}#{c.chunk_index}" for c in chunks)
        assert all(c.doc_sha == document.doc_sha for c in chunks)
        assert "".join(c.content for c in chunks) == document.content


@pytest.mark.parametrize("budget", [20, 60, 1500])
def test_chunks_concatenate_to_the_content(tmp_path: Path, budget: int) -> None:
    text = "First paragraph.\n\nSecond paragraph\nwith two lines.\n\n\nThird.\n"
    root = make(tmp_path, {"a.py": PY * 3, "b.md": MD * 3, "c.txt": text})
    corpus = load_directory(root, budget=budget)
    for document in corpus.documents:
        pieces = [c.content for c in corpus.chunks if c.doc_id == document.doc_id]
        assert "".join(pieces) == document.content
        assert all(len(piece) <= budget for piece in pieces)


def test_hidden_and_build_directories_are_skipped(tmp_path: Path) -> None:
    root = make(
        tmp_path,
        {
            "keep.py": PY,
            ".hidden.py": PY,
            ".git/config.txt": "x\n",
            "pkg/.secret/file.txt": "x\n",
            "__pycache__/m.txt": "x\n",
            "node_modules/lib.js": "x\n",
            ".venv/lib.py": "x\n",
            "venv/lib.py": "x\n",
            "build/out.txt": "x\n",
            "dist/out.txt": "x\n",
            "pkg/mod.py": PY,
        },
    )
    corpus = load_directory(root)
    assert [d.doc_id for d in corpus.documents] == ["keep.py", "pkg/mod.py"]
    assert corpus.warnings == []


def test_binary_non_utf8_and_empty_files_are_warned_and_skipped(tmp_path: Path) -> None:
    root = make(
        tmp_path,
        {
            "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            "latin.txt": "caf\u00e9\n".encode("latin-1"),
            "empty.md": "",
            "blank.txt": "  \n\n\t\n",
            "good.txt": "fine\n",
        },
    )
    corpus = load_source(root)
    assert [d.doc_id for d in corpus.documents] == ["good.txt"]
    warnings = "\n".join(corpus.warnings)
    assert len(corpus.warnings) == 4
    assert f"{root / 'image.png'}: skipped: binary" in warnings
    assert f"{root / 'latin.txt'}: skipped: not UTF-8" in warnings
    assert f"{root / 'empty.md'}: skipped: empty file" in warnings
    assert f"{root / 'blank.txt'}: skipped: empty file" in warnings


def test_unreadable_file_is_warned_and_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(tmp_path, {"locked.txt": "secret\n", "open.txt": "public\n"})
    read_bytes = Path.read_bytes

    def guarded(self: Path) -> bytes:
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", guarded)
    corpus = load_directory(root)
    assert [d.doc_id for d in corpus.documents] == ["open.txt"]
    assert corpus.warnings == [f"{root / 'locked.txt'}: skipped: cannot read file (Permission denied)"]


def test_directory_without_loadable_files_is_an_error(tmp_path: Path) -> None:
    make(tmp_path, {"blob.bin": b"\x00\x01", ".hidden.txt": "x\n"})
    with pytest.raises(CorpusError, match="no loadable files"):
        load_source(tmp_path)


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no loadable files"):
        load_directory(tmp_path)


def test_load_directory_on_a_file_is_an_error(tmp_path: Path) -> None:
    path = make(tmp_path, {"a.txt": "x\n"}) / "a.txt"
    with pytest.raises(CorpusError, match="not a directory"):
        load_directory(path)


def test_code_without_a_syntax_tree_is_cut_by_the_regex_chunker_and_named(tmp_path: Path) -> None:
    root = make(
        tmp_path,
        {
            "ok.go": "package ok\n\nfunc A() {}\n",
            "a.rb": "def a\nend\n",
            "broken.js": "function f( {\n}\n",
            "Makefile": "all:\n\tmake\n",
            "notes.md": MD,
        },
    )
    assert load_directory(root).chunked_by_regex == ["Makefile", "a.rb", "broken.js"]


def test_huge_single_line_file(tmp_path: Path) -> None:
    root = make(tmp_path, {"long.txt": "var x=1;" * 1000})  # prose: long lines are not taken for minified code
    corpus = load_directory(root, budget=1500)
    assert [len(c.content) for c in corpus.chunks] == [1500] * 5 + [500]
    assert "".join(c.content for c in corpus.chunks) == "var x=1;" * 1000


def test_whitespace_only_pieces_are_dropped(tmp_path: Path) -> None:
    text = "word\n" + "\n" * 40 + "word\n"
    assert any(not piece.content.strip() for piece in split_text(text, 10))  # the chunker does make some
    corpus = load_directory(make(tmp_path, {"gaps.txt": text}), budget=10)
    assert all(c.content.strip() for c in corpus.chunks)
    assert [c.chunk_index for c in corpus.chunks] == list(range(len(corpus.chunks)))
    assert "".join(c.content for c in corpus.chunks).split() == ["word", "word"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("a.py", "code"),
        ("b.TS", "code"),
        ("Makefile", "code"),
        ("c.md", "markdown"),
        ("d.rst", "markdown"),
        ("e.txt", "text"),
        ("f.cfg", "text"),
        ("LICENSE", "text"),
    ],
)
def test_file_kind(name: str, kind: str) -> None:
    assert file_kind(Path(name)) == kind


def relpaths(root: Path, include: list[str] | None = None, exclude: list[str] | None = None) -> list[str]:
    return [path.relative_to(root).as_posix() for path in iter_files(root, [], include, exclude)]


def test_nested_gitignore_applies_under_its_own_folder(tmp_path: Path) -> None:
    root = make(
        tmp_path,
        {
            ".gitignore": "*.log\nout/\n/top.txt\n*.md\n",
            "a.py": PY,
            "a.log": "x\n",
            "top.txt": "x\n",
            "README.md": MD,
            "out/gen.py": PY,
            "sub/.gitignore": "*.py\n!keep.py\n!README.md\nlocal/\n",
            "sub/keep.py": PY,
            "sub/drop.py": PY,
            "sub/README.md": MD,
            "sub/top.txt": "x\n",
            "sub/b.log": "x\n",
            "sub/local/x.txt": "x\n",
            "sub/deep/keep.py": PY,
            "sub/deep/other.py": PY,
            "local/y.txt": "x\n",
            "other/c.py": PY,
        },
    )
    corpus = load_source(root)
    assert [d.doc_id for d in corpus.documents] == [
        "a.py",
        "local/y.txt",
        "other/c.py",
        "sub/README.md",
        "sub/keep.py",
        "sub/top.txt",
        "sub/deep/keep.py",
    ]
    assert corpus.warnings == []


def test_invalid_gitignore_line_is_dropped_with_a_warning(tmp_path: Path) -> None:
    root = make(tmp_path, {".gitignore": "!\n*.tmp\n", "a.txt": "x\n", "b.tmp": "x\n"})
    corpus = load_directory(root)
    assert [d.doc_id for d in corpus.documents] == ["a.txt"]
    assert corpus.warnings == [f"{root / '.gitignore'}: invalid patterns ignored: '!'"]


def test_include_and_exclude(tmp_path: Path) -> None:
    root = make(
        tmp_path,
        {
            "README.md": MD,
            "setup.py": PY,
            "src/a.py": PY,
            "src/a_test.py": PY,
            "src/notes.txt": "x\n",
            "src/gen/b.py": PY,
            "tests/t.py": PY,
            "docs/guide.md": MD,
        },
    )
    assert relpaths(root, include=["src/", "*.md"]) == [
        "README.md",
        "docs/guide.md",
        "src/a.py",
        "src/a_test.py",
        "src/notes.txt",
        "src/gen/b.py",
    ]
    assert relpaths(root, exclude=["*_test.py", "tests", "/src/gen/", "*.txt"]) == [
        "README.md",
        "setup.py",
        "docs/guide.md",
        "src/a.py",
    ]
    corpus = load_source(root, include=["*.py"], exclude=["src/*", "!src/a.py"])
    assert [d.doc_id for d in corpus.documents] == ["setup.py", "src/a.py", "tests/t.py"]
    assert relpaths(root, include=["*.py"], exclude=["src/", "!src/a.py"]) == ["setup.py", "tests/t.py"]  # as git
    with pytest.raises(ValueError, match=r"--exclude: not a valid gitignore-style pattern: 'a\\\\'"):
        load_source(root, exclude=["a\\"])


def test_files_over_the_size_limit_are_warned_and_skipped(tmp_path: Path) -> None:
    root = make(tmp_path, {"big.txt": "x" * 99 + "\n", "small.txt": "y\n"})
    corpus = load_source(root, max_file_bytes=50)
    assert [d.doc_id for d in corpus.documents] == ["small.txt"]
    assert corpus.warnings == [f"{root / 'big.txt'}: skipped: too large (100 bytes; the limit is 50)"]
    assert [d.doc_id for d in load_source(root, max_file_bytes=0).documents] == ["big.txt", "small.txt"]
    assert [d.doc_id for d in load_source(root).documents] == ["big.txt", "small.txt"]  # 1 MiB by default


def test_generated_and_minified_files_are_warned_and_skipped(tmp_path: Path) -> None:
    root = make(
        tmp_path,
        {
            "app.min.js": "var a=1;\n",
            "style.min.css": "a{b:c}\n",
            "bundle.js": "var x=1;" * 1000,
            "api.pb.go": "// Code generated by protoc-gen-go. DO NOT EDIT.\npackage api\n",
            "poetry.lock": "# This file is automatically @generated by Poetry\n[[package]]\n",
            "late.py": "\n" * 5 + "# DO NOT EDIT\n",
            "prose.md": ("word " * 100 + "\n\n") * 10,
            "app.js": "function f() {\n  return 1;\n}\n",
        },
    )
    corpus = load_source(root)
    assert [d.doc_id for d in corpus.documents] == ["app.js", "late.py", "prose.md"]
    assert sorted(corpus.warnings) == [
        f"{root / 'api.pb.go'}: skipped: generated ('DO NOT EDIT' in the first 5 lines)",
        f"{root / 'app.min.js'}: skipped: minified (*.min.js)",
        f"{root / 'bundle.js'}: skipped: minified (average line length 8000 characters)",
        f"{root / 'poetry.lock'}: skipped: generated ('@generated' in the first 5 lines)",
        f"{root / 'style.min.css'}: skipped: minified (*.min.css)",
    ]


def test_symlinks_outside_the_tree_are_warned_and_skipped(tmp_path: Path) -> None:
    outside = make(tmp_path / "outside", {"secret.txt": "secret\n", "lib/x.py": PY})
    root = make(tmp_path / "proj", {"a.txt": "a\n", "sub/b.txt": "b\n"})
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "sub" / "lib").symlink_to(outside / "lib", target_is_directory=True)
    (root / "alias.txt").symlink_to(root / "sub" / "b.txt")  # inside the tree: b.txt is loaded once, at its path
    corpus = load_source(root)
    assert [d.doc_id for d in corpus.documents] == ["a.txt", "sub/b.txt"]
    assert sorted(corpus.warnings) == [
        f"{root / 'alias.txt'}: skipped: symlink within the tree, not followed (its target is loaded at its own path)",
        f"{root / 'leak.txt'}: skipped: symlink to outside the source root ({outside / 'secret.txt'})",
        f"{root / 'sub' / 'lib'}: skipped: symlink to outside the source root ({outside / 'lib'})",
    ]


def test_symlink_loops_terminate(tmp_path: Path) -> None:
    root = make(tmp_path / "proj", {"a.txt": "a\n", "sub/b.txt": "b\n"})
    (root / "sub" / "up").symlink_to("..", target_is_directory=True)
    (root / "self").symlink_to("self")
    (root / "ping").symlink_to("pong")
    (root / "pong").symlink_to("ping")
    result: list[Corpus] = []
    worker = threading.Thread(target=lambda: result.append(load_source(root)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "walking a tree with symlink loops did not finish"
    corpus = result[0]
    assert [d.doc_id for d in corpus.documents] == ["a.txt", "sub/b.txt"]
    inside = "symlink within the tree, not followed (its target is loaded at its own path)"
    assert sorted(corpus.warnings) == [
        *(f"{root / name}: skipped: broken symlink or symlink loop" for name in ("ping", "pong", "self")),
        f"{root / 'sub' / 'up'}: skipped: {inside}",
    ]
