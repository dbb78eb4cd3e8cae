"""Which file events ``ctxrag index --watch`` acts on (ctxrag.watched_files): those of the files a run reads, as the
loader picks them, never those of the index's own home; and the events themselves, from the OS, on a thread."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ctxrag.tasks.options import FileOptions
from ctxrag.watched_files import Changes, SourceFiles


def folder(root: Path) -> Path:
    for name, text in {
        "a.py": "def a():\n    return 1\n",
        "docs/guide.md": "# Guide\n\nHow to.\n",
        "build/out.py": "x = 1\n",
        ".git/config": "[core]\n",
        "skipped.log": "log line\n",
        "big.txt": "x" * 5000,
        ".gitignore": "*.log\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_picked_files_are_the_loader_s_within_the_size_limit(tmp_path: Path) -> None:
    files = SourceFiles(str(folder(tmp_path / "src")), FileOptions(max_file_bytes=1000), ignored=[])
    assert files.picked() == {"a.py", "docs/guide.md"}  # not build/, .git/, the ignored log or the large file
    excluded = SourceFiles(str(tmp_path / "src"), FileOptions(exclude=["docs/"], max_file_bytes=0), ignored=[])
    assert excluded.picked() == {"a.py", "big.txt"}
    included = SourceFiles(str(tmp_path / "src"), FileOptions(include=["*.md"]), ignored=[])
    assert included.picked() == {"docs/guide.md"}


def test_events_in_hidden_build_and_ignored_folders_are_dropped_at_once(tmp_path: Path) -> None:
    root = folder(tmp_path / "src")
    home = root / "index-home"
    files = SourceFiles(str(root), FileOptions(), ignored=[home.resolve()])
    wanted = {name: files.wanted(str(root.resolve() / name)) for name in (
        "a.py", "new.md", ".gitignore", "docs/.gitignore", ".git/index", "node_modules/x.js", "build/out.py",
        ".hidden.py", "index-home/indexes/x/live.json",
    )}  # fmt: skip
    assert [name for name, keep in wanted.items() if keep] == ["a.py", "new.md", ".gitignore", "docs/.gitignore"]
    assert not files.wanted(str(tmp_path / "elsewhere.py"))


def test_a_change_counts_when_a_run_reads_or_read_its_file(tmp_path: Path) -> None:
    root = folder(tmp_path / "src").resolve()
    files = SourceFiles(str(root), FileOptions(max_file_bytes=1000), ignored=[])
    before = files.picked()
    (root / "docs/guide.md").unlink()
    (root / "b.md").write_text("# B\n")
    now = files.picked()
    changed = {str(root / name) for name in ("docs/guide.md", "b.md", "skipped.log", "big.txt", "a.py")}
    assert files.touched(changed, before, now) == ["a.py", "b.md", "docs/guide.md"]  # deleted, new, edited
    (root / ".gitignore").write_text("*.log\n*.md\n")  # an edited .gitignore: what it drops is touched
    assert files.touched({str(root / ".gitignore")}, now, files.picked()) == ["b.md"]
    assert files.touched({str(root / ".gitignore"), str(root / "skipped.log")}, before, before) == []


def test_a_file_the_index_holds_that_can_no_longer_be_read_is_named(tmp_path: Path) -> None:
    root = folder(tmp_path / "src").resolve()
    files = SourceFiles(str(root), FileOptions(), ignored=[])
    (root / "a.py").write_bytes(b"def a():\n    return '\xff'\n")
    (root / "new.bin").write_bytes(b"\x00\x01binary")
    assert files.unreadable(["a.py", "new.bin"], lambda: {"a.py"}) == (
        str(root / "a.py"),
        "not UTF-8 (invalid byte at offset 21)",
    )
    assert files.unreadable(["new.bin"], lambda: {"a.py"}) is None  # never indexed: the loader skips it, as ever
    assert files.unreadable(["docs/guide.md"], lambda: pytest.fail("the index is read only for a failing file")) is None


def test_a_json_corpus_is_watched_as_its_one_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.json"
    corpus.write_text("[]")
    files = SourceFiles(str(corpus), FileOptions(), ignored=[])
    assert files.root == tmp_path.resolve() and files.picked() == {"corpus.json"}
    assert files.wanted(str(corpus.resolve())) and not files.wanted(str(tmp_path.resolve() / "other.json"))


def test_saves_arrive_as_one_batch_and_the_thread_stops_with_the_block(tmp_path: Path) -> None:
    root = folder(tmp_path / "src").resolve()
    files = SourceFiles(str(root), FileOptions(), ignored=[])
    with Changes(files) as changes:
        time.sleep(0.5)  # the OS watch is set up on the thread
        (root / ".git/config").write_text("[core]\n\tbare = false\n")  # dropped at once
        for text in ("one", "two", "three"):  # an editor's writes in a row: gathered while they come
            (root / "a.py").write_text(f"def a():\n    return {text!r}\n")
        (root / "docs/new.md").write_text("# New\n")
        deadline = time.monotonic() + 10
        seen: set[str] = set()
        while {str(root / "a.py"), str(root / "docs/new.md")} - seen and time.monotonic() < deadline:
            seen |= changes.wait()
        thread = changes._thread
    assert seen == {str(root / "a.py"), str(root / "docs/new.md")}
    assert not thread.is_alive()


def test_a_failure_to_watch_is_raised_as_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import watchfiles

    def refuse(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        raise OSError("OS file watch limit reached")
        yield  # a generator, as watchfiles.watch is

    monkeypatch.setattr(watchfiles, "watch", refuse)
    files = SourceFiles(str(folder(tmp_path / "src")), FileOptions(), ignored=[])
    with Changes(files) as changes, pytest.raises(Exception, match="cannot watch .*OS file watch limit reached"):
        changes.wait()
