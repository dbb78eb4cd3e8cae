"""The resident search: one process that keeps a home's indexes and query model loaded and answers ``ctxrag search``
over a Unix socket until it has been idle for its idle time (``ctxrag.services.resident_socket`` says where, and
starts it; ``ctxrag server status`` lists it and ``ctxrag server stop`` stops it: ``ctxrag.services.residents``).

    python -m ctxrag.services.resident SOCKET HOME INDEX IDLE_MINUTES [PARENT_PID]

It takes the socket's lock first (a second one started for the same socket exits at once), waits until PARENT_PID
(the command that started it) has ended, so as not to slow it down, then opens and warms INDEX (a failure leaves a
``.failed`` note, so no other is started for a while), retires the resident searches of older code for the same home
and settings, and only then listens (so a caller never waits on a cold start: until then it searches itself).

A request is one JSON line, the search contract's fields (``SearchRequest.to_dict``); the answer one JSON line,
``SearchAnswer.to_dict()``, or an error object ``{"error": {"kind", "message"}}``, after an empty line every
``HEARTBEAT_S`` while the search runs. ``{"control": "status"}`` answers what it holds (pid, home, indexes, memory,
idle time); ``{"control": "stop"}``, like SIGTERM, stops it politely: the requests being answered are finished and
its socket removed. Searches go through ``WarmIndexes`` (one search thread, at most ``OPEN_INDEXES`` open; a newly
promoted version is reopened). Its log is the socket's ``.log``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxrag.services.resident_socket import (
    HEARTBEAT_S,
    exchange,
    failed_path,
    lineage,
    lock_path,
    log_path,
    running,
)
from ctxrag.tasks.common.search_request import SearchRequest

if TYPE_CHECKING:
    from ctxrag.services.warm import WarmIndexes

MAX_REQUEST_BYTES = 64 * 1024
OPEN_INDEXES = 4  # indexes a resident search keeps open (the least recently searched is closed past this)
log = logging.getLogger("ctxrag.services")


class ResidentServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Answers search requests on a Unix socket; shuts itself down after ``idle_s`` without a request, or when asked."""

    daemon_threads = False
    block_on_close = True  # server_close waits for the requests being answered

    def __init__(self, path: Path, home: Path, warm: WarmIndexes, idle_s: float) -> None:
        self.path, self.home, self.warm, self.idle_s = path, home, warm, idle_s
        self.started = time.time()
        self.last_request = time.monotonic()
        self.answering = 0
        self._count_lock = threading.Lock()
        self._stopping = threading.Event()
        super().__init__(os.fspath(path), RequestHandler)

    def busy(self) -> None:
        with self._count_lock:
            self.answering += 1

    def done(self) -> None:
        with self._count_lock:
            self.answering -= 1
            self.last_request = time.monotonic()

    def idle(self) -> bool:
        with self._count_lock:
            return self.answering == 0 and time.monotonic() - self.last_request > self.idle_s

    def stop(self, why: str) -> None:
        """Stop serving (from any thread but the serving one): the requests in flight are finished, then the socket
        is removed (``serve``)."""
        if not self._stopping.is_set():
            self._stopping.set()
            log.info("stopping: %s", why)
            threading.Thread(target=self.shutdown, name="ctxrag-stop", daemon=True).start()

    def stop_when_idle(self) -> None:
        """Wait (on a thread of its own) until the server has been idle for ``idle_s``, then stop it."""
        while not self.idle() and not self._stopping.is_set():
            time.sleep(min(5.0, max(self.idle_s / 4, 0.05)))
        self.stop(f"idle for {self.idle_s:.0f} s")

    def status(self) -> dict[str, Any]:
        """What ``ctxrag server status`` shows of this process."""
        with self._count_lock:
            idle = 0.0 if self.answering else time.monotonic() - self.last_request
        return {
            "pid": os.getpid(),
            "home": str(self.home),
            "socket": str(self.path),
            "indexes": self.warm.open_indexes(),
            "rss_bytes": resident_bytes(),
            "idle_seconds": round(idle, 1),
            "idle_limit_seconds": self.idle_s,
            "started_at": self.started,
        }


class RequestHandler(socketserver.StreamRequestHandler):
    """One connection: one request line, then heartbeats and one answer line; a peer of another user gets nothing."""

    server: ResidentServer

    def handle(self) -> None:
        if not same_user(self.request):
            log.warning("refused a connection from another user")
            return
        line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
        if len(line) > MAX_REQUEST_BYTES:
            return self._send({"error": {"kind": "too_large", "message": "request too large"}})
        try:
            given = json.loads(line)
        except ValueError:
            given = None
        if isinstance(given, dict) and "control" in given:  # not a search: the idle time goes on
            return self._send(self._control(given))
        self.server.busy()
        try:
            self._send(search_answer(self.server.warm, line, beat=self._beat))
        except OSError:  # the caller went away (it searched itself)
            pass
        finally:
            self.server.done()

    def _beat(self) -> None:
        self.wfile.write(b"\n")  # a heartbeat: the caller keeps waiting
        self.wfile.flush()

    def _control(self, given: dict[str, Any]) -> dict[str, Any]:
        if given["control"] == "status":
            return self.server.status()
        if given["control"] == "stop":
            self.server.stop(f"asked by pid {peer_pid(self.request)}")
            return {"stopping": os.getpid()}
        return {"error": {"kind": "invalid_request", "message": f"unknown control {given['control']!r}"}}

    def _send(self, answer: dict[str, Any]) -> None:
        self.wfile.write(json.dumps(answer).encode() + b"\n")


def search_answer(
    warm: WarmIndexes,
    line: bytes,
    contract: type[SearchRequest] = SearchRequest,
    beat: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """One request line's answer (``SearchAnswer.to_dict``) or an error object; ``beat`` is called every
    ``HEARTBEAT_S`` while the search runs."""
    from ctxrag.services.requests import ServiceError, parsed

    try:
        request = parsed(json.loads(line), contract=contract)
    except ValueError as error:
        return ServiceError("invalid_request", f"not a search request: {error}").to_dict()
    except ServiceError as error:
        return error.to_dict()
    pending = warm.submit(request)
    while True:
        try:
            return pending.result(timeout=HEARTBEAT_S).to_dict()
        except FutureTimeout:
            if beat is not None:
                beat()
        except ServiceError as error:
            log.info("search of %r not answered: %s", request.index, error.message)
            return error.to_dict()


def _credentials(connection: socket.socket) -> tuple[int, int, int] | None:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    pid, uid, gid = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return pid, uid, gid


def same_user(connection: socket.socket) -> bool:
    """Whether the peer runs as this process's user (SO_PEERCRED on Linux; elsewhere the socket folder's mode,
    0700, is the check)."""
    found = _credentials(connection)
    return found is None or found[1] == os.getuid()


def peer_pid(connection: socket.socket) -> int | None:
    found = _credentials(connection)
    return found[0] if found else None


def resident_bytes() -> int:
    """This process's resident memory (Linux: /proc; elsewhere its peak)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def retire_older(path: Path) -> list[int]:
    """Ask the resident searches of the same home and settings but other code (``lineage``) to stop: a new version
    of ctxrag replaces the old one's process instead of adding a second. The pids asked."""
    asked = []
    for other in path.parent.glob(f"{lineage(path)}-*.sock"):
        if other != path and running(other) and (said := exchange(other, {"control": "stop"}, limit_s=5.0)):
            asked.append(int(str(said.get("stopping", 0))))
    return asked


def serve(path: Path, home: Path, name: str, idle_minutes: float, parent: int | None = None) -> int:
    """Hold ``path``'s lock, wait for process ``parent`` to end, warm index ``name`` of ``home``, answer on ``path``
    until idle or stopped; 0 when another resident search holds the lock (it serves), 1 when the index cannot be
    opened (a ``.failed`` note says why)."""
    os.umask(0o077)
    lock = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
    if parent is not None:
        wait_for_end(parent)
    log_file = os.open(log_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_file, 1)
    os.dup2(log_file, 2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    from ctxrag.services.warm import WarmIndexes

    warm = WarmIndexes(home, max_open=OPEN_INDEXES)
    if (problem := warm.warm(name)) is not None:
        failed_path(path).write_text(json.dumps({"at": time.time(), "index": name, "reason": problem}))
        return 1
    failed_path(path).unlink(missing_ok=True)
    if retired := retire_older(path):
        log.info("asked the resident searches of older code to stop: pids %s", retired)
    path.unlink(missing_ok=True)  # a socket left by one that was killed (we hold the lock: no other serves it)
    server = ResidentServer(path, home, warm, idle_minutes * 60)
    signal.signal(signal.SIGTERM, lambda number, frame: server.stop("SIGTERM"))
    log.info("pid %d serving %s on %s", os.getpid(), home, path)
    threading.Thread(target=server.stop_when_idle, name="ctxrag-idle", daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        path.unlink(missing_ok=True)  # new callers search themselves (and start another) from here on
        server.server_close()  # waits for the requests being answered
    return 0


def wait_for_end(pid: int, seconds: float = 10.0) -> None:
    """Until process ``pid`` has ended (at most ``seconds``): a command's own exit is not slowed by this one's
    loading the model and the index on the same cores."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:  # a pid reused by another user's process: ours has ended
            return
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    path, home, name, idle, *parent = argv if argv is not None else sys.argv[1:]
    return serve(Path(path), Path(home), name, float(idle), int(parent[0]) if parent else None)


if __name__ == "__main__":
    sys.exit(main())
