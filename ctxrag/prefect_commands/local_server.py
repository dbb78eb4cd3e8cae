"""The local Prefect server that ``index`` and ``evaluate`` start once and reuse: one per user and Prefect home.

With no ``PREFECT_API_URL``, Prefect starts a temporary server inside every process (seconds of CPU per command).
Instead, the first ``ctxrag index``/``evaluate`` starts ``prefect server start`` in the background, where Prefect
itself keeps its background server: in ``PREFECT_HOME`` (``~/.prefect`` unless you set it), with Prefect's pid file
``server.pid`` (so ``prefect server stop`` stops it and ``prefect server start`` sees it), on 127.0.0.1:4200 when that
port is free. Every ctxrag home of the user reports to it, so the UI shows their runs together. ctxrag's own notes
(address, Prefect version, start time, the ctxrag homes seen) are in ``ctxrag-server.json`` beside the pid file,
its log in ``ctxrag-server.log``.

It runs the services the UI needs to show a whole run (``server_process.SERVICES_ON``), a minimal environment
(no API keys), and is never orphaned: it is recorded before it is waited for, and Ctrl-C, SIGTERM or an error during
its start stops it. A recorded server is identified by its pid and start time, never by a health check: a slow
answer is waited for, never taken for a dead server. A server of another Prefect version is left alone.
A server the user configured (``PREFECT_API_URL``, in the environment or a profile) always wins; under CI
(``CI=true``) or with ``CTXRAG_PREFECT_SERVER=temporary`` nothing outlives the command.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import ctxrag.storage.environment  # noqa: F401  (offline, telemetry-off defaults before Prefect is imported)
from ctxrag.prefect_commands.server_process import (
    LOG_FILE, ServerDidNotStart, alive, answers, check_writable, choose_port, is_prefect_server, server_environment,
    sigterm_raises, spawn, start_ticks, terminate, why_it_died,
)
from ctxrag.prefect_commands.server_template import prepare_database
from ctxrag.storage.environment import ctxrag_home
from ctxrag.storage.errors import UserError

MODE_VARIABLE = "CTXRAG_PREFECT_SERVER"
MODES = ("background", "temporary")
PID_FILE = "server.pid"  # Prefect's own name: `prefect server stop` reads it
STATE_FILE = "ctxrag-server.json"
STARTUP_SECONDS = 90.0
BUSY_SECONDS = 90.0  # how long a recorded, live server may take to answer before the command gives up
MAX_HOMES = 20


class ServerOfAnotherVersion(UserError):
    """The home's server runs another Prefect version; it is left alone."""


class ServerDoesNotAnswer(UserError):
    """The recorded server lives but does not answer; no second server is started on its database."""


@dataclass(frozen=True)
class LocalServer:
    pid: int
    api_url: str
    prefect_version: str
    started_ticks: int | None = None
    started_by: str = "ctxrag"  # or "prefect": the user's own `prefect server start --background`
    homes: tuple[str, ...] = ()

    @property
    def ui_url(self) -> str:
        return self.api_url.removesuffix("/api")


def server_mode() -> str:
    """``background`` (default) or ``temporary`` (CTXRAG_PREFECT_SERVER; under CI=true the default is temporary)."""
    default = "temporary" if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes") else "background"
    mode = os.environ.get(MODE_VARIABLE, "").strip().lower() or default
    if mode not in MODES:
        raise UserError(f"{MODE_VARIABLE}={mode!r}: expected one of {', '.join(MODES)}")
    return mode


def prefect_home() -> Path:
    """Prefect's home as Prefect sees it (PREFECT_HOME, a profile, or ``~/.prefect``)."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser().resolve()


def _prefect_version() -> str:
    import prefect

    return str(prefect.__version__)


def _prefects_own_url() -> str:
    """The address ``prefect server start --background`` serves on by default (PREFECT_SERVER_API_HOST/PORT)."""
    from prefect.settings import get_current_settings

    api = get_current_settings().server.api
    return f"http://{api.host}:{api.port}/api"


def _server_version(api_url: str) -> str:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{api_url}/admin/version", timeout=5) as response:
            return str(json.loads(response.read()))
    except (OSError, ValueError):
        return "unknown"


def sqlite_database() -> Path | None:
    """The file of Prefect's server database when it is the default kind (SQLite on a file); None otherwise."""
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url
    value = url.get_secret_value() if url is not None else ""
    prefix = "sqlite+aiosqlite:///"
    if not value.startswith(prefix) or ":memory:" in value:
        return None
    return Path(value.removeprefix(prefix)).expanduser()


def _read_pid(home: Path) -> int | None:
    try:
        return int((home / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _read_state(home: Path) -> LocalServer | None:
    try:
        data = json.loads((home / STATE_FILE).read_text())
        return LocalServer(**{**data, "homes": tuple(data.get("homes", ()))})
    except (OSError, ValueError, TypeError):
        return None


def _write_state(home: Path, server: LocalServer) -> None:
    partial = home / f"{STATE_FILE}.{os.getpid()}.partial"
    partial.write_text(json.dumps(asdict(server)))
    os.chmod(partial, 0o600)
    os.replace(partial, home / STATE_FILE)


def _forget(home: Path) -> None:
    (home / PID_FILE).unlink(missing_ok=True)
    (home / STATE_FILE).unlink(missing_ok=True)


def find_server(home: Path) -> LocalServer | None:
    """The Prefect server recorded in ``home`` if its process lives and is that server (pid and start time);
    stale records are removed. Never decided by a health check."""
    pid, state = _read_pid(home), _read_state(home)
    if state is not None and pid in (None, state.pid):
        if alive(state.pid) and is_prefect_server(state.pid, state.started_ticks):
            return state
    elif pid is not None and alive(pid) and is_prefect_server(pid):
        url = _prefects_own_url()  # started by `prefect server start --background` in this home
        return LocalServer(pid, url, _server_version(url), start_ticks(pid), started_by="prefect")
    if pid is not None or state is not None:
        _forget(home)
    return None


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    """One ctxrag process at a time checks, starts or stops the home's server (two commands started together
    share one server)."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / "ctxrag-server.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _wait_until_it_answers(server: LocalServer, home: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not answers(server.api_url):
        if not alive(server.pid):
            raise ServerDoesNotAnswer(f"the local Prefect server (pid {server.pid}) exited; run the command again")
        if time.monotonic() > deadline:
            raise ServerDoesNotAnswer(
                f"the local Prefect server (pid {server.pid}, {server.ui_url}) is running but has not answered for "
                f"{seconds:.0f} s; its log: {home / LOG_FILE}. `ctxrag server stop` stops it."
            )
        time.sleep(0.5)


def _seen(home: Path, server: LocalServer) -> LocalServer:
    """Record that the current ctxrag home uses ``server`` (``ctxrag server status`` lists the homes)."""
    current = str(ctxrag_home())
    if current in server.homes:
        return server
    server = replace(server, homes=(*server.homes, current)[-MAX_HOMES:])
    _write_state(home, server)
    return server


def start_server(home: Path) -> LocalServer:
    """Start ``prefect server start`` detached, record it (pid file and state) before waiting for /api/health, and
    stop it again if the start fails or is interrupted (Ctrl-C, SIGTERM, any error)."""
    from prefect.settings import get_current_settings

    check_writable(home)
    env = server_environment(home)
    prepare_database(sqlite_database(), _prefect_version(), env)
    port = choose_port(get_current_settings().server.api.port)
    api_url = f"http://127.0.0.1:{port}/api"
    try:
        descriptor = os.open(home / PID_FILE, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        raise ServerDidNotStart(f"another Prefect server is starting in {home} ({home / PID_FILE} appeared); "
                                "run the command again") from None
    process = None
    with sigterm_raises():
        try:
            process = spawn(home, port, env)
            os.write(descriptor, str(process.pid).encode())
            os.close(descriptor)
            server = LocalServer(process.pid, api_url, _prefect_version(), start_ticks(process.pid), homes=(str(ctxrag_home()),))
            _write_state(home, server)
            deadline = time.monotonic() + STARTUP_SECONDS
            while not answers(api_url, timeout=2.0):
                if process.poll() is not None:
                    raise ServerDidNotStart(f"the local Prefect server did not start: {why_it_died(home, port, process.returncode)}")
                if time.monotonic() > deadline:
                    raise ServerDidNotStart(f"the local Prefect server did not answer at {api_url} within "
                                            f"{STARTUP_SECONDS:.0f} s and was stopped: {why_it_died(home, port, None)}")
                time.sleep(0.1)
            return server
        except BaseException:
            if process is None:
                os.close(descriptor)
            else:
                terminate(process.pid)
            _forget(home)
            raise


def reuse_or_start(home: Path) -> tuple[LocalServer, bool]:
    """The home's running server, or a new one (True when started now). A server of another Prefect version started
    by ctxrag is left alone: an error names both versions."""
    with _locked(home):
        server = find_server(home)
        if server is None:
            return start_server(home), True
        if server.started_by == "ctxrag" and server.prefect_version != _prefect_version():
            raise ServerOfAnotherVersion(
                f"the local Prefect server in {home} (pid {server.pid}, {server.ui_url}) runs Prefect "
                f"{server.prefect_version}, started from another environment; this one has Prefect {_prefect_version()}. "
                "It is left running: stop it from its own environment (`ctxrag server stop`), or set PREFECT_HOME to "
                f"another folder, or {MODE_VARIABLE}=temporary."
            )
        _wait_until_it_answers(server, home, BUSY_SECONDS)
        return _seen(home, server), False


def stop_server(home: Path) -> LocalServer | None:
    """Stop the Prefect server recorded in ``home`` (if any) and forget it; returns what was stopped."""
    with _locked(home):
        server = find_server(home)
        if server is not None:
            terminate(server.pid)
        _forget(home)
        return server


def server_homes() -> list[Path]:
    """Where a ctxrag server may be recorded: Prefect's home, and the per-project home earlier releases used."""
    legacy = (ctxrag_home() / "prefect").resolve()
    return list(dict.fromkeys([prefect_home(), *([legacy] if legacy.is_dir() else [])]))


@contextmanager
def local_prefect_server(announce: Callable[[LocalServer, Path], None] | None = None) -> Iterator[LocalServer | None]:
    """Point Prefect at the reused local server for the block, unless a server is configured or the mode is temporary.

    ``announce(server, home)`` is called when this call started the server (to tell the user once)."""
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    if get_current_settings().api.url or server_mode() == "temporary":
        yield None
        return
    home = prefect_home()
    server, started = reuse_or_start(home)
    if started and announce is not None:
        announce(server, home)
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield server
