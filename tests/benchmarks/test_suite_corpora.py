"""The suite's git corpus source: a folder of a fetched snapshot at a recorded commit, or Unavailable saying what to fetch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import suite_corpora as corpora


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> str:
    """A bare snapshot of ``owner/name`` laid out as ``fetch`` brings it (``<mirrors>/owner+name/repo``); its commit."""
    work = tmp_path / "work"
    (work / "lib" / "deep").mkdir(parents=True)
    (work / "lib" / "a.js").write_text("export const a = () => 1\n")
    (work / "lib" / "a.test.js").write_text("test('a', () => {})\n")
    (work / "lib" / "deep" / "b.go").write_text("package deep\n")
    (work / "README.md").write_text("# top\n")
    git("init", "-q", cwd=work)
    git("add", ".", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=work)
    git("clone", "-q", "--bare", str(work), str(tmp_path / "mirrors" / "owner+name" / "repo"), cwd=tmp_path)
    monkeypatch.setattr(corpora, "MIRRORS", tmp_path / "mirrors")
    return git("rev-parse", "HEAD", cwd=work)


def files(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


def test_a_folder_at_the_commit_is_the_corpus_root(mirror, tmp_path) -> None:
    corpus = corpora.git_tree("owner/name", mirror, "lib")
    folder = corpus.prepare(tmp_path / "home")
    assert files(folder) == ["a.js", "a.test.js", "deep/b.go"]
    assert corpus.prepare(tmp_path / "home") == folder  # made once
    assert corpus.unit == "owner-name" and corpus.label == f"github:owner/name@{mirror[:12]} lib/"


def test_pathspecs_choose_the_files(mirror, tmp_path) -> None:
    corpus = corpora.git_tree("owner/name", mirror, "", (":(exclude)*.test.js", ":(exclude)*.md"))
    assert files(corpus.prepare(tmp_path / "home")) == ["lib/a.js", "lib/deep/b.go"]
    assert corpus.index != corpora.git_tree("owner/name", mirror, "").index  # other files, another index


def test_a_glob_pathspec_keeps_to_the_folders_own_files(mirror, tmp_path) -> None:
    # As lua-behaviour's set.json asks: a plain "*" matches in every subfolder, ":(glob)*" only in the folder itself.
    assert files(corpora.git_tree("owner/name", mirror, "lib", ("*",)).prepare(tmp_path / "plain")) == [
        "a.js",
        "a.test.js",
        "deep/b.go",
    ]
    assert files(corpora.git_tree("owner/name", mirror, "lib", (":(glob)*",)).prepare(tmp_path / "glob")) == [
        "a.js",
        "a.test.js",
    ]
    spec = (":(glob)*.[jg][so]", ":(exclude)*.test.js")
    assert files(corpora.git_tree("owner/name", mirror, "lib", spec).prepare(tmp_path / "both")) == ["a.js"]


def test_what_is_missing_is_said(mirror) -> None:
    with pytest.raises(corpora.Unavailable, match="run `fetch github:other/repo`"):
        corpora.git_tree("other/repo", mirror)
    with pytest.raises(corpora.Unavailable, match="run `fetch github:owner/name`"):
        corpora.git_tree("owner/name", "0" * 40)
    with pytest.raises(corpora.Unavailable, match="no folder 'src'"):
        corpora.git_tree("owner/name", mirror, "src")


def test_a_set_json_names_a_git_corpus(mirror, tmp_path) -> None:
    spec = {"source": "git", "repo": "owner/name", "commit": mirror, "path": "lib/deep"}
    assert files(corpora.corpus_of(spec, tmp_path).prepare(tmp_path / "home")) == ["b.go"]
    with pytest.raises(corpora.Unavailable, match="unknown corpus source 'svn'"):
        corpora.corpus_of({"source": "svn"}, tmp_path)
