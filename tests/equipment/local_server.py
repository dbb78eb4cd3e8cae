"""The ``ctxrag`` command as a new user runs it (no PREFECT_API_URL, the default background server, a private
PREFECT_HOME), the server it started, and a check that no Prefect server a test started outlives the session.

Test equipment: every test that lets ctxrag start its local server stops it with ``ctxrag server stop`` (or
``stopped_afterwards``); ``leftover_servers`` finds any that was not stopped (tests/conftest.py fails the session).
A test session keeps every temporary folder in its own home, so only servers started by that session are found.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import REPO

SERVER_COMMANDS = (b"prefect\0server\0start", b"prefect.server.api.server:create_app")


def user_env(home: Path, prefect_home: Path, **extra: str) -> dict[str, str]:
    """os.environ without Prefect settings and ctxrag's server mode: a user with no Prefect setup of their own."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PREFECT_") and name not in ("CTXRAG_PREFECT_SERVER", "CI")
    }
    env.update({"CTXRAG_HOME": str(home), "PREFECT_HOME": str(prefect_home), "COLUMNS": "200", **extra})
    return env


def ctxrag_as_user(
    home: Path, prefect_home: Path, *args: str, timeout: float = 300, **extra: str
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from ctxrag.cli import main; main()", *args]
    return subprocess.run(
        command, capture_output=True, text=True, env=user_env(home, prefect_home, **extra), cwd=REPO, timeout=timeout
    )


def api_call(
    api_url: str, path: str, body: object = None, auth: str | None = None, method: str | None = None
) -> tuple[int, object]:
    """(status, JSON) of a request to the Prefect API at ``api_url``, with ``auth`` as Prefect's clients send an auth
    string (``Basic`` + base64 of the string) or without any; a POST when ``body`` is given."""
    from ctxrag.prefect_commands.server_auth import basic_authorization

    headers = {"Content-Type": "application/json", **({"Authorization": basic_authorization(auth)} if auth else {})}
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{api_url}{path}", data=data, headers=headers, method=method or ("POST" if data else "GET")
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        return error.code, None


def home_auth(prefect_home: Path) -> str:
    """The auth string ctxrag made for ``prefect_home`` (never printed by a test)."""
    from ctxrag.prefect_commands.server_auth import read_auth_string

    value = read_auth_string(prefect_home)
    assert value, f"no auth string in {prefect_home}"
    return value


def post_as_owner(prefect_home: Path, api_url: str, path: str, body: dict) -> Any:
    """The JSON answer to POST ``path`` with the home's auth string, as the server's owner's commands send it."""
    status, answer = api_call(api_url, path, body, home_auth(prefect_home))
    assert status in (200, 201), f"POST {path}: HTTP {status}"
    return answer


def recorded_server(prefect_home: Path) -> dict:
    """The server Prefect recorded in ``prefect_home`` (its pid file), with its API and UI URLs."""
    from ctxrag.prefect_commands.local_server import find_server

    server = find_server(prefect_home)
    assert server is not None, f"no Prefect server recorded in {prefect_home}"
    return {"pid": server.pid, "api_url": server.api_url, "ui_url": server.ui_url}


@contextmanager
def stopped_afterwards(prefect_home: Path) -> Iterator[Path]:
    """Stop the server ctxrag starts in ``prefect_home`` when the block ends, however it ends."""
    try:
        yield prefect_home
    finally:
        ctxrag_as_user(prefect_home.parent / "stop-home", prefect_home, "server", "stop", timeout=60)


def _server_processes() -> dict[int, Path | None]:
    """Every Prefect server process on the machine and its PREFECT_HOME (None when unreadable)."""
    found: dict[int, Path | None] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            if not any(marker in command for marker in SERVER_COMMANDS):
                continue
            environ = dict(
                item.split(b"=", 1) for item in (entry / "environ").read_bytes().split(b"\0") if b"=" in item
            )
        except OSError:
            continue
        home = environ.get(b"PREFECT_HOME")
        found[int(entry.name)] = Path(home.decode()) if home else None
    return found


def leftover_servers(root: Path) -> dict[int, Path]:
    """Running Prefect servers whose PREFECT_HOME is inside ``root`` (a test session's home)."""
    root = root.resolve()
    return {
        pid: home
        for pid, home in _server_processes().items()
        if home is not None and home.resolve().is_relative_to(root)
    }


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def fake_server(seconds: float = 120) -> subprocess.Popen[bytes]:
    """A process whose command line reads as ``prefect server start`` but that serves nothing (a busy server)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time; time.sleep({seconds})",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            "9",
        ],
        start_new_session=True,
    )
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    wait_for(
        lambda: not cmdline.exists() or SERVER_COMMANDS[0] in cmdline.read_bytes(), 30
    )  # a busy machine: until it has exec'd
    return process


def wait_for(predicate, seconds: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
