"""The local Prefect server's process: its environment (no secrets, the services deployments need), its identity
(a Prefect server by its command line, its address read from it), its health, its stop, and why it died at start."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxrag.storage.errors import UserError

STOP_SECONDS = 15.0
DIAGNOSE_SECONDS = 60.0
SERVER_COMMAND = b"prefect.server.api.server:create_app"  # what `prefect server start --background` runs (uvicorn)

# Services: Prefect's defaults (every service on; the scheduler and late-run marking serve scheduled deployments, the
# foreman marks workers offline) but for those that serve only Prefect Cloud-style automations and event triggers.
# Their cost at start and idle is measured in docs/decisions.md ("One local server for every command").
SERVICES_OFF = ("TRIGGERS",)

# Inherited as they are: what a Python process needs to run at all, and Prefect settings. Left out: everything else
# (API keys, tokens, cloud credentials) and the client's own Prefect settings that could hold a secret or point
# elsewhere (PREFECT_API_URL, PREFECT_API_KEY, any *KEY*, *SECRET*, *TOKEN*, *AUTH* outside PREFECT_SERVER_*).
_KEPT = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")
_PREFECT_DROPPED = ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_PROFILE")
_SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "AUTH", "PASSWORD")


class ServerDidNotStart(UserError):
    """The local server exited or did not answer in time; the message says why."""


def _inherited(name: str) -> bool:
    if name in _KEPT:
        return True
    if not name.startswith("PREFECT_") or name in _PREFECT_DROPPED:
        return False
    return name.startswith("PREFECT_SERVER_") or not any(word in name for word in _SECRET_WORDS)


def server_environment(home: Path, source: dict[str, str] | None = None, port: int = 4200) -> dict[str, str]:
    """The server's environment: the basics a process needs, Prefect's settings, its address, telemetry off."""
    env = {name: value for name, value in (os.environ if source is None else source).items() if _inherited(name)}
    env.update({"PREFECT_HOME": str(home), "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_SERVER_API_HOST": "127.0.0.1", "PREFECT_SERVER_API_PORT": str(port)})  # the UI calls this API
    env.update({f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in SERVICES_OFF})
    env.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
    return env


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _command_line(pid: int) -> list[bytes] | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None


def is_prefect_server(pid: int) -> bool:
    """Whether ``pid`` runs a Prefect server (a pid reused by another program is not taken for it)."""
    command = _command_line(pid)
    if command is None:
        return alive(pid)  # no /proc (not Linux): trust the pid file
    return SERVER_COMMAND in command or b"server" in command and b"start" in command and any(b"prefect" in part for part in command)


def address_of(pid: int) -> str:
    """The server's API URL, from the ``--host``/``--port`` of its command line (Prefect's defaults when absent)."""
    command = [part.decode(errors="replace") for part in _command_line(pid) or []]
    host = command[command.index("--host") + 1] if "--host" in command[:-1] else "127.0.0.1"
    port = command[command.index("--port") + 1] if "--port" in command[:-1] else os.environ.get("PREFECT_SERVER_API_PORT", "4200")
    return f"http://{host}:{port}/api"


def _get(url: str, timeout: float) -> bytes | None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy: it is on 127.0.0.1
    try:
        with opener.open(url, timeout=timeout) as response:
            return bytes(response.read()) if response.status == 200 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def answers(api_url: str, timeout: float = 5.0) -> bool:
    """True when ``GET {api_url}/health`` answers 200."""
    return _get(f"{api_url}/health", timeout) is not None


def server_version(api_url: str) -> str | None:
    """The Prefect version the server reports (None when it does not say)."""
    body = _get(f"{api_url}/admin/version", 5.0)
    try:
        return str(json.loads(body)) if body is not None else None
    except ValueError:
        return None


def server_home(api_url: str) -> Path | None:
    """The PREFECT_HOME of the server answering at ``api_url`` (its settings say it), None when it does not say."""
    body = _get(f"{api_url}/admin/settings", 5.0)
    try:
        home = json.loads(body).get("home") if body is not None else None
    except (ValueError, AttributeError):
        return None
    return Path(home) if home else None


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether the server could bind ``port`` (as uvicorn binds: a port in TIME_WAIT is free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(preferred: int) -> int:
    """Prefect's own port (4200) when it is free, so the UI is where Prefect users look; else (or for 0) any free
    port."""
    if preferred and port_is_free(preferred):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def terminate(pid: int, wait_seconds: float = STOP_SECONDS) -> bool:
    """SIGTERM the server (as `prefect server stop` does), SIGKILL it after ``wait_seconds``; True once it is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:  # our child (a test's): reap it
                    return True
            except ChildProcessError:
                if not alive(pid):
                    return True
            time.sleep(0.05)
    return not alive(pid)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (so ``finally`` clauses run) instead of ending the process
    at once. Outside the main thread signals cannot be handled: nothing changes there."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def diagnose_start(home: Path, env: dict[str, str]) -> str:
    """Why the background server died at start. Prefect's background server keeps no log, so the same server is
    started once in the foreground with its output read, until it exits again (stopped if it starts this time)."""
    port = env["PREFECT_SERVER_API_PORT"]
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", port]
    with tempfile.TemporaryFile("w+") as output:
        process = subprocess.Popen(command, env=env, cwd=home, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + DIAGNOSE_SECONDS
        while process.poll() is None and not answers(f"http://127.0.0.1:{port}/api", timeout=1.0) and time.monotonic() < deadline:
            time.sleep(0.2)
        code = process.poll()
        if code is None:
            terminate(process.pid)
        output.seek(0)
        log = output.read()
    if code is None:
        return "it exited during start-up, and started when tried again in the foreground: run the command again"
    return why_it_died(home, int(port), code, log)


def why_it_died(home: Path, port: int, code: int | None, log: str) -> str:
    """One sentence on why the server exited at start, read from its output, then its exit code and the last lines."""
    lowered = log.lower()
    if "address already in use" in lowered or "port" in lowered and "already in use" in lowered:
        cause = f"port {port} on 127.0.0.1 is taken by another program"
    elif "can't locate revision" in lowered or "no such revision" in lowered:
        cause = (f"the database in {home} was migrated by a newer Prefect than this one; use that Prefect's "
                 "environment, or point PREFECT_HOME elsewhere")
    elif "readonly database" in lowered or "read-only" in lowered or "permission denied" in lowered:
        cause = f"PREFECT_HOME ({home}) or its database is read-only"
    else:
        cause = "it exited during start-up"
    tail = "\n".join(log.splitlines()[-15:]) or "(no output)"
    return f"{cause} (exit code {code}); the last lines of `prefect server start`:\n{tail}"


def check_writable(home: Path) -> None:
    """A read-only PREFECT_HOME is named as such before a server is started in it."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / f".ctxrag-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ServerDidNotStart(f"cannot start a local Prefect server: PREFECT_HOME ({home}) is read-only or "
                                f"cannot be created ({error.strerror or error})") from None
