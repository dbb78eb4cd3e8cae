"""The local Prefect server's process: started detached with a minimal environment, told apart from other
programs by its command line and start time, stopped by its process group, and diagnosed when it dies at start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxrag.storage.errors import UserError

LOG_FILE = "ctxrag-server.log"
STOP_SECONDS = 15.0

# The services a local server runs: what the UI needs to show a whole run (the task-run recorder and the event
# persister: task runs, their states and the graph, events) and cancelling a run from the UI; Prefect's event vacuum
# (trims old events) keeps its default. Off: what serves deployments, workers and automations, which need a server
# of the user's own (benchmarks/results/server_services.md measures what each costs at start).
SERVICES_ON = ("TASK_RUN_RECORDER", "EVENT_PERSISTER", "CANCELLATION_CLEANUP")
SERVICES_OFF = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "TRIGGERS", "PAUSE_EXPIRATIONS", "REPOSSESSOR", "CLEANUP_RECONCILER")

# Inherited as they are: what a Python process needs to run at all, and Prefect settings. Left out: everything else
# (API keys, tokens, cloud credentials) and the client's own Prefect settings that could hold a secret or point
# elsewhere (PREFECT_API_URL, PREFECT_API_KEY, any *KEY*, *SECRET*, *TOKEN*, *AUTH* outside PREFECT_SERVER_*).
_KEPT = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")
_PREFECT_DROPPED = ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_PROFILE")
_SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "AUTH", "PASSWORD")


class ServerDidNotStart(UserError):
    """The local server exited or did not answer in time; the message says why and names its log."""


def _inherited(name: str) -> bool:
    if name in _KEPT:
        return True
    if not name.startswith("PREFECT_") or name in _PREFECT_DROPPED:
        return False
    return name.startswith("PREFECT_SERVER_") or not any(word in name for word in _SECRET_WORDS)


def server_environment(home: Path, source: dict[str, str] | None = None) -> dict[str, str]:
    """The daemon's environment: the basics a process needs, Prefect's settings, the services above, telemetry off."""
    env = {name: value for name, value in (os.environ if source is None else source).items() if _inherited(name)}
    env.update({"PREFECT_HOME": str(home), "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    env.update({f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in SERVICES_OFF})
    env.update({f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "true" for name in SERVICES_ON})
    env.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")  # the log of a long-lived server stays small
    return env


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc), which a reused pid does not share; None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def is_prefect_server(pid: int, ticks: int | None = None) -> bool:
    """Whether ``pid`` runs a Prefect server (``prefect server start`` or its uvicorn app) and, when ``ticks`` is
    given, is the very process that was recorded (same start time)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return alive(pid)  # no /proc (not Linux): trust the recorded pid
    is_server = (b"prefect\0server\0start" in command) or (b"prefect.server.api.server:create_app" in command)
    return is_server and (ticks is None or start_ticks(pid) in (ticks, None))


def answers(api_url: str, timeout: float = 5.0) -> bool:
    """True when ``GET {api_url}/health`` answers 200 (never through a proxy: the server is on 127.0.0.1)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{api_url}/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(preferred: int) -> int:
    """Prefect's own port (4200) when it is free, so the UI is where Prefect users look; else any free port."""
    if port_is_free(preferred):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn(home: Path, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``prefect server start`` on 127.0.0.1:``port``, in its own session (Ctrl-C in this terminal does not reach
    the server that later commands reuse), its output in ``home/ctxrag-server.log`` (new at each start)."""
    with (home / LOG_FILE).open("wb") as log:
        os.chmod(home / LOG_FILE, 0o600)
        return subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env={**env, "PREFECT_UI_API_URL": f"http://127.0.0.1:{port}/api"}, cwd=home,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )


def terminate(pid: int, wait_seconds: float = STOP_SECONDS) -> bool:
    """SIGTERM the server's process group, SIGKILL what is left after ``wait_seconds``; True once it is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            try:
                finished, _ = os.waitpid(pid, os.WNOHANG)  # our child: reap it
            except ChildProcessError:
                finished = 0 if alive(pid) else pid
            if finished:
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


def log_tail(home: Path, lines: int = 15) -> str:
    try:
        text = (home / LOG_FILE).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def why_it_died(home: Path, port: int, code: int | None) -> str:
    """One sentence on why the server exited at start, read from its log, then its exit code and the log's tail."""
    log = log_tail(home, lines=400)
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
    tail = "\n".join(log.splitlines()[-15:]) or "(empty log)"
    return f"{cause} (exit code {code}); the last lines of {home / LOG_FILE}:\n{tail}"


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
