"""The local Prefect server every ctxrag command uses when none is configured: Prefect's own ``prefect server start``,
detached in ``PREFECT_HOME`` with its output in ``server.log`` and its pid in Prefect's pid file, so ``prefect server
stop`` stops it. ctxrag adds what Prefect lacks: a migrated empty database to start from (``server_template``), an
environment with no secrets, and an identity check (the pid runs a Prefect server; the server that answers names this
home), and an auth string (``server_auth``): the server answers only its user's commands. Its files are its user's
only (umask 077, 0600). No Prefect import here until a flow runs, so ``ctxrag server status`` answers at once
(docs/operations.md)."""

from __future__ import annotations

import os
import signal
import socket
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

import psutil
from filelock import FileLock

from ctxrag.prefect_commands.server_auth import SERVER_VARIABLE, auth_file, ensure_auth_string
from ctxrag.prefect_commands.server_mode import MODE_VARIABLE, ServerMode, server_mode, temporary_server_settings
from ctxrag.prefect_commands.server_probe import (  # noqa: F401  (SERVER_COMMAND, server_home, server_version: the package's)
    SERVER_COMMAND,
    _command_line,
    _request,
    alive,
    answers,
    is_prefect_server,
    server_home,
    server_version,
)
from ctxrag.prefect_commands.server_template import prepare_database
from ctxrag.storage.environment import PRIVATE_FILE, PRIVATE_UMASK, private_dirs
from ctxrag.storage.errors import UserError
from ctxrag.tasks.common.display import console

PID_FILE, LOG_FILE = "server.pid", "server.log"  # Prefect's (`prefect server stop` reads it); its output
STOP_SECONDS, WAIT_SECONDS = 15.0, 90.0  # a stop's SIGTERM before SIGKILL; a start, or a live server's answer
SERVICES_OFF = ("TRIGGERS",)  # automations only; the scheduler and late runs serve deployments (docs/decisions.md)
_KEPT = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")
_SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "AUTH", "PASSWORD")
_READ_ONLY = "PREFECT_HOME ({home}) or its database is read-only"
_CAUSES = {  # what the server's output says at a failed start -> the cause told to the user
    "already in use": "port {port} on 127.0.0.1 is taken by another program",
    "can't locate revision": "the database in {home} was migrated by a newer Prefect than this one; use its environment or another PREFECT_HOME",
    "no such revision": "the database in {home} was migrated by a newer Prefect than this one; use its environment or another PREFECT_HOME",
    "readonly database": _READ_ONLY,
    "read-only": _READ_ONLY,
    "permission denied": _READ_ONLY,
}


class ServerError(UserError):
    """The local server did not start, does not answer, or runs another Prefect version; the message says which."""


class PortTaken(ServerError):
    """Another process took the port after ``choose_port`` saw it free: the start is tried once more."""


@dataclass(frozen=True)
class LocalServer:
    pid: int
    api_url: str

    @property
    def ui_url(self) -> str:
        return self.api_url.removesuffix("/api")


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser().resolve()


def prefect_version() -> str:
    return version("prefect")


def configured_api_url() -> str | None:
    """The user's server: PREFECT_API_URL; else Prefect's settings if this process imported them (a program's
    ``temporary_settings``, .env); else the active profile in PREFECT_HOME's profiles.toml (`prefect config set`)."""
    if url := os.environ.get("PREFECT_API_URL", "").strip():
        return url
    if "prefect.settings" in sys.modules:
        from prefect.settings import get_current_settings

        return get_current_settings().api.url or None
    try:
        profiles = tomllib.loads(
            Path(os.environ.get("PREFECT_PROFILES_PATH") or prefect_home() / "profiles.toml").read_text()
        )
    except (OSError, tomllib.TOMLDecodeError):
        return None
    url = (
        profiles.get("profiles", {})
        .get(os.environ.get("PREFECT_PROFILE") or profiles.get("active", ""), {})
        .get("PREFECT_API_URL")
    )
    return str(url) if url else None


def server_environment(
    home: Path, source: dict[str, str] | None = None, port: int = 4200, auth: str | None = None
) -> dict[str, str]:
    """The server's environment: what a process needs, Prefect's settings but the client's (PREFECT_API_*, the
    profile) and any secret-like name outside PREFECT_SERVER_*, its address, telemetry off, and ``auth``: the auth
    string every request but /health must carry (by environment: a command line is world-readable)."""

    def kept(name: str) -> bool:
        return (
            name in _KEPT
            or name.startswith("PREFECT_SERVER_")
            or (
                name.startswith("PREFECT_")
                and not name.startswith("PREFECT_API_")
                and name != "PREFECT_PROFILE"
                and not any(word in name for word in _SECRET_WORDS)
            )
        )

    env = {name: value for name, value in (os.environ if source is None else source).items() if kept(name)}
    env.update(
        {
            "PREFECT_HOME": str(home),
            "DO_NOT_TRACK": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_API_HOST": "127.0.0.1",
            "PREFECT_SERVER_API_PORT": str(port),
        }
    )  # the UI calls this API
    env.update({f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in SERVICES_OFF})
    env.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
    if auth is not None:
        env[SERVER_VARIABLE] = auth
    return env


def check_guarded(server: LocalServer, home: Path, auth: str) -> str | None:
    """The running server's Prefect version, once it is known to refuse a request without the home's auth string and
    to take one with it; a server that answers anyone, or wants another string, is refused with what to do."""
    where = f"the local Prefect server in {home} (pid {server.pid}, {server.ui_url})"
    open_status, version = _request(server.api_url, "admin/version")
    if open_status == 200:
        raise ServerError(
            f"{where} answers requests without an auth string, so every user of this machine can read "
            f"its Secret blocks and runs and start runs. It was started by an earlier ctxrag or by "
            f"`prefect server start`; stop it (`ctxrag server stop`: its runs stay in the database) and the "
            f"next command starts one that requires the auth string in {auth_file(home)}."
        )
    status, version = _request(server.api_url, "admin/version", auth)
    if status == 401:
        raise ServerError(
            f"{where} wants an auth string other than the one in {auth_file(home)}; stop it (`ctxrag "
            f"server stop`) and the next command starts one that takes it."
        )
    return None if version is None else str(version)


def choose_port(preferred: int) -> int:
    """``preferred`` (Prefect's 4200: where Prefect users look) when uvicorn could bind it, else a free port."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is free
        try:
            probe.bind(("127.0.0.1", preferred))
        except OSError:
            probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def terminate(pid: int) -> None:
    """SIGTERM, as `prefect server stop` sends; SIGKILL if the process has not exited after STOP_SECONDS."""
    try:
        process = psutil.Process(pid)
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except psutil.TimeoutExpired:
            process.kill()
            process.wait(STOP_SECONDS)
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # gone already, or another user's: not ours to stop
        pass


def why_it_died(home: Path, port: int, code: int | None, log: str) -> str:
    """Why the server exited at start, read from its output; then the exit code and the output's last lines."""
    said = log.lower()
    cause = next((told for words, told in _CAUSES.items() if words in said), "it exited during start-up")
    return f"{cause.format(port=port, home=home)} (exit code {code}); the last lines of `prefect server start`:\n" + (
        "\n".join(log.splitlines()[-15:]) or "(no output)"
    )


def _read_pid(home: Path) -> int | None:
    try:
        return int((home / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def find_server(home: Path) -> LocalServer | None:
    """The Prefect server of ``home``'s pid file, if that pid runs one (its address from its command line); a stale
    pid file is removed."""
    if (pid := _read_pid(home)) is not None and is_prefect_server(pid):
        command = _command_line(pid) or []
        port = command[command.index("--port") + 1] if "--port" in command[:-1] else "4200"
        return LocalServer(pid, f"http://127.0.0.1:{port}/api")
    (home / PID_FILE).unlink(missing_ok=True)
    return None


def check_writable(home: Path) -> None:
    try:
        private_dirs(home)
        tempfile.TemporaryFile(dir=home).close()
    except OSError as error:
        raise ServerError(
            f"cannot start a local Prefect server: PREFECT_HOME ({home}) is read-only or cannot be created "
            f"({error.strerror or error})"
        ) from None


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so a start's clean-up runs (main thread)."""
    try:
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:  # not the main thread: nothing changes
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def start_server(home: Path, meanwhile: Callable[[], object] = lambda: None) -> LocalServer:
    """``prefect server start`` detached, on a seeded database with a scrubbed environment; ``meanwhile`` runs as it
    starts. Not ``--background``: that server writes to pipes its starter closes on exit, and a loaded server that
    logs there dies (docs/decisions.md). Tried once more on a free port if another process takes the port first; a
    start that fails or is interrupted (Ctrl-C, SIGTERM) stops the server again."""
    try:
        return _start_on(home, choose_port(int(os.environ.get("PREFECT_SERVER_API_PORT") or 4200)), meanwhile)
    except PortTaken:
        return _start_on(home, choose_port(0), lambda: None)


def keep_private(home: Path) -> None:
    """Before a start: the database and the log 0600, as ctxrag now creates them, when an earlier ctxrag or Prefect
    left them readable by others (the home's own mode is the user's: it may be a folder others share)."""
    for path in (*home.glob("prefect.db*"), home / LOG_FILE):
        try:
            if path.stat().st_uid == os.getuid() and path.is_file():
                os.chmod(path, PRIVATE_FILE)
        except OSError:
            continue


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, PRIVATE_FILE)


def _start_on(home: Path, port: int, meanwhile: Callable[[], object]) -> LocalServer:
    keep_private(home)
    auth = ensure_auth_string(home)
    env = server_environment(home, port=port, auth=auth)
    database_set = {"PREFECT_SERVER_DATABASE_CONNECTION_URL", "PREFECT_API_DATABASE_CONNECTION_URL"} & set(os.environ)
    prepare_database(None if database_set else home / "prefect.db", prefect_version(), env)
    process: subprocess.Popen[bytes] | None = None
    with _sigterm_interrupts():
        try:
            with open(home / LOG_FILE, "wb", opener=_private) as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                    env=env,
                    cwd=home,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    umask=PRIVATE_UMASK,
                )  # its database, WAL and files: 0600
            with open(home / PID_FILE, "w", opener=_private) as pid_file:
                pid_file.write(str(process.pid))
            meanwhile()
            server, deadline = LocalServer(process.pid, f"http://127.0.0.1:{port}/api"), time.monotonic() + WAIT_SECONDS
            while not answers(server.api_url, timeout=2.0):
                if process.poll() is not None:
                    said = (home / LOG_FILE).read_text(errors="replace")
                    words = " ".join(said.split())  # rich wraps Prefect's message at 80 columns
                    taken = f"Port {port} is already in use" in words or f"already running on port {port}" in words
                    raise (PortTaken if taken else ServerError)(
                        f"the local Prefect server did not start: {why_it_died(home, port, process.returncode, said)}"
                    )
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"the local Prefect server did not answer in {WAIT_SECONDS:.0f} s; its log: {home / LOG_FILE}"
                    )
                time.sleep(0.1)
            status, settings = _request(server.api_url, "admin/settings", auth)
            answering = Path(settings["home"]) if isinstance(settings, dict) and settings.get("home") else None
            if status == 401 or answering is not None and answering.resolve() != home.resolve():
                raise PortTaken(  # ours could not bind it
                    f"port {port} is served by another Prefect server ({answering or 'it refuses this auth string'})"
                )
            return server
        except BaseException:
            if process is not None and process.poll() is None:
                process.kill()  # a server that never served: nothing to shut down gracefully
                process.wait(timeout=STOP_SECONDS)
            (home / PID_FILE).unlink(missing_ok=True)
            raise


def ensure_server(home: Path | None = None, meanwhile: Callable[[], object] = lambda: None) -> tuple[LocalServer, bool]:
    """The home's running server, or a new one (True: started now), with ``meanwhile`` run meanwhile. One command at a
    time checks and starts, so commands started together share one server. A live server is waited for, never
    replaced, and one of another Prefect version is left alone."""
    home = home or prefect_home()
    check_writable(home)
    with FileLock(home / "ctxrag-server.lock", mode=PRIVATE_FILE):
        if (server := find_server(home)) is None:
            return start_server(home, meanwhile), True
        meanwhile()
        deadline = time.monotonic() + WAIT_SECONDS
        while not answers(server.api_url):
            if not alive(server.pid) or time.monotonic() > deadline:
                raise ServerError(
                    f"the local Prefect server (pid {server.pid}, {server.ui_url}) has not answered for "
                    f"{WAIT_SECONDS:.0f} s or exited. `ctxrag server stop` stops it."
                )
            time.sleep(0.2)
        if (running := check_guarded(server, home, ensure_auth_string(home))) not in (prefect_version(), None):
            raise ServerError(
                f"the local Prefect server in {home} (pid {server.pid}, {server.ui_url}) runs Prefect {running}; this "
                f"environment has Prefect {prefect_version()}. It is left running: stop it from its own environment "
                f"(`prefect server stop`), or set PREFECT_HOME to another folder, or {MODE_VARIABLE}=temporary."
            )
        return server, False


def stop_server(home: Path) -> LocalServer | None:
    """Stop the server of ``home``'s pid file, as ``prefect server stop`` does, and wait until it has exited."""
    private_dirs(home)
    with FileLock(home / "ctxrag-server.lock", mode=PRIVATE_FILE):
        if (server := find_server(home)) is not None:
            terminate(server.pid)
        (home / PID_FILE).unlink(missing_ok=True)
        return server


def announce_started(server: LocalServer, home: Path) -> None:
    console(stderr=True, soft_wrap=True).print(
        f"started a local Prefect server: UI at {server.ui_url} (pid {server.pid}, PREFECT_HOME {home}); later "
        "commands reuse it; stop it with `ctxrag server stop` or `prefect server stop`.",
        highlight=False,
    )


@contextmanager
def local_prefect_server(
    meanwhile: Callable[[], object] = lambda: None, required: bool = False, mode: ServerMode | None = None
) -> Iterator[str | None]:
    """Point Prefect at the server to use within the block and yield its API URL: the configured one, else the local
    one (started, and announced, if it is not running; ``meanwhile`` runs as it starts). In temporary mode (``mode``,
    else ``server_mode()``) Prefect's temporary server: yields None, or refuses if ``required``."""
    if configured := configured_api_url():
        meanwhile()
        yield configured
        return
    if (mode or server_mode()) == "temporary":
        if required:
            raise UserError(
                f"no Prefect server: {MODE_VARIABLE}=temporary (the default under CI=true) starts none that "
                f"outlives a command. Unset it (or set {MODE_VARIABLE}=background), or set PREFECT_API_URL."
            )
        meanwhile()
        with temporary_server_settings():
            yield None
        return
    server, started = ensure_server(meanwhile=meanwhile)
    if started:
        announce_started(server, prefect_home())
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    # Prefect settings, not os.environ: Prefect hands them to the runs `serve` starts (their environment), never a log
    with temporary_settings(
        updates={PREFECT_API_URL: server.api_url, PREFECT_API_AUTH_STRING: ensure_auth_string(prefect_home())}
    ):
        yield server.api_url
