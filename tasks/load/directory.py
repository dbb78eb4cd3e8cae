"""A directory of source code, Markdown and text files, walked in sorted order and chunked by ``syntax`` (code with
a grammar) and ``chunking``.

Files are picked as a repository tool would: ``.gitignore`` files (via ``pathspec``), include/exclude patterns, a
size limit, no generated or minified files, and no symlinks (so nothing outside the tree and nothing twice).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from pathspec import GitIgnoreSpec

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.common.languages import BY_EXTENSION, BY_FILENAME, PROSE_EXTENSIONS
from ctxrag.tasks.common.models import DEFAULT_MAX_FILE_BYTES, Chunk, Corpus, CorpusError, Document
from ctxrag.tasks.load.chunking import DEFAULT_BUDGET
from ctxrag.tasks.load.markup import DOCS_EXTENSIONS, as_markdown
from ctxrag.tasks.load.syntax import chunk_file

SKIP_DIRS: frozenset[str] = frozenset({"__pycache__", "node_modules", "venv", "build", "dist"})  # plus hidden ones
MARKDOWN_EXTENSIONS: frozenset[str] = frozenset({"md", "markdown"}) | DOCS_EXTENSIONS  # docs pages: markup.as_markdown
# Code: every other extension with a language (tasks/common/languages.py, the one list), and its named files.
CODE_EXTENSIONS: frozenset[str] = frozenset(BY_EXTENSION) - MARKDOWN_EXTENSIONS - PROSE_EXTENSIONS
CODE_FILENAMES: frozenset[str] = frozenset(BY_FILENAME)
BINARY_SNIFF = 8192  # a NUL byte within this many leading bytes marks a file as binary
MINIFIED_SUFFIXES: tuple[str, ...] = (".min.js", ".min.mjs", ".min.css")
GENERATED_SNIFF = 32 * 1024  # characters judged for the average line length
MAX_AVERAGE_LINE = 300  # longer lines on average (in a sample of at least 1 KiB) mark a file as minified
GENERATED_MARKERS: tuple[str, ...] = ("@generated", "DO NOT EDIT")  # "Code generated ... DO NOT EDIT." included
MARKER_LINES = 5  # markers count in this many first lines


def file_kind(path: Path) -> str:
    """ "code", "markdown" or "text", from the file's name."""
    if path.name in CODE_FILENAMES:
        return "code"
    extension = path.suffix.lower().lstrip(".")
    if extension in CODE_EXTENSIONS:
        return "code"
    if extension in MARKDOWN_EXTENSIONS:
        return "markdown"
    return "text"


def compile_patterns(lines: Iterable[str]) -> tuple[GitIgnoreSpec, list[str]]:
    """A ``pathspec`` gitignore spec of the usable lines, and the lines it cannot compile (for the caller to report)."""
    usable: list[str] = []
    bad: list[str] = []
    for line in lines:
        try:
            GitIgnoreSpec.from_lines([line])
        except (re.error, ValueError):  # pathspec's GitIgnorePatternError is a ValueError; bad ranges are re.error
            bad.append(line)
        else:
            usable.append(line)
    return GitIgnoreSpec.from_lines(usable), bad


def filter_spec(patterns: list[str] | None, option: str) -> GitIgnoreSpec | None:
    """``--include`` / ``--exclude`` patterns as a spec (None when there are none); a bad one is a ValueError."""
    if not patterns:
        return None
    spec, bad = compile_patterns(patterns)
    if bad:
        raise InvalidInput(f"{option}: not a valid gitignore-style pattern: {', '.join(map(repr, bad))}")
    return spec


def symlink_note(path: str, root_real: str) -> str:
    """Why a symlink is skipped: links are never followed, so nothing outside the tree is read and nothing twice."""
    target = os.path.realpath(path)
    if os.path.commonpath([root_real, target]) != root_real:
        return f"symlink to outside the source root ({target})"
    if not os.path.exists(path):
        return "broken symlink or symlink loop"
    return "symlink within the tree, not followed (its target is loaded at its own path)"


def iter_files(
    root: Path,
    warnings: list[str] | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
) -> list[Path]:
    """Files under ``root`` in sorted order, as a repository tool picks them.

    Skipped silently: hidden entries, build/vendor directories, paths matched by a ``.gitignore`` (nested ones apply
    to their own folder, deeper ones win) or by ``exclude``, and files not matched by ``include`` (both gitignore-style
    patterns relative to ``root``). Symlinks and directories that cannot be listed are reported in ``warnings``.
    """
    notes: list[str] = warnings if warnings is not None else []
    wanted, unwanted = filter_spec(include, "--include"), filter_spec(exclude, "--exclude")
    root_real = os.path.realpath(root)
    inherited: dict[str, list[tuple[str, GitIgnoreSpec]]] = {}  # folder -> (its prefix, spec) of each .gitignore

    def unlistable(error: OSError) -> None:
        notes.append(f"{error.filename}: skipped: cannot list directory ({error.strerror or error})")

    def keep(folder: str, relpath: str, is_dir: bool, ignores: list[tuple[str, GitIgnoreSpec]]) -> bool:
        name = relpath.rpartition("/")[2]
        if name.startswith(".") or (is_dir and name in SKIP_DIRS):
            return False
        path = relpath + "/" if is_dir else relpath
        for prefix, spec in reversed(ignores):  # the deepest .gitignore with a matching pattern decides
            ignored = spec.check_file(path[len(prefix) :]).include
            if ignored is not None:
                if ignored:
                    return False
                break
        if (unwanted and unwanted.match_file(path)) or (not is_dir and wanted and not wanted.match_file(path)):
            return False
        if os.path.islink(link := os.path.join(folder, name)):
            notes.append(f"{link}: skipped: {symlink_note(link, root_real)}")
            return False
        return True

    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(root, onerror=unlistable):
        ignores = inherited.pop(folder, [])
        base = Path(folder).relative_to(root).as_posix()
        prefix = "" if base == "." else f"{base}/"
        if ".gitignore" in filenames:
            gitignore = Path(folder, ".gitignore")
            try:
                spec, bad = compile_patterns(gitignore.read_text(encoding="utf-8", errors="replace").splitlines())
            except OSError as exc:
                notes.append(f"{gitignore}: not applied: cannot read file ({exc.strerror or exc})")
            else:
                ignores = [*ignores, (prefix, spec)]
                if bad:
                    notes.append(f"{gitignore}: invalid patterns ignored: {', '.join(map(repr, bad))}")
        dirnames[:] = [name for name in sorted(dirnames) if keep(folder, prefix + name, True, ignores)]
        inherited.update((os.path.join(folder, name), ignores) for name in dirnames)
        found.extend(Path(folder, name) for name in sorted(filenames) if keep(folder, prefix + name, False, ignores))
    return found


def read_text(path: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> tuple[str | None, str]:
    """The file's text, or (None, why it was skipped)."""
    try:
        size = path.stat().st_size
        if max_file_bytes and size > max_file_bytes:
            return None, f"too large ({size} bytes; the limit is {max_file_bytes})"
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"cannot read file ({exc.strerror or exc})"
    if b"\0" in raw[:BINARY_SNIFF]:
        return None, "binary (NUL byte in the first 8 KiB)"
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (invalid byte at offset {exc.start})"


def generated(path: Path, text: str) -> str | None:
    """Why the file looks generated or minified, or None."""
    name = path.name.lower()
    if name.endswith(MINIFIED_SUFFIXES):
        return f"minified (*{name[name.rindex('.min.') :]})"
    head = text[:GENERATED_SNIFF]
    first_lines = "\n".join(head.splitlines()[:MARKER_LINES])
    for marker in GENERATED_MARKERS:
        if marker in first_lines:
            return f"generated ({marker!r} in the first {MARKER_LINES} lines)"
    prose = file_kind(path) == "markdown" or path.suffix.lower().lstrip(".") in PROSE_EXTENSIONS
    average = len(head) / (head.count("\n") + 1)
    if not prose and len(head) >= 1024 and average > MAX_AVERAGE_LINE:
        return f"minified (average line length {average:.0f} characters)"
    return None


def load_directory(
    path: str | Path,
    budget: int = DEFAULT_BUDGET,
    *,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> Corpus:
    """Load every text file under ``path`` (picked by ``iter_files``) as a document and chunk it by kind with a
    ``budget`` in characters.

    ``doc_id`` and ``title`` are the POSIX path relative to ``path``; chunk ids are ``f"{relpath}#{index}"``.
    Binary, non-UTF-8, unreadable, empty, too large (over ``max_file_bytes``; 0: no limit), generated and minified
    files are skipped with a warning; no loadable file is a ``CorpusError``.
    """
    root = Path(path)
    if not root.is_dir():
        raise CorpusError(f"{root}: not a directory")
    corpus = Corpus(source=str(root))
    for file in iter_files(root, corpus.warnings, include, exclude):
        relpath = file.relative_to(root).as_posix()
        if not file.is_file():
            corpus.warnings.append(f"{file}: skipped: not a regular file")
            continue
        text, why = read_text(file, max_file_bytes)
        if text is None:
            corpus.warnings.append(f"{file}: skipped: {why}")
            continue
        if not text.strip():
            corpus.warnings.append(f"{file}: skipped: empty file")
            continue
        if reason := generated(file, text):
            corpus.warnings.append(f"{file}: skipped: {reason}")
            continue
        kind, description = file_kind(file), ""
        if kind == "markdown":
            page = as_markdown(text, file.suffix.lower().lstrip("."))
            text, description = page.text, page.description
        document = Document(
            doc_id=relpath, title=relpath, content=text, kind=kind, source=str(file), description=description
        )
        pieces, by_regex = chunk_file(text, kind, relpath, budget)
        pieces = [piece for piece in pieces if piece.content.strip()]
        if by_regex:
            corpus.chunked_by_regex.append(relpath)
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
