"""A real ``prefect server`` for tests and scripts: own PREFECT_HOME, 127.0.0.1 only, telemetry off, stopped afterwards.

``running_prefect_server()`` is a context manager yielding a ``PrefectServer`` (API URL, UI URL, environment to
give subprocesses). Test equipment: the flow tests share one server per session through the ``prefect_server``
fixture in tests/flows/conftest.py, which skips with the reason when the server cannot start within 90 s.
"""

from __future__ import annotations

import os
import shutil
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
from dataclasses import dataclass, field
from pathlib import Path

STARTUP_SECONDS = 90.0

# Variables that would point a child process at another Prefect (or leak a profile) are dropped.
_INHERITED_PREFECT = ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH", "PREFECT_HOME")


class ServerDidNotStart(RuntimeError):
    """The server process exited or did not answer /api/health in time; the message holds its log tail."""


@dataclass
class PrefectServer:
    api_url: str
    ui_url: str
    home: Path
    log: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a client process (CLI, worker, flow) talking to this server."""
        return {**client_env(self.home / "client"), "PREFECT_API_URL": self.api_url, **extra}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def client_env(prefect_home: Path) -> dict[str, str]:
    """os.environ without another Prefect's settings, with a private PREFECT_HOME and telemetry off."""
    env = {name: value for name, value in os.environ.items() if name not in _INHERITED_PREFECT}
    prefect_home.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "PREFECT_HOME": str(prefect_home),
            "DO_NOT_TRACK": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_CLI_PROMPT": "false",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    return env


def _healthy(api_url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1: never through a proxy
    try:
        with opener.open(f"{api_url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def stop_group(process: subprocess.Popen, first: signal.Signals = signal.SIGTERM, wait_seconds: float = 15) -> None:
    """Signal the process's group (``first``: SIGTERM, or SIGINT as Ctrl-C), then SIGKILL what is left after
    ``wait_seconds``."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, first)
        process.wait(timeout=wait_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass


@contextmanager
def running_prefect_server(
    ui: bool = True, startup_seconds: float = STARTUP_SECONDS, auth_string: str | None = None
) -> Iterator[PrefectServer]:
    """Start ``prefect server start --host 127.0.0.1 --port <free>`` with its own PREFECT_HOME (and ``auth_string``:
    the server's own API auth, as a self-hosted server of a user's would have); stop it on exit."""
    home = Path(tempfile.mkdtemp(prefix="ctxrag-prefect-server-"))
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = client_env(home / "server")
    env.update(
        {
            "PREFECT_SERVER_API_HOST": "127.0.0.1",
            "PREFECT_SERVER_API_PORT": str(port),
            "PREFECT_UI_ENABLED": "true" if ui else "false",
            "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
            "PREFECT_UI_API_URL": api_url,
            "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        }
    )
    if auth_string is not None:
        env["PREFECT_SERVER_API_AUTH_STRING"] = auth_string
    log = home / "server.log"
    prefect = Path(sys.executable).with_name("prefect")
    command = [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port), "--analytics-off"]
    command.append("--ui" if ui else "--no-ui")
    with open(log, "wb") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_seconds
        while not _healthy(api_url):
            if process.poll() is not None:
                raise ServerDidNotStart(f"prefect server exited with code {process.returncode}: {_tail(log)}")
            if time.monotonic() > deadline:
                raise ServerDidNotStart(
                    f"prefect server did not answer {api_url}/health within {startup_seconds:.0f} s: {_tail(log)}"
                )
            time.sleep(0.25)
        yield PrefectServer(api_url=api_url, ui_url=f"http://127.0.0.1:{port}", home=home, log=log, process=process)
    finally:
        stop_group(process)
        shutil.rmtree(home, ignore_errors=True)


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
