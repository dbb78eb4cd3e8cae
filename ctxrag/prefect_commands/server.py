"""The Prefect server that ``serve``, ``deploy`` and ``trigger`` talk to (the one ``index`` and ``evaluate`` use), and a
client checked to answer before a command uses it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ctxrag.prefect_commands.errors import CommandError

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient


@contextmanager
def prefect_server() -> Iterator[str]:
    """Within the block, Prefect talks to the configured server, else the local one (started if it is not running);
    yields its API URL. In temporary mode there is none to talk to: refused."""
    from ctxrag.prefect_commands.local_server import (
        local_prefect_server,  # when a command runs, not when it is registered
    )

    with local_prefect_server(required=True) as url:
        assert url is not None
        yield url


@contextmanager
def client() -> Iterator[SyncPrefectClient]:
    """A client for the server of the enclosing ``prefect_server()`` block, checked to answer /health."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.settings import get_current_settings

    with get_client(sync_client=True) as api:
        if (problem := api.api_healthcheck()) is not None:
            raise CommandError(
                f"cannot reach the Prefect API at {get_current_settings().api.url} ({type(problem).__name__}: {problem}). "
                "Is the server running, and is PREFECT_API_URL right?"
            )
        try:
            yield api
        except PrefectHTTPStatusError as error:
            if error.response.status_code not in (401, 403):
                raise
            raise CommandError(
                f"the Prefect API at {get_current_settings().api.url} refused the request ({error.response.status_code}): "
                "it wants credentials. Set PREFECT_API_AUTH_STRING (a self-hosted server's auth string) or "
                "PREFECT_API_KEY (Prefect Cloud) as that server needs."
            ) from None
