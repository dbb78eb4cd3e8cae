"""What keeps the artifact store's files whole: a journal's write lock, shared by the threads of a process and held
against other processes (``journal_lock``), and Parquet files written whole and durably (``write_parquet_atomic``)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock
import pyarrow as pa
import pyarrow.parquet as pq

from ctxrag.storage.environment import PRIVATE_FILE, private_dirs
from ctxrag.storage.errors import UserError

JOURNAL_LOCK_TIMEOUT_S = 600.0  # an append takes milliseconds: a lock held this long is a stuck process, said as one


class CorruptJournalError(UserError, ValueError):
    """A journal line other than a torn last one is not a JSON row; the message names the file and the line."""


class JournalLockTimeout(UserError, TimeoutError):
    """The journal's lock was not free within ``JOURNAL_LOCK_TIMEOUT_S``: another process holds it (not retried)."""


_journal_locks: dict[Path, tuple[threading.RLock, filelock.FileLock]] = {}
_journal_locks_guard = threading.Lock()
os.register_at_fork(after_in_child=_journal_locks.clear)  # a forked child starts with no lock another thread held


def _locks_of(journal: Path) -> tuple[threading.RLock, filelock.FileLock]:
    """This process's two locks of one journal: made once, shared by every thread."""
    path = journal.absolute()
    with _journal_locks_guard:
        if path not in _journal_locks:
            lock_file = path.with_name(path.name + ".lock")
            _journal_locks[path] = (threading.RLock(), filelock.FileLock(lock_file, thread_local=True))
        return _journal_locks[path]


@contextmanager
def journal_lock(journal: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold the journal's write lock: threads of this process queue on a thread lock (a ``flock`` taken through two
    open files of one process blocks the other thread, while one shared descriptor excludes nobody), then one of them
    takes the file lock against other processes. Re-entrant within a thread; never waits forever (``JournalLockTimeout``)."""
    limit = JOURNAL_LOCK_TIMEOUT_S if timeout is None else timeout
    in_process, across_processes = _locks_of(journal)
    if not in_process.acquire(timeout=limit):
        raise JournalLockTimeout(f"{journal}: another thread of this process held the journal's lock for {limit:g} s")
    try:
        try:
            across_processes.acquire(timeout=limit)
        except filelock.Timeout:
            raise JournalLockTimeout(
                f"{journal}: another process held the journal's lock ({across_processes.lock_file}) for {limit:g} s"
            ) from None
        try:
            yield
        finally:
            across_processes.release()
    finally:
        in_process.release()


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` so that readers see either nothing or the whole file, durably: the file and then its
    folder are fsynced, so once this returns the file survives a power loss (compaction relies on it before it
    truncates the journal)."""
    private_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(table, temporary)
        _fsync(temporary)
        os.replace(temporary, path)
        _fsync(path.parent)
    finally:
        temporary.unlink(missing_ok=True)


def _private_opener(path: str, flags: int) -> int:
    """``open``'s opener for a file made 0600 (the ledger's and the stores' journals)."""
    return os.open(path, flags, PRIVATE_FILE)


def _fsync(path: Path) -> None:
    """Flush a file's data, or a folder's entries (a rename), to the disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
