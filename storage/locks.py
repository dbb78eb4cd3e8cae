"""The locks that refuse at once (a second build of an index, gc during a build): an ``flock`` on a file, shared or
exclusive, taken without waiting. Locks that wait use ``filelock``: the journal's, the local server's start, and
``one_process_at_a_time`` for what is made once per machine (the precision decision, the model exports)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from ctxrag.storage.environment import private_dirs


@contextmanager
def held_or_refused(path: Path, refusal: Exception, shared: bool = False) -> Iterator[None]:
    """Hold ``path``'s lock (shared, or exclusive) for the block; raise ``refusal`` at once if it is held against us."""
    private_dirs(path.parent)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise refusal from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def one_process_at_a_time(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock for the block, waiting for it: one thread of one process of the machine at a time makes
    what the others then read (two would make it twice, and time each other's work). A folder that cannot be
    written only means no lock."""
    try:
        private_dirs(path.parent)
        lock = FileLock(path)  # a lock of its own: it excludes this process's other threads too
        lock.acquire()
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.release()
