"""The evaluation suite's corpora: where each comes from, how it is laid out in the scratch home, and its index.

A corpus is the unit of leave-one-corpus-out selection (``Corpus.unit``): every set asked of the same text (a
package's folder and its docstring-free copy, the docs with and without summaries) shares a unit. Results name a
corpus by ``Corpus.label``, relative to the project, ``../shared`` or the Python installation, never by a local path.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import suite_questions as questions_
from common import REPO, private_env, run_ctxrag, site_packages  # benchmarks/common.py: the project first on sys.path

from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.options import EmbeddingOptions

SITE = site_packages()
STDLIB = Path(sysconfig.get_paths()["stdlib"])
LEFT_OUT_DIRS = ("__pycache__", "test", "tests", "idle_test")  # never copied from the stdlib
MIRRORS = (
    REPO.parent / ".mirror"
)  # GitHub snapshots as `fetch github:<owner>/<name>` brings them: <owner>+<name>/repo, bare


class Unavailable(Exception):
    """This machine cannot give the corpus a set was written for (another version installed, another Python)."""


@dataclass(frozen=True)
class Corpus:
    unit: str  # leave-one-corpus-out unit
    index: str  # the index's name in the home
    label: str  # how results name it
    prepare: Callable[[Path], Path]  # home -> the file or folder to index (made once, then reused)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def shared(data: Path, relative: str) -> Corpus:
    """A file of ``../shared/data``; its first folder (``codebase``, ``anthropic_docs``) is the unit."""
    source = data / relative
    if not source.exists():
        raise Unavailable(f"../shared/data/{relative} is not there")
    return Corpus(
        slug(Path(relative).parts[0]),
        "shared-" + slug(Path(relative).stem),
        f"../shared/data/{relative}",
        lambda home: source,
    )


def site_package(path: str, distribution: str, version: str | None = None) -> Corpus:
    """An installed package's folder, as it is in site-packages; ``version``: the one its questions were written for."""
    try:
        installed = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise Unavailable(f"{distribution} is not installed") from None
    if version is not None and installed != version:
        raise Unavailable(f"written for {distribution} {version}, {installed} is installed")
    if not (SITE / path).is_dir():
        raise Unavailable(f"site-packages/{path} is not a folder")
    return Corpus(
        slug(distribution),
        "site-" + slug(path),
        f"site-packages/{path} ({distribution} {installed})",
        lambda home: SITE / path,
    )


def docstring_free(base: Corpus) -> Corpus:
    """``base`` copied without its docstrings (suite_questions.strip_docstrings); same unit."""
    name = "nodoc-" + base.index
    return Corpus(
        base.unit,
        name,
        f"{base.label}, docstrings removed",
        lambda home: questions_.prepare_repository(base.prepare(home), home, name)[0],
    )


def check_python(python: str | None) -> None:
    if python is not None and platform.python_version() != python:
        raise Unavailable(f"written for Python {python}, this is {platform.python_version()}")


def stdlib(paths: list[str], python: str | None = None) -> Corpus:
    """The listed stdlib packages and modules copied side by side into one folder (no caches, no tests)."""
    check_python(python)
    missing = [path for path in paths if not (STDLIB / path).exists()]
    if missing:
        raise Unavailable(f"not in this stdlib: {', '.join(missing)}")
    key = hashlib.sha256("\n".join(sorted(paths)).encode()).hexdigest()[:8]

    def fill(folder: Path) -> None:
        for path in sorted(paths):
            source = STDLIB / path
            if source.is_dir():
                shutil.copytree(source, folder / path, ignore=shutil.ignore_patterns(*LEFT_OUT_DIRS, "*.pyc"))
            else:
                shutil.copy2(source, folder / path)

    shown = ", ".join(sorted(paths))
    return Corpus(
        "stdlib",
        f"stdlib-{key}",
        f"stdlib of Python {platform.python_version()}: {shown}",
        lambda home: made_once(home / "sources" / f"stdlib-{key}", fill),
    )


def git_tree(repo: str, commit: str, path: str = "", pathspecs: tuple[str, ...] = ()) -> Corpus:
    """Folder ``path`` of GitHub's ``repo`` at ``commit`` (its files matching git ``pathspecs``, if any), extracted
    from the snapshot in ``../.mirror``; the unit is the repository."""
    git = ["git", "--git-dir", str(MIRRORS / repo.replace("/", "+") / "repo")]
    kind = lambda name: subprocess.run([*git, "cat-file", "-t", name], capture_output=True, text=True).stdout.strip()  # noqa: E731
    if kind(commit) != "commit":
        raise Unavailable(f"commit {commit} of {repo} is not in ../.mirror: run `fetch github:{repo}`")
    if kind(f"{commit}:{path}") != "tree":
        raise Unavailable(f"{repo} has no folder {path!r} at {commit}")
    name = (
        f"git-{slug(repo.split('/')[-1])}-"
        + hashlib.sha256(json.dumps([repo, commit, path, pathspecs]).encode()).hexdigest()[:8]
    )

    def fill(folder: Path) -> None:  # the folder's tree, so its files are at the corpus's top
        archive = subprocess.run(
            [*git, "archive", f"{commit}:{path}", "--", *pathspecs], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)

    shown = f"github:{repo}@{commit[:12]} {path or '.'}/" + "".join(f" {spec}" for spec in pathspecs)
    return Corpus(slug(repo), name, shown, lambda home: made_once(home / "sources" / name, fill))


def made_once(folder: Path, fill: Callable[[Path], None]) -> Path:
    """``folder``, filled the first time in a ``.partial`` sibling renamed when complete."""
    if not folder.exists():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        fill(partial)
        partial.rename(folder)
    return folder


def pydoc_topics(python: str | None = None) -> Corpus:
    """The language reference topics ``help()`` shows (``pydoc_data.topics``), one ``<name>.md`` each."""
    check_python(python)

    def prepare(home: Path) -> Path:
        from pydoc_data.topics import topics

        folder = home / "sources" / "pydoc-topics"
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in sorted(topics.items()):
            path = folder / f"{name}.md"
            if not path.exists():
                path.write_text(f"# {name}\n\n{text}", encoding="utf-8")
        return folder

    return Corpus("pydoc-topics", "pydoc-topics", f"pydoc_data.topics of Python {platform.python_version()}", prepare)


def readmes() -> Corpus:
    """The Markdown READMEs of the installed distributions, question headings neutralized (suite_questions.build_set)."""

    def prepare(home: Path) -> Path:
        folder = home / "sources" / "readmes"
        folder.mkdir(parents=True, exist_ok=True)
        questions_.build_set(questions_.readmes(), folder)
        return folder

    return Corpus("readmes", "readmes", "READMEs of the installed distributions (suite_questions)", prepare)


def embedder(context_tokens: int, model: str | None = None) -> dict:
    """The embedder ``ctxrag index --context-tokens N [--embedding-model MODEL]`` makes on offline defaults (manifest
    form; CTXRAG_EMBED_PRECISION's for the packaged model)."""
    forced = os.environ.get("CTXRAG_EMBED_PRECISION", "").strip().lower()
    spec = EmbeddingOptions(context_tokens=context_tokens, embedding_model=model).spec().to_dict()
    return spec | ({"precision": forced} if forced not in ("", "auto") and not model else {})


def ensure_index(
    home: Path, corpus: Corpus, context_tokens: int = EmbeddingOptions().context_tokens, model: str | None = None
) -> None:
    """Make the corpus's index in ``home`` with ``ctxrag index`` on offline defaults (``--context-tokens`` as asked)
    unless its live version was built with that embedder (a new version, another precision too: its rankings are made again)."""
    store = IndexStore(home)
    live = store.manifest(corpus.index) if store.live_version(corpus.index) is not None else None
    if (
        live
        and {**(built := live["config"]["embedder"]), **(wanted := embedder(context_tokens, model))} == built
        and built.keys() - {"precision"} == wanted.keys() - {"precision"}
    ):
        return
    source = corpus.prepare(home)
    print(
        f"indexing {corpus.label} as {corpus.index!r} (context cut to {context_tokens or 'all'} word pieces) ...",
        file=sys.stderr,
        flush=True,
    )
    started = time.perf_counter()
    run_ctxrag(
        [
            "index",
            str(source),
            "--name",
            corpus.index,
            "--context-tokens",
            str(context_tokens),
            "--json",
            *(["--embedding-model", model] if model else []),
        ],
        private_env(home, CTXRAG_PREFECT_SERVER="temporary"),
    )
    # How long the command took (the report's cold-start cost; a re-embedded index gets the re-index's).
    path = home / "suite" / "indexing.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    found = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**found, corpus.index: round(time.perf_counter() - started, 1)}, indent=1))


def indexing_seconds(home: Path) -> dict[str, float]:
    path = home / "suite" / "indexing.json"
    return json.loads(path.read_text()) if path.exists() else {}


def corpus_of(spec: dict, data: Path) -> Corpus:
    """A hand-written set's ``corpus`` (see the question format) on this machine, or Unavailable."""
    make = {
        "site-packages": lambda: site_package(
            spec["path"], spec.get("distribution", spec["path"]), spec.get("version")
        ),
        "stdlib": lambda: stdlib(list(spec["paths"]), spec.get("python")),
        "shared": lambda: shared(data, spec["path"]),
        "pydoc-topics": lambda: pydoc_topics(spec.get("python")),
        "git": lambda: git_tree(spec["repo"], spec["commit"], spec.get("path", ""), tuple(spec.get("pathspecs", ()))),
    }
    if spec.get("source") not in make:
        raise Unavailable(f"unknown corpus source {spec.get('source')!r}")
    return make[spec["source"]]()
