"""Where a home's resident search listens, and the ``ctxrag search`` side of it: ask it, or start it.

A new query costs a ``ctxrag search`` process ~0.5 s of imports and model loading before its ~10 ms of searching.
So, as Prefect's local server is for the flow commands, a search process stays resident after the first search
(``ctxrag.services.resident``): later searches of the same home send their question over a Unix socket and print its
answer (a few ms), and the resident one exits after ``$CTXRAG_SEARCH_IDLE_MINUTES`` (default 10) without a search;
0 turns it off. Anything short of an answer (none listening, a refused request, an error) and the command searches
in its own process, as it always could: the resident search is a speed path, never the only path.

Who may ask: the socket is in a folder only its user can enter (``$XDG_RUNTIME_DIR/ctxrag``, else
``TMPDIR/ctxrag-UID``; made 0700, and checked: a link, another owner or access for others turns the speed path off),
and the server checks its peer's uid. Which one answers: the socket's name is ``search-LINEAGE-CODE.sock``, LINEAGE a
digest of the home and what ``ctxrag.storage.settings.Settings.resident_key`` says can change an answer (ctxrag's
settings, the providers' keys and URLs, Hugging Face's, thread counts, the cache folders) and CODE one of the Python and
ctxrag code, so a search
under other settings never gets an answer made under these; it finds (or starts) its own. A resident search of new
code retires the others of its lineage (``ctxrag.services.resident``).

How long a caller waits (``ask``): ``CONNECT_S`` to connect, then at most ``SILENCE_S`` between two lines of the
answer: a resident search sends an empty line every ``HEARTBEAT_S`` while it searches, so a long search (a reranked
one) is waited for and a hung resident costs about a second before the caller searches itself. A resident that
failed to warm up leaves a ``.failed`` note; ``start`` starts none for ``FAILED_WARMUP_S`` after it. Standard library
only: imported before anything heavy.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ctxrag.tasks.common.hits import SearchAnswer

if TYPE_CHECKING:
    from ctxrag.tasks.common.search_request import SearchRequest

from ctxrag.storage.settings import PATH_VARIABLES as PATH_SETTINGS  # resolved: the digest names the same files
from ctxrag.storage.settings import settings as current_settings

IDLE_ENV = "CTXRAG_SEARCH_IDLE_MINUTES"
MAX_SOCKET_PATH = 100  # sun_path holds 104-108 bytes
CONNECT_S = 0.25  # a listening Unix socket connects in microseconds
HEARTBEAT_S = 0.25  # a resident search at work sends an empty line this often
SILENCE_S = 1.0  # the longest a caller waits for the next line (an answer or a heartbeat); then it searches itself
ANSWER_LIMIT_S = 600.0  # the longest a caller waits for an answer that keeps beating (a stuck search)
FAILED_WARMUP_S = 300.0  # after a failed warm-up, no resident search is started for this long


def idle_minutes() -> float:
    """How long a resident search waits for the next search: ``$CTXRAG_SEARCH_IDLE_MINUTES``, default 10 (0 under
    ``CI=true``: a CI job leaves no process behind, as it starts no background Prefect server); 0 turns the resident
    search off; an unreadable value is an ``InvalidInput`` naming it (``ctxrag.storage.settings``)."""
    return current_settings().search_idle_minutes


def runtime_dir() -> Path | None:
    """The user's private folder for sockets (made 0700 if missing), or None when it is not safe to use: not a
    folder, a link, owned by another user, or open to others."""
    if not hasattr(socket, "AF_UNIX") or os.name != "posix":
        return None
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(base) / "ctxrag" if base else Path(tempfile.gettempdir()) / f"ctxrag-{os.getuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        found = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        return None
    return folder


def settings(home: Path) -> dict[str, str]:
    """What a resident search must share with its caller: the home, the interpreter, the code, and the settings and
    environment that can change an answer (``Settings.resident_key``: effective values, the path ones resolved)."""
    return {**current_settings().resident_key(), " home": str(home), " python": sys.executable, " code": code_stamp()}


@functools.cache
def code_stamp() -> str:
    """The ctxrag code this process runs: its folder and the newest change to any of its files (an upgrade or an
    edit makes a new stamp, so a resident search of the old code is not asked again); walked once a process."""
    package = Path(__file__).resolve().parents[1]
    newest, count = 0, 0
    for folder, _, files in os.walk(package, followlinks=True):
        for name in files:
            if name.endswith(".py"):
                newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
                count += 1
    return f"{package}:{count}:{newest}"


def socket_path(home: Path) -> Path | None:
    """Where the resident search of ``home`` under this process's settings listens; None when resident search is
    off or has no safe place."""
    if idle_minutes() <= 0:
        return None
    folder = runtime_dir()
    if folder is None:
        return None
    chosen = settings(home)
    code = {name: chosen.pop(name) for name in (" python", " code")}
    path = folder / f"search-{_digest(chosen, 20)}-{_digest(code, 8)}.sock"
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def lineage(path: Path) -> str:
    """The part of a socket's name that names its home and settings (not its code)."""
    return path.stem.rsplit("-", 1)[0]


def _digest(values: dict[str, str], length: int) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:length]


def ask(path: Path | None, request: SearchRequest) -> SearchAnswer | None:
    """The resident search's answer to ``request``, or None when none answers it (none listening, silent for
    ``SILENCE_S``, a refusal or an error: the caller searches itself)."""
    if path is None:
        return None
    answer = exchange(path, request.to_dict())
    try:
        return SearchAnswer.from_dict(answer) if answer is not None else None
    except (KeyError, TypeError, ValueError):  # an error object, or not an answer
        return None


def exchange(path: Path, message: dict[str, object], limit_s: float = ANSWER_LIMIT_S) -> dict[str, object] | None:
    """Send one JSON line to the resident search at ``path`` and read its answer line (empty lines are its
    heartbeat); None when it cannot be reached or stays silent for ``SILENCE_S``."""
    deadline = time.monotonic() + limit_s
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(CONNECT_S)
            client.connect(os.fspath(path))
            client.settimeout(SILENCE_S)
            client.sendall(json.dumps(message).encode() + b"\n")
            with client.makefile("rb") as lines:
                line = lines.readline()
                while line == b"\n" and time.monotonic() < deadline:
                    line = lines.readline()
        answer = json.loads(line) if line.strip() else None
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


def running(path: Path) -> bool:
    """Whether a resident search holds ``path``'s lock (it is serving, or starting)."""
    import fcntl

    try:
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def start(path: Path | None, home: Path, name: str, after: int | None = None) -> None:
    """Start a resident search for ``home`` at ``path``, warmed on index ``name``, unless one is already there or one
    failed to warm up within ``FAILED_WARMUP_S``: a detached process of its own (its own session; its log beside the
    socket) that starts loading once process ``after`` (a command starting it on its way out: its own pid) has ended."""
    if path is None or running(path) or failed_recently(path):
        return
    environment = {**os.environ, **{key: value for key, value in settings(home).items() if key in PATH_SETTINGS}}
    subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxrag.services.resident",
            os.fspath(path),
            os.fspath(home),
            name,
            str(idle_minutes()),
            *([str(after)] if after else []),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
        start_new_session=True,
        close_fds=True,
    )


def failed_recently(path: Path) -> dict[str, object] | None:
    """The note of a warm-up that failed at ``path`` within ``FAILED_WARMUP_S`` (when, which index, why), else None."""
    try:
        note = json.loads(failed_path(path).read_text())
        return note if isinstance(note, dict) and time.time() - float(note["at"]) < FAILED_WARMUP_S else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def lock_path(path: Path) -> Path:
    return path.with_suffix(".lock")


def log_path(path: Path) -> Path:
    return path.with_suffix(".log")


def failed_path(path: Path) -> Path:
    return path.with_suffix(".failed")
