"""A directory of source, Markdown and text files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.load import load_directory, load_source
from tasks.load.chunking import split_text
from tasks.load.directory import file_kind
from tasks.models import CorpusError

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


def test_huge_single_line_file(tmp_path: Path) -> None:
    root = make(tmp_path, {"min.js": "var x=1;" * 1000})
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
    [("a.py", "code"), ("b.TS", "code"), ("Makefile", "code"), ("c.md", "markdown"), ("d.rst", "markdown"),
     ("e.txt", "text"), ("f.cfg", "text"), ("LICENSE", "text")],
)
def test_file_kind(name: str, kind: str) -> None:
    assert file_kind(Path(name)) == kind
