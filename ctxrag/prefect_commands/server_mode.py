"""Which Prefect server a flow run uses when none is configured (no ``PREFECT_API_URL``): ``background``, ctxrag's
local server (``ctxrag.prefect_commands.local_server``: reused, and outliving the process that started it), or
``temporary``, Prefect's own temporary server inside the process (stopped when it exits).

The ``ctxrag`` command's default is background (temporary under ``CI=true``); the Python API's is temporary, so a
program leaves no Prefect process behind unless it asks (``server="background"``). ``CTXRAG_PREFECT_SERVER`` sets
either; the API's ``server=`` argument wins over it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from ctxrag.storage.errors import UserError
from ctxrag.storage.settings import settings

MODE_VARIABLE = "CTXRAG_PREFECT_SERVER"
ServerMode = Literal["background", "temporary"]
SERVER_MODES: tuple[ServerMode, ...] = ("background", "temporary")
TEMPORARY_STARTUP_SECONDS = 90  # Prefect's temporary server: its start waited for this long (Prefect's default: 20 s)


def server_mode(chosen: str | None = None, default: ServerMode | None = None) -> ServerMode:
    """Which server a run uses when none is configured: ``background`` (the local server, reused; it outlives the
    process) or ``temporary`` (Prefect's, inside the process). ``chosen`` (the Python API's ``server=``) first, then
    CTXRAG_PREFECT_SERVER, then ``default`` (the Python API's: temporary), then the command's: background (temporary
    under CI=true)."""
    if chosen is not None:
        return _mode(chosen, "server")
    if given := settings().prefect_server:  # checked there: one of SERVER_MODES
        return _mode(given, MODE_VARIABLE)
    if default is not None:
        return default
    return "temporary" if settings().under_ci else "background"


def _mode(value: str, where: str) -> ServerMode:
    for mode in SERVER_MODES:
        if value.strip().lower() == mode:
            return mode
    raise UserError(f"{where}={value.strip().lower()!r}: expected one of {', '.join(SERVER_MODES)}")


_PROCESS_AUTH_STRING = secrets.token_urlsafe(32)  # the temporary server's: one per process, as that server is


@contextmanager
def temporary_server_settings() -> Iterator[None]:
    """Within the block, Prefect's temporary server (started on first use, stopped when the process exits) waits up to
    90 s for its start, has analytics off and, as the local server, takes only requests with an auth string (random,
    this process's, never written anywhere): other users reach nothing on it while it runs. A setting in the
    environment wins. Prefect settings, not environment variables: the host program's environment stays as it was."""
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_SERVER_ANALYTICS_ENABLED,
        PREFECT_SERVER_API_AUTH_STRING,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        temporary_settings,
    )

    wanted: dict[Any, Any] = {
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: TEMPORARY_STARTUP_SECONDS,
        PREFECT_SERVER_ANALYTICS_ENABLED: False,
    }
    if not {PREFECT_API_AUTH_STRING.name, PREFECT_SERVER_API_AUTH_STRING.name} & set(os.environ):
        wanted.update(
            {PREFECT_SERVER_API_AUTH_STRING: _PROCESS_AUTH_STRING, PREFECT_API_AUTH_STRING: _PROCESS_AUTH_STRING}
        )
    with temporary_settings(
        updates={setting: value for setting, value in wanted.items() if setting.name not in os.environ}
    ):
        yield
