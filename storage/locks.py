"""The locks that refuse at once (a second build of an index, gc during a build): an ``flock`` on a file, shared or
exclusive, taken without waiting. Locks that wait (the journal's, the local server's start) use ``filelock``."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def held_or_refused(path: Path, refusal: Exception, shared: bool = False) -> Iterator[None]:
    """Hold ``path``'s lock (shared, or exclusive) for the block; raise ``refusal`` at once if it is held against us."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise refusal from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
