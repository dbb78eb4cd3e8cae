"""The Prefect server that ``serve``, ``deploy`` and ``trigger`` talk to (the one ``index`` and ``evaluate`` use), and a
client checked to answer before a command uses it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import ctxrag.storage.environment  # noqa: F401  (offline, telemetry-off defaults before Prefect is imported)
from ctxrag.prefect_commands.errors import CommandError
from ctxrag.prefect_commands.local_server import MODE_VARIABLE, local_prefect_server
from ctxrag.prefect_commands.server_commands import announce_started
from ctxrag.storage.errors import UserError

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

NO_SERVER = (
    f"no Prefect server: {MODE_VARIABLE}=temporary (the default under CI=true) starts none that outlives a command. "
    f"Unset it (or set {MODE_VARIABLE}=background) to use the local server, or set PREFECT_API_URL to your own."
)


@contextmanager
def prefect_server() -> Iterator[str]:
    """Within the block, Prefect talks to the server ctxrag uses: the configured one (PREFECT_API_URL), else the local
    one, started if it is not running. Yields its API URL."""
    try:
        with local_prefect_server(announce=announce_started) as url:
            if url is None:
                raise CommandError(NO_SERVER)
            yield url
    except UserError as error:
        raise CommandError(str(error)) from None


@contextmanager
def client() -> Iterator[SyncPrefectClient]:
    """A client for the server of the enclosing ``prefect_server()`` block, checked to answer /health."""
    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    with get_client(sync_client=True) as api:
        problem = api.api_healthcheck()
        if problem is not None:
            raise CommandError(
                f"cannot reach the Prefect API at {get_current_settings().api.url} ({type(problem).__name__}: {problem}). "
                "Is the server running, and is PREFECT_API_URL right?"
            )
        yield api
