"""What ``ctxrag index SOURCE --watch`` watches: SOURCE's file events (watchfiles, on a thread of its own), and which
of them change what an index run reads.

An event counts when its file is one a run loads, now or at the last run: picked as the loader picks a folder's
files (``.gitignore`` files, ``--include``/``--exclude``, no hidden or build folders) and within ``--max-file-bytes``;
or when the set of such files changed (a ``.gitignore`` edited, a folder removed). Events under ``$CTXRAG_HOME``,
``PREFECT_HOME`` and ctxrag's caches never count, so an index kept inside SOURCE does not re-index itself. A JSON
corpus is watched as one file (through its folder: an editor that saves by renaming replaces the file).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from ctxrag.storage.environment import cache_dir, ctxrag_home, models_dir
from ctxrag.storage.errors import UserError
from ctxrag.tasks.load.directory import SKIP_DIRS, iter_files, read_text
from ctxrag.tasks.options import FileOptions

# Saves are gathered until none came for QUIET_MS (an editor's write-and-rename, a formatter's rewrite, a checkout of
# many files arrive as one batch), at most MAX_GATHER_MS; changes made during a run are gathered for the next one.
QUIET_MS, MAX_GATHER_MS = 200, 1_600
STOP_SECONDS = 5.0  # the watching thread ends within a step (QUIET_MS) of being told


def ignored_folders() -> list[Path]:
    """Where ctxrag and Prefect write while they run: their events never start a run."""
    prefect = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    return [folder.resolve() for folder in (ctxrag_home(), prefect, cache_dir(), models_dir())]


class SourceFiles:
    """SOURCE's files as an index run reads them, and which events touch them."""

    def __init__(self, source: str, files: FileOptions, ignored: list[Path] | None = None) -> None:
        path = Path(source).resolve()
        self.single = None if path.is_dir() else path  # a JSON corpus
        self.root = path if self.single is None else path.parent
        self.files = files
        self.ignored = ignored_folders() if ignored is None else ignored

    def wanted(self, path: str) -> bool:
        """Whether an event of ``path`` may matter (a cheap test on its name, before a batch is looked at)."""
        event = Path(path)
        if any(event.is_relative_to(folder) for folder in self.ignored):
            return False
        if self.single is not None:
            return event == self.single
        try:
            *folders, name = event.relative_to(self.root).parts or ("",)
        except ValueError:
            return False
        if any(folder.startswith(".") or folder in SKIP_DIRS for folder in folders):
            return False
        return not name.startswith(".") or name == ".gitignore"

    def picked(self) -> set[str]:
        """The files a run would load now, relative to the root: picked as the loader picks them, within the size
        limit (a file that cannot be read or decoded is still picked: ``unreadable`` tells it)."""
        if self.single is not None:
            return {self.single.name} if self.single.is_file() else set()
        limit = self.files.max_file_bytes
        found: set[str] = set()
        for file in iter_files(self.root, [], self.files.include, self.files.exclude):
            try:
                if limit and file.stat().st_size > limit:
                    continue
            except OSError:
                continue  # gone meanwhile: its own event follows
            found.add(file.relative_to(self.root).as_posix())
        return found

    def touched(self, paths: set[str], before: set[str], now: set[str]) -> list[str]:
        """The files a run reads now or read before (``now``, ``before``: ``picked``) among the changed ``paths``, and
        those picked or dropped since (a ``.gitignore`` edited, a folder moved), relative to the root, sorted."""
        relative = set()
        for path in paths:
            try:
                relative.add(Path(path).relative_to(self.root).as_posix())
            except ValueError:
                continue
        return sorted({name for name in relative if name in now or name in before} | (now ^ before))

    def unreadable(self, names: list[str], indexed: Callable[[], set[str]]) -> tuple[str, str] | None:
        """The first of ``names`` that a run could not read now (unreadable, binary, not UTF-8) though the index holds
        it (``indexed``: the live version's documents, asked only then), with why: a run would drop it, so the watch
        keeps the version. None for a JSON corpus (the run fails on one it cannot read, and says why)."""
        if self.single is not None:
            return None
        failing = []
        for name in names:
            if (path := self.root / name).is_file():
                text, why = read_text(path, self.files.max_file_bytes)
                if text is None:
                    failing.append((name, why))
        held = indexed() if failing else set()
        return next(((str(self.root / name), why) for name, why in failing if name in held), None)


class Changes:
    """SOURCE's file events gathered on a thread (watchfiles, the OS's notifications): ``wait`` returns the paths
    changed since it was last called, as soon as a batch has settled. A context manager: leaving it stops the thread."""

    def __init__(self, files: SourceFiles) -> None:
        self.files = files
        self._batches: queue.SimpleQueue[set[str] | BaseException] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ctxrag-watch", daemon=True)

    def __enter__(self) -> Changes:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(STOP_SECONDS)

    def _watch(self) -> None:
        from watchfiles import watch

        try:
            for changes in watch(
                self.files.root,
                watch_filter=lambda _, path: self.files.wanted(path),
                debounce=MAX_GATHER_MS,
                step=QUIET_MS,
                stop_event=self._stop,
                rust_timeout=1_000,
                recursive=self.files.single is None,
                raise_interrupt=False,
            ):
                self._batches.put({path for _, path in changes})
        except Exception as error:  # e.g. the OS's limit of watched folders: the command says it and ends
            self._batches.put(UserError(f"cannot watch {self.files.root}: {error}"))

    def wait(self, poll_seconds: float = 0.5) -> set[str]:
        """The paths of the next batch of events and of any batch already waiting (blocks until there is one; Ctrl-C
        interrupts it); a failure of the watching thread is raised."""
        while True:
            try:
                first = self._batches.get(timeout=poll_seconds)
                break
            except queue.Empty:
                if not self._thread.is_alive():
                    raise UserError(f"stopped watching {self.files.root}: the watching thread ended") from None
        paths: set[str] = set()
        for batch in (first, *self._drain()):
            if isinstance(batch, BaseException):
                raise batch
            paths |= batch
        return paths

    def _drain(self) -> list[set[str] | BaseException]:
        waiting = []
        while True:
            try:
                waiting.append(self._batches.get_nowait())
            except queue.Empty:
                return waiting
