"""Prefect operations: ``ctxrag serve``, ``ctxrag deploy``, ``ctxrag trigger`` and ``ctxrag server``, one module each
(added to the CLI by ``register``); ``local_server`` starts and reuses the local server ``index`` and ``evaluate`` run against.

``deployments`` reads prefect.yaml, the one definition of the deployments; ``server`` is the checked client of the
configured Prefect server; ``errors`` is how a problem the user can fix is shown. Results go to stdout, progress to
stderr; a missing or unreachable Prefect server is one line and exit code 2.
"""

from __future__ import annotations

import typer

from ctxrag.prefect_commands.deploy import deploy
from ctxrag.prefect_commands.serve import serve
from ctxrag.prefect_commands.server_commands import server_app
from ctxrag.prefect_commands.trigger import trigger


def register(app: typer.Typer) -> None:
    """Add serve, deploy, trigger and server to the ``ctxrag`` command."""
    app.command("serve")(serve)
    app.command("deploy")(deploy)
    app.command("trigger")(trigger)
    app.add_typer(server_app, name="server")
