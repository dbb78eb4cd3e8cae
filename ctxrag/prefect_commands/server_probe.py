"""How a ctxrag command looks at a local Prefect server from outside: whether its pid is alive and runs a Prefect
server, and what its HTTP API answers (health, version, the home it names), never through a proxy."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from ctxrag.prefect_commands.server_auth import basic_authorization

SERVER_COMMAND = "prefect.server.api.server:create_app"  # what `prefect server start --background` runs


def alive(pid: int) -> bool:
    return psutil.pid_exists(pid)


def _command_line(pid: int) -> list[str] | None:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return None


def is_prefect_server(pid: int) -> bool:
    """Whether ``pid`` runs a Prefect server, by its command line: a reused pid is not taken for it."""
    command = _command_line(pid) or []
    return (
        SERVER_COMMAND in command or {"server", "start"} <= set(command) and any("prefect" in part for part in command)
    )


def _request(api_url: str, path: str, auth: str | None = None, timeout: float = 5.0) -> tuple[int | None, object]:
    """GET ``api_url/path`` (never through a proxy; with ``auth``'s basic authorization): the status (None: no
    answer) and, for a 200, its JSON."""
    request = urllib.request.Request(
        f"{api_url}/{path}", headers={"Authorization": basic_authorization(auth)} if auth else {}
    )
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null") if response.status == 200 else None
    except urllib.error.HTTPError as error:
        return error.code, None
    except (OSError, ValueError):
        return None, None


def _get(api_url: str, path: str, timeout: float = 5.0, auth: str | None = None) -> object:
    """The JSON of a 200 answer to GET ``api_url/path``, else None."""
    return _request(api_url, path, auth, timeout)[1]


def answers(api_url: str, timeout: float = 5.0) -> bool:
    return _get(api_url, "health", timeout) is not None  # /health answers without the auth string


def server_version(api_url: str, auth: str | None = None) -> str | None:
    return None if (found := _get(api_url, "admin/version", auth=auth)) is None else str(found)


def server_home(api_url: str, auth: str | None = None) -> Path | None:
    """The PREFECT_HOME the server at ``api_url`` names in its settings (None when it does not say, or refuses
    ``auth``)."""
    settings = _get(api_url, "admin/settings", auth=auth)
    return Path(settings["home"]) if isinstance(settings, dict) and settings.get("home") else None
