"""The local Prefect server: Prefect's own background server, the one every ctxrag command uses when none is configured.

With no ``PREFECT_API_URL`` (in the environment or the active profile), ``index``, ``evaluate``, ``serve``,
``deploy``, ``trigger`` and ``server start`` start ``prefect server start --background`` in ``PREFECT_HOME`` (default
``~/.prefect``), on 127.0.0.1:4200 when that port is free. Prefect writes its pid file ``server.pid`` there: later
commands find the server by it, and ``prefect server stop`` stops it. ctxrag adds only what Prefect lacks: a migrated
empty database to start from (``server_template``), an environment with no secrets and the services deployments need
(``server_process.server_environment``), an identity check (the pid runs a Prefect server; its address is read from
its command line), and a stop when the start is interrupted. A configured server always wins. Under ``CI=true``, or
with ``CTXRAG_PREFECT_SERVER=temporary``, nothing outlives the command (Prefect's temporary server per process).

Nothing here imports Prefect: ``ctxrag server status`` answers in a fraction of a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from filelock import FileLock

from ctxrag.prefect_commands.server_process import (
    ServerDidNotStart, address_of, alive, answers, check_writable, choose_port, diagnose_start, is_prefect_server,
    server_environment, server_home, server_version, sigterm_raises, terminate,
)
from ctxrag.prefect_commands.server_template import prepare_database
from ctxrag.storage.errors import UserError

MODE_VARIABLE = "CTXRAG_PREFECT_SERVER"
MODES = ("background", "temporary")
PID_FILE = "server.pid"  # Prefect's own: `prefect server start --background` writes it, `prefect server stop` reads it
STARTUP_SECONDS = 90.0
BUSY_SECONDS = 90.0  # how long a live server may take to answer before a command gives up (never replaced)


class ServerOfAnotherVersion(UserError):
    """The home's server runs another Prefect version; it is left alone."""


class ServerDoesNotAnswer(UserError):
    """The server in the home lives but does not answer; no second server is started on its database."""


@dataclass(frozen=True)
class LocalServer:
    pid: int
    api_url: str

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
    """Prefect's home: PREFECT_HOME, else ``~/.prefect``."""
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser().resolve()


def configured_api_url() -> str | None:
    """The server the user configured: PREFECT_API_URL in the environment; else, when this process has imported
    Prefect already, Prefect's own settings (a program's ``temporary_settings``, .env, prefect.toml); else the active
    profile (``prefect config set`` / ``prefect profile use`` write it to PREFECT_HOME's profiles.toml)."""
    if url := os.environ.get("PREFECT_API_URL", "").strip():
        return url
    if "prefect.settings" in sys.modules:
        from prefect.settings import get_current_settings

        return get_current_settings().api.url or None
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or prefect_home() / "profiles.toml")
    try:
        profiles = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    url = profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL")
    return str(url) if url else None


def prefect_version() -> str:
    return version("prefect")


def _database(home: Path) -> Path | None:
    """The server's SQLite file (Prefect's default, in its home); None when another database is configured."""
    url = os.environ.get("PREFECT_SERVER_DATABASE_CONNECTION_URL") or os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL")
    return None if url else home / "prefect.db"


def _read_pid(home: Path) -> int | None:
    try:
        return int((home / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def find_server(home: Path) -> LocalServer | None:
    """The Prefect server whose pid is in ``home``'s pid file, if that process lives and is a Prefect server (its
    command line says so); a stale pid file is removed. Never decided by a health check."""
    pid = _read_pid(home)
    if pid is None:
        return None
    if alive(pid) and is_prefect_server(pid):
        return LocalServer(pid, address_of(pid))
    (home / PID_FILE).unlink(missing_ok=True)
    return None


def _wait_until_it_answers(server: LocalServer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not answers(server.api_url):
        if not alive(server.pid):
            raise ServerDoesNotAnswer(f"the local Prefect server (pid {server.pid}) exited; run the command again")
        if time.monotonic() > deadline:
            raise ServerDoesNotAnswer(
                f"the local Prefect server (pid {server.pid}, {server.ui_url}) is running but has not answered for "
                f"{seconds:.0f} s. `ctxrag server stop` stops it."
            )
        time.sleep(0.2)


def start_server(home: Path, meanwhile: Callable[[], object] = lambda: None) -> LocalServer:
    """``prefect server start --background`` with a scrubbed environment on a migrated database; runs ``meanwhile``
    while the server starts (the command's own imports), then waits for /api/health. When another process takes the
    chosen port between our check and Prefect's, the start is tried once more on a free port. Stops the server again
    if the start fails or is interrupted (Ctrl-C, SIGTERM, any error)."""
    check_writable(home)
    port = choose_port(int(os.environ.get("PREFECT_SERVER_API_PORT") or 4200))
    try:
        return _start_on(home, port, meanwhile)
    except PortTaken:
        return _start_on(home, choose_port(0), lambda: None)


class PortTaken(ServerDidNotStart):
    """Prefect found the port taken (another process bound it after ``choose_port`` saw it free)."""


def _start_on(home: Path, port: int, meanwhile: Callable[[], object]) -> LocalServer:
    env = server_environment(home, port=port)
    prepare_database(_database(home), prefect_version(), env)
    command = [sys.executable, "-m", "prefect", "server", "start", "--background", "--host", "127.0.0.1", "--port", str(port)]
    starting: subprocess.Popen[bytes] | None = None
    with sigterm_raises():
        try:
            with tempfile.TemporaryFile("w+") as output:
                starting = subprocess.Popen(command, env=env, cwd=home, stdin=subprocess.DEVNULL, stdout=output,
                                            stderr=subprocess.STDOUT, start_new_session=True)
                meanwhile()
                code = starting.wait(timeout=STARTUP_SECONDS)
                output.seek(0)
                said = " ".join(output.read().strip().splitlines()[-3:])
            pid = _read_pid(home)
            if code != 0 or pid is None:
                failure = PortTaken if f"Port {port} is already in use" in said else ServerDidNotStart
                raise failure(f"`prefect server start --background` failed (exit code {code}): {said}")
            server = LocalServer(pid, f"http://127.0.0.1:{port}/api")
            deadline = time.monotonic() + STARTUP_SECONDS
            while not answers(server.api_url, timeout=2.0):
                if not alive(pid) or time.monotonic() > deadline:
                    terminate(pid)
                    raise ServerDidNotStart(f"the local Prefect server did not start: {diagnose_start(home, env)}")
                time.sleep(0.1)
            answering = server_home(server.api_url)
            if answering is not None and answering.resolve() != home.resolve():  # not ours: ours will not bind the port
                raise PortTaken(f"port {port} is served by the Prefect server of {answering}")
            return server
        except BaseException:
            if starting is not None and starting.poll() is None:
                starting.kill()  # before it spawns the server
                starting.wait()
            if (pid := _read_pid(home)) is not None:
                terminate(pid)
            (home / PID_FILE).unlink(missing_ok=True)
            raise


def _check_version(server: LocalServer, home: Path) -> None:
    running, ours = server_version(server.api_url), prefect_version()
    if running not in (ours, None):
        raise ServerOfAnotherVersion(
            f"the local Prefect server in {home} (pid {server.pid}, {server.ui_url}) runs Prefect {running}; this "
            f"environment has Prefect {ours}. It is left running: stop it from its own environment (`prefect server "
            f"stop`), or set PREFECT_HOME to another folder, or {MODE_VARIABLE}=temporary."
        )


def ensure_server(home: Path | None = None, meanwhile: Callable[[], object] = lambda: None) -> tuple[LocalServer, bool]:
    """The running local server, or a new one (True when started now), with ``meanwhile`` run while it starts. One
    command at a time checks and starts (two commands started together share one server)."""
    home = home or prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(home / "ctxrag-server.lock"):
        server = find_server(home)
        if server is None:
            return start_server(home, meanwhile), True
        meanwhile()
        _wait_until_it_answers(server, BUSY_SECONDS)
        _check_version(server, home)
        return server, False


def stop_server(home: Path) -> LocalServer | None:
    """Stop the server of ``home``'s pid file, as ``prefect server stop`` does, and wait until it has exited."""
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(home / "ctxrag-server.lock"):
        server = find_server(home)
        if server is not None:
            terminate(server.pid)
        (home / PID_FILE).unlink(missing_ok=True)
        return server


@contextmanager
def local_prefect_server(
    announce: Callable[[LocalServer, Path], None] | None = None, meanwhile: Callable[[], object] = lambda: None
) -> Iterator[str | None]:
    """Point Prefect at the server to use for the block: the configured one, else the local one (started if it is not
    running, with ``meanwhile`` run while it starts; ``announce(server, home)`` is then called). Yields its API URL;
    None in temporary mode."""
    if configured := configured_api_url():
        meanwhile()
        yield configured
        return
    if server_mode() == "temporary":
        meanwhile()
        yield None
        return
    server, started = ensure_server(meanwhile=meanwhile)
    if started and announce is not None:
        announce(server, prefect_home())
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield server.api_url
