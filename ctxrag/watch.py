"""``ctxrag index SOURCE --watch``: the index run, then one more for each settled batch of saves that changes what
the index reads (``ctxrag.watched_files``), until Ctrl-C or SIGTERM.

Each run is the index flow, a Prefect flow run as ``ctxrag index`` makes one (tagged ``ctxrag-watch`` in the UI), so
it contextualizes and embeds only new and changed documents, drops removed ones and makes the new version live when
complete: the resident search and the services (``ctxrag mcp``, ``serve-search``) search it from their next request.
The watching process keeps what a run loads: the Prefect server, client and settings, the embedding model (loaded
before the first change), and what the last run counted (``cap_local_contexts``).

A change that fails (a file the index holds that can no longer be read, a JSON corpus that does not parse, a paid
call that fails, the index busy with another run) publishes nothing: the last good version stays live, one line says
why, and the watch goes on; the change is tried again with the next batch of saves.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxrag.errors import user_message
from ctxrag.runs import check_index_input, flow_session, index_flow
from ctxrag.storage.environment import ctxrag_home
from ctxrag.storage.secrets import redact
from ctxrag.tasks.options import IndexOptions
from ctxrag.watched_files import Changes, SourceFiles

if TYPE_CHECKING:
    from ctxrag.prefect_commands.server_mode import ServerMode
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec

WATCH_TAG = "ctxrag-watch"  # on every flow run of a watch: the Prefect UI filters them by it
STOP_SECONDS = 10.0  # a resident search this watch started: SIGTERM, then SIGKILL after this long
Report = dict[str, Any]


def watch_index(
    source: str,
    name: str,
    options: IndexOptions,
    show: Callable[[Report], None],
    note: Callable[[str], None],
    failed: Callable[[str], None],
    server: ServerMode | None = None,
) -> None:
    """Index SOURCE as ``name`` (``show`` gets the report; a failure of this first run is raised, as ``ctxrag index``
    raises it), then watch it: ``show`` gets each later run's report with ``watch`` added (the files that changed and
    the seconds from their batch to the live version), ``failed`` one line for a change that failed, ``note`` the
    rest. Returns when interrupted (Ctrl-C, or SIGTERM while it runs)."""
    from prefect import tags

    check_index_input(source, name, options)
    files = SourceFiles(source, options.files)
    started: Path | None = None
    with _sigterm_interrupts():
        try:
            with (
                Changes(files) as changes,
                flow_session(index_flow(name, options), server=server) as flow,
                tags(WATCH_TAG),
            ):

                def run() -> Report:
                    return dict(flow(source=source, name=name, options=options))

                before = files.picked()
                show(run())
                started = _warm(name, options)
                note(f"watching {source} ({len(before)} files) for changes; Ctrl-C stops")
                with _quiet_console():
                    _follow(name, changes, files, before, run, show, failed)
        except KeyboardInterrupt:
            note("stopped watching")
        finally:
            if started is not None:
                _stop_resident(started)


def _follow(
    name: str,
    changes: Changes,
    files: SourceFiles,
    before: set[str],
    run: Callable[[], Report],
    show: Callable[[Report], None],
    failed: Callable[[str], None],
) -> None:
    """Run the index for every batch of events that touches what it reads, until interrupted."""
    from ctxrag.storage.index_store import IndexStore

    store = IndexStore(ctxrag_home())
    pending: set[str] = set()
    while True:
        pending |= changes.wait()
        arrived = time.perf_counter()
        now = files.picked()
        touched = files.touched(pending, before, now)
        if not touched:
            pending.clear()  # nothing a run reads: a hidden, ignored or skipped file
            continue
        if (bad := files.unreadable(touched, lambda: _indexed(store, name))) is not None:
            failed(f"{bad[0]}: {bad[1]}; {_kept(store, name)}")
            continue
        try:
            report = run()
        except Exception as error:  # KeyboardInterrupt is not caught: it ends the watch
            failed(f"{_message(error)}; {_kept(store, name)}")
            continue
        pending.clear()
        before = now
        show({**report, "watch": {"files": touched, "seconds": round(time.perf_counter() - arrived, 3)}})


def _indexed(store: IndexStore, name: str) -> set[str]:
    """The documents of the live version (a folder's: paths relative to it)."""
    try:
        return set(store.chunk_column(name, "doc_id") or ())
    except Exception:  # an index that cannot be read now: the run says why
        return set()


def _kept(store: IndexStore, name: str) -> str:
    version = store.live_version(name)
    if version is None:
        return f"index {name!r} has no live version"
    return f"index {name!r} keeps version {version.name}"


def _message(error: Exception) -> str:
    """The one line for a failed run: the user's error as the command shows it, else the error's type and text."""
    return user_message(error) or redact(f"{type(error).__name__}: {error}")


def _warm(name: str, options: IndexOptions) -> Path | None:
    """Before the first change, load what its run will use that a run with nothing to publish did not: the local
    model as the index embeds (~2 s in a new process), the caps of the live version's contexts (what embedding keys
    are made of), the libraries a publishing run imports (pandas, bm25s: ~1 s); and start the home's resident search
    if none runs (the one started here is stopped when the watch ends)."""
    import importlib

    from prefect.task_runners import ThreadPoolTaskRunner

    from ctxrag.services import resident_socket as resident
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.common.providers import Provider
    from ctxrag.tasks.embedding.embed import preload_local_model
    from ctxrag.tasks.embedding.precision import with_index_precision
    from ctxrag.tasks.runners import make_task_runner

    home = ctxrag_home()
    store = IndexStore(home)
    if options.embedding.embedder == Provider.LOCAL and isinstance(
        make_task_runner(options.task_runner), ThreadPoolTaskRunner
    ):
        spec, _ = with_index_precision(options.embedding.spec(), store.manifest(name))
        preload_local_model(spec)
        _count_contexts(store, name, spec)
    for module in ("pandas", "bm25s"):
        importlib.import_module(module)
    path = resident.socket_path(home)
    if path is None or resident.running(path):
        return None
    resident.start(path, home, name)
    return path


def _count_contexts(store: IndexStore, name: str, spec: EmbedderSpec) -> None:
    """The embedded texts of the live version's rows made once (each long context's cap is remembered), when the
    version has no more rows than are remembered."""
    from ctxrag.tasks.embedding.windows import CAPPED_KEPT

    version = store.live_version(name)
    if not spec.context_tokens or version is None or not (version / "chunks.parquet").is_file():
        return
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(version / "chunks.parquet")
    if rows.metadata.num_rows <= CAPPED_KEPT:
        table = rows.read(columns=["context", "content"])
        spec.embedded_texts(table["context"].to_pylist(), table["content"].to_pylist())


def _stop_resident(path: Path) -> None:
    """Stop the resident search this process started for ``path`` (its child, found by its command line: it may not
    hold its socket's lock yet), and wait until it has exited."""
    import psutil

    for child in psutil.Process().children():
        try:
            command = child.cmdline()
            if "ctxrag.services.resident" in command and os.fspath(path) in command:
                child.terminate()
                child.wait(STOP_SECONDS)
        except psutil.TimeoutExpired:
            child.kill()
        except psutil.Error:  # gone already
            continue


@contextmanager
def _quiet_console() -> Iterator[None]:
    """Within the block Prefect's console lines are its warnings and errors only: a save prints one line of ctxrag's
    (each run's full log stays in the Prefect UI). The handlers' levels are set back after it."""
    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger()] + [
        logger
        for logger_name, logger in logging.Logger.manager.loggerDict.items()
        if logger_name.startswith("prefect") and isinstance(logger, logging.Logger)
    ]
    handlers = {
        handler for logger in loggers for handler in logger.handlers if isinstance(handler, PrefectConsoleHandler)
    }
    levels = {handler: handler.level for handler in handlers}
    for handler in handlers:
        handler.setLevel(max(handler.level, logging.WARNING))
    try:
        yield
    finally:
        for handler, level in levels.items():
            handler.setLevel(level)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within the block SIGTERM ends the watch as Ctrl-C does (the main thread only; elsewhere nothing changes)."""
    try:
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
