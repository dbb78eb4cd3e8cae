"""The configured Prefect server: its URL, and a client checked to answer before a command uses it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import ctxrag.storage.environment  # noqa: F401  (offline, telemetry-off defaults before Prefect is imported)
from ctxrag.prefect_commands.errors import CommandError

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

NO_SERVER = (
    "no Prefect server configured (PREFECT_API_URL is unset). Start one in another terminal with "
    "`prefect server start`, then `export PREFECT_API_URL=http://127.0.0.1:4200/api` "
    "(or `prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`)."
)


def api_url() -> str:
    """The configured Prefect API URL, or a clear error saying how to start a server."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        raise CommandError(NO_SERVER)
    return str(url)


@contextmanager
def client() -> Iterator[SyncPrefectClient]:
    """A client for the configured server, checked to answer /health."""
    from prefect.client.orchestration import get_client

    url = api_url()
    with get_client(sync_client=True) as api:
        problem = api.api_healthcheck()
        if problem is not None:
            raise CommandError(
                f"cannot reach the Prefect API at {url} ({type(problem).__name__}: {problem}). "
                "Is `prefect server start` running, and is PREFECT_API_URL right?"
            )
        yield api
