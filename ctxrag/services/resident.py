"""The resident search: one process that keeps a home's indexes and query model loaded and answers ``ctxrag search``
over a Unix socket until it has been idle for its idle time (``ctxrag.services.resident_socket`` says where, and
starts it).

    python -m ctxrag.services.resident SOCKET HOME INDEX IDLE_MINUTES [PARENT_PID]

It takes the socket's lock first (a second one started for the same socket exits at once), waits until PARENT_PID
(the command that started it) has ended, so as not to slow it down, then opens and warms INDEX, and only then
listens (so a caller never waits on a cold start: until then it searches itself). A request is one JSON line, the
search contract's fields (``SearchRequest.to_dict``); the answer one JSON line, ``SearchAnswer.to_dict()``, or an
error object ``{"error": {"kind", "message"}}``. Searches go
through ``WarmIndexes`` (one search thread; a newly promoted version is reopened). Its log is the socket's ``.log``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import socketserver
import struct
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxrag.services.resident_socket import lock_path, log_path
from ctxrag.tasks.common.search_request import SearchRequest

if TYPE_CHECKING:
    from ctxrag.services.warm import WarmIndexes

MAX_REQUEST_BYTES = 64 * 1024
log = logging.getLogger("ctxrag.services")


class ResidentServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Answers search requests on a Unix socket; shuts itself down after ``idle_s`` without a request."""

    daemon_threads = False
    block_on_close = True  # server_close waits for a request being answered

    def __init__(self, path: Path, warm: WarmIndexes, idle_s: float) -> None:
        self.warm = warm
        self.idle_s = idle_s
        self.last_request = time.monotonic()
        self.answering = 0
        self._count_lock = threading.Lock()
        super().__init__(os.fspath(path), RequestHandler)

    def answer(self, line: bytes) -> dict[str, Any]:
        """The answer to one request line."""
        with self._count_lock:
            self.answering += 1
        try:
            return search_answer(self.warm, line)
        finally:
            with self._count_lock:
                self.answering -= 1
                self.last_request = time.monotonic()

    def idle(self) -> bool:
        with self._count_lock:
            return self.answering == 0 and time.monotonic() - self.last_request > self.idle_s

    def stop_when_idle(self) -> None:
        """Wait (on a thread of its own) until the server has been idle for ``idle_s``, then shut it down."""
        while not self.idle():
            time.sleep(min(5.0, max(self.idle_s / 4, 0.05)))
        log.info("idle for %.0f s: exiting", self.idle_s)
        self.shutdown()


class RequestHandler(socketserver.StreamRequestHandler):
    """One connection: one request line, one answer line; a peer of another user gets nothing."""

    server: ResidentServer

    def handle(self) -> None:
        if not same_user(self.request):
            log.warning("refused a connection from another user")
            return
        line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
        answer = self.server.answer(line) if len(line) <= MAX_REQUEST_BYTES else {"error": "request too large"}
        self.wfile.write(json.dumps(answer).encode() + b"\n")


def same_user(connection: socket.socket) -> bool:
    """Whether the peer runs as this process's user (SO_PEERCRED on Linux; elsewhere the socket folder's mode,
    0700, is the check)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    _, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return bool(uid == os.getuid())


def search_answer(warm: WarmIndexes, line: bytes, contract: type[SearchRequest] = SearchRequest) -> dict[str, Any]:
    """Run one request line's search: the answer (``SearchAnswer.to_dict``), or an error object (the caller then
    searches in its own process, which gives the error as ``ctxrag search`` always has)."""
    from ctxrag.services.requests import ServiceError, parsed

    try:
        request = parsed(json.loads(line), contract=contract)
    except ValueError as error:
        return ServiceError("invalid_request", f"not a search request: {error}").to_dict()
    except ServiceError as error:
        return error.to_dict()
    try:
        return warm.run(request.index, lambda index: index.answer(request)).to_dict()
    except Exception as error:  # a user error or a bug: the caller searches itself and shows it
        log.info("search of %r not answered: %s: %s", request.index, type(error).__name__, error)
        return ServiceError("unavailable", f"{type(error).__name__}: {error}").to_dict()


def serve(path: Path, home: Path, name: str, idle_minutes: float, parent: int | None = None) -> int:
    """Hold ``path``'s lock, wait for process ``parent`` to end, warm index ``name`` of ``home``, answer on ``path``
    until idle; 0 when another resident search holds the lock (it serves), 1 when the index cannot be opened."""
    os.umask(0o077)
    lock = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())  # for ``resident_socket.stop``
    if parent is not None:
        wait_for_end(parent)
    log_file = os.open(log_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_file, 1)
    os.dup2(log_file, 2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    from ctxrag.services.warm import WarmIndexes

    warm = WarmIndexes(home)
    if not warm.warm(name):
        return 1
    path.unlink(missing_ok=True)  # a socket left by one that was killed (we hold the lock: no other serves it)
    server = ResidentServer(path, warm, idle_minutes * 60)
    log.info("pid %d serving %s on %s", os.getpid(), home, path)
    threading.Thread(target=server.stop_when_idle, name="ctxrag-idle", daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        path.unlink(missing_ok=True)  # new callers search themselves (and start another) from here on
        server.server_close()
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
