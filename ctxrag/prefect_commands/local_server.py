"""A local Prefect server that outlives one command, so ``index`` and ``evaluate`` stop paying for a temporary one.

With no ``PREFECT_API_URL``, Prefect starts a temporary server inside every process (start-up and database
migrations: seconds of CPU per command). Instead, the first ``ctxrag index``/``evaluate`` starts
``prefect server start --no-services`` detached, on a free 127.0.0.1 port, with its state under ``PREFECT_HOME``
(``ctxrag-server.json``, log in ``ctxrag-server.log``); later commands reuse it while its process lives, it answers
``/api/health`` and it runs the same Prefect version. ``ctxrag server stop`` stops it.

A new SQLite database costs ~10 s of migrations on 2 cores (~14 s to a healthy server, against ~4 s with a migrated
one). So the first server of each Prefect version keeps a copy of its freshly migrated, still empty database under
``storage.environment.cache_dir()``, and a server started in a new ``PREFECT_HOME`` begins from that copy.

A server the user configured (``PREFECT_API_URL``, in the environment or a profile) always wins.
``CTXRAG_PREFECT_SERVER=temporary`` keeps Prefect's temporary per-process server.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import storage.environment  # noqa: F401  (offline, telemetry-off defaults before Prefect is imported)
from storage.environment import cache_dir
from storage.errors import UserError

MODE_VARIABLE = "CTXRAG_PREFECT_SERVER"
MODES = ("background", "temporary")
STATE_FILE = "ctxrag-server.json"
LOG_FILE = "ctxrag-server.log"
STARTUP_SECONDS = 90.0
HEALTH_TIMEOUT_SECONDS = 2.0


class ServerDidNotStart(UserError):
    """The local server did not answer in time; the message names its log."""


@dataclass(frozen=True)
class LocalServer:
    pid: int
    api_url: str
    prefect_version: str

    @property
    def ui_url(self) -> str:
        return self.api_url.removesuffix("/api")


def server_mode() -> str:
    """``background`` (default) or ``temporary``, from CTXRAG_PREFECT_SERVER."""
    mode = os.environ.get(MODE_VARIABLE, "background").strip().lower() or "background"
    if mode not in MODES:
        raise UserError(f"{MODE_VARIABLE}={mode!r}: expected one of {', '.join(MODES)}")
    return mode


def prefect_home() -> Path:
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser()


def _prefect_version() -> str:
    import prefect

    return str(prefect.__version__)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_prefect_server(pid: int) -> bool:
    """Whether ``pid`` still runs ``prefect server`` (a recorded pid may have been reused by another program)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _alive(pid)  # no /proc (not Linux): trust the recorded pid
    return b"prefect" in command and b"server" in command


def answers(api_url: str, timeout: float = HEALTH_TIMEOUT_SECONDS) -> bool:
    """True when ``GET {api_url}/health`` answers 200."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _read_state(home: Path) -> LocalServer | None:
    try:
        return LocalServer(**json.loads((home / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def running_server(home: Path) -> LocalServer | None:
    """The server this PREFECT_HOME started, if its process lives and it answers; None otherwise."""
    server = _read_state(home)
    if server is None or not _alive(server.pid) or not answers(server.api_url):
        return None
    return server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _terminate(pid: int, wait_seconds: float = 10.0) -> None:
    """SIGTERM the server's process group (uvicorn and its children), SIGKILL after ``wait_seconds``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            try:
                finished, _ = os.waitpid(pid, os.WNOHANG)  # our child: reap it
            except ChildProcessError:
                finished = 0 if _alive(pid) else pid
            if finished:
                return
            time.sleep(0.05)


def sqlite_database() -> Path | None:
    """The file of Prefect's server database when it is the default kind (SQLite on a file); None otherwise."""
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url
    value = url.get_secret_value() if url is not None else ""
    prefix = "sqlite+aiosqlite:///"
    if not value.startswith(prefix) or ":memory:" in value:
        return None
    return Path(value.removeprefix(prefix)).expanduser()


def database_template() -> Path:
    """Where the migrated, empty database of this Prefect version is kept (one per machine)."""
    return cache_dir() / "prefect" / f"prefect-{_prefect_version()}.db"


def seed_database(database: Path | None, template: Path) -> bool:
    """Copy the template to ``database`` when the database does not exist yet; True if copied. Best effort: any
    failure leaves the database to Prefect's own migrations."""
    if database is None or database.exists() or not template.is_file():
        return False
    partial = database.with_name(f"{database.name}.{os.getpid()}.partial")
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, partial)
        os.replace(partial, database)
        return True
    except OSError:
        partial.unlink(missing_ok=True)
        return False


def keep_template(database: Path | None, template: Path) -> None:
    """Save a consistent copy of the just-migrated database as the template (sqlite's online backup), once."""
    if database is None or template.exists() or not database.is_file():
        return
    partial = template.with_name(f"{template.name}.{os.getpid()}.partial")
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10)) as source, closing(sqlite3.connect(partial)) as copy:
            source.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file (the server's database is in WAL mode)
        os.replace(partial, template)
    except (OSError, sqlite3.Error):
        partial.unlink(missing_ok=True)


def start_server(home: Path) -> LocalServer:
    """Start ``prefect server start --no-services`` detached on a free 127.0.0.1 port; wait for /api/health.

    A new database starts as a copy of this Prefect version's migrated template, when there is one."""
    database, template = sqlite_database(), database_template()
    seed_database(database, template)
    port = _free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = {name: value for name, value in os.environ.items() if name != "PREFECT_API_URL"}
    env.update({"PREFECT_HOME": str(home), "PREFECT_UI_API_URL": api_url, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / LOG_FILE
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port), "--no-services"],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C on this command does not stop the server the next command reuses
        )
    server = LocalServer(pid=process.pid, api_url=api_url, prefect_version=_prefect_version())
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if answers(api_url, timeout=1.0):
            (home / STATE_FILE).write_text(json.dumps(asdict(server)))
            keep_template(database, template)
            return server
        if process.poll() is not None:
            break
        time.sleep(0.1)
    _terminate(process.pid)
    raise ServerDidNotStart(
        f"the local Prefect server did not answer at {api_url} within {STARTUP_SECONDS:.0f} s; its log: {log_path}"
    )


def stop_server(home: Path) -> LocalServer | None:
    """Stop the server this PREFECT_HOME started (if any) and forget it; returns what was stopped."""
    with _locked(home):
        server = _read_state(home)
        if server is not None and _alive(server.pid) and _is_prefect_server(server.pid):
            _terminate(server.pid)
        (home / STATE_FILE).unlink(missing_ok=True)
        return server


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    """One ctxrag process at a time checks or starts the server (two commands started together share one)."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / "ctxrag-server.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def reuse_or_start(home: Path) -> tuple[LocalServer, bool]:
    """The running local server, or a new one (True when started now). A server of another Prefect version is replaced."""
    with _locked(home):
        server = running_server(home)
        if server is not None and server.prefect_version == _prefect_version():
            return server, False
        if server is not None and _is_prefect_server(server.pid):
            _terminate(server.pid)
        return start_server(home), True


@contextmanager
def local_prefect_server(announce=None) -> Iterator[LocalServer | None]:  # type: ignore[no-untyped-def]
    """Point Prefect at the reused local server for the block, unless a server is configured or the mode is temporary.

    ``announce(server)`` is called when a server was started by this call (to tell the user once).
    """
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    if get_current_settings().api.url or server_mode() == "temporary":
        yield None
        return
    server, started = reuse_or_start(prefect_home())
    if started and announce is not None:
        announce(server)
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield server
