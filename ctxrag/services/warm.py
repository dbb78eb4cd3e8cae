"""Indexes kept open for a service's many searches, each reopened when a newer version goes live.

Every request first reads the index's live pointer and the mtime of its tuning file (a ~100-byte read and a stat:
tens of microseconds); when either changed since the index was opened (``ctxrag index`` promoted a version,
``ctxrag tune`` chose a strategy, the index was deleted), the open ``Index`` is replaced before the search runs. So a
service never needs a restart to see what a later run published. Searches run one at a time (an ``Index`` is not
shared between threads), each handed to one search thread (``submit``): the resident search waits for its future on
its connection threads, the MCP and HTTP doors await it on their event loops.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ctxrag.services.requests import ServiceError
from ctxrag.storage.errors import UserError
from ctxrag.tasks.common.hits import SearchAnswer
from ctxrag.tasks.common.search_request import SearchRequest

if TYPE_CHECKING:
    from ctxrag.searching import Index

log = logging.getLogger("ctxrag.services")
Key = tuple[str, int | None]  # (live version, tuning.json's mtime in ns)
T = TypeVar("T")
MAX_OPEN = 8  # indexes a service keeps open at once (the least recently searched is closed past this)


class WarmIndexes:
    """The indexes of one home, opened on first use and kept open; ``search`` and ``listing`` are what both doors
    serve."""

    def __init__(self, home: Path, max_open: int = MAX_OPEN) -> None:
        from ctxrag.storage.index_store import IndexStore

        self.home = home
        self._store = IndexStore(home)
        self._open: OrderedDict[str, tuple[Key, Index]] = OrderedDict()  # the most recently searched last
        self.max_open = max_open
        # Every search runs on this one thread, one at a time (an Index is not shared between threads).
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxrag-search")
        self.reopened = 0  # how many times a newer version replaced an open one (tests, logs)

    def search(self, request: SearchRequest) -> SearchAnswer:
        """The answer to ``request``; any problem is a ``ServiceError``."""
        return self.submit(request).result()

    def submit(self, request: SearchRequest) -> Future[SearchAnswer]:
        """``search`` handed to the search thread: its answer's future (an async door awaits it, so no thread of
        its own waits)."""
        return self._thread.submit(self._answer, request)

    def _answer(self, request: SearchRequest) -> SearchAnswer:
        try:
            return self._run(request.index, lambda index: index.answer(request))
        except UserError as error:
            raise ServiceError.of(error) from None
        except ServiceError:
            raise
        except Exception:
            log.exception("search of index %r failed", request.index)
            raise ServiceError(
                "internal", "the search failed inside ctxrag (a bug); the service's log has the traceback"
            ) from None

    def run(self, name: str, work: Callable[[Index], T]) -> T:
        """``work`` done with index ``name`` at its live version, on the search thread; once more on the index
        reopened when a version is pruned under it (a ``FileNotFoundError``)."""
        return self.submit_work(name, work).result()

    def submit_work(self, name: str, work: Callable[[Index], T]) -> Future[T]:
        """``run`` handed to the search thread: its result's future (an async door awaits it)."""
        return self._thread.submit(self._run, name, work)

    def _run(self, name: str, work: Callable[[Index], T]) -> T:
        try:
            return work(self._current(name))
        except FileNotFoundError:  # a version pruned between the check and the read: reopen once and retry
            return work(self._current(name, force=True))

    def warm(self, name: str) -> str | None:
        """Open index ``name`` and run one search, so the first caller's does not load the model; the reason (also
        logged) when the index cannot be opened, else None."""
        try:
            self.search(SearchRequest(query="warm up the index", index=name, k=1))
        except ServiceError as error:
            log.warning("index %r not warmed: %s", name, error.message)
            return error.message
        return None

    def open_indexes(self) -> list[dict[str, str]]:
        """The indexes open now (name and version), the most recently searched last."""
        return [{"name": name, "version": key[0]} for name, (key, _) in list(self._open.items())]

    def listing(self) -> list[dict[str, Any]]:
        """The home's indexes, as ``ctxrag list`` reads them."""
        from ctxrag.listing import index_listing

        try:
            return index_listing(self.home)
        except UserError as error:
            raise ServiceError.of(error) from None

    def _current(self, name: str, force: bool = False) -> Index:
        """The open index ``name`` at its live version (opened or reopened here)."""
        import ctxrag

        key = self._key(name)
        if key is None:
            self._open.pop(name, None)
            self._store.open(name)  # raises UnknownIndexError, naming the indexes there are
        opened = self._open.get(name)
        if opened is None or opened[0] != key or force:
            if opened is not None:
                self.reopened += 1
                log.warning("index %r: version %s is live; reopening", name, key[0] if key else None)
            self._open[name] = (key, ctxrag.open(name, long_lived=True))  # type: ignore[assignment]
        self._open.move_to_end(name)
        while len(self._open) > self.max_open:  # the least recently searched index is closed
            closed, _ = self._open.popitem(last=False)
            log.info("index %r closed: %d indexes are open at most", closed, self.max_open)
        return self._open[name][1]

    def _key(self, name: str) -> Key | None:
        version = self._store.live_version(name)
        if version is None:
            return None
        try:
            tuned: int | None = (version.parent.parent / "tuning.json").stat().st_mtime_ns
        except FileNotFoundError:
            tuned = None
        return version.name, tuned
