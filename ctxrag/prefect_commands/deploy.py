"""``ctxrag deploy``: create prefect.yaml's work pools if missing, then ``prefect --no-prompt deploy`` from the project folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from ctxrag.prefect_commands.deployments import project_dir, read_deployments, work_pools_of
from ctxrag.prefect_commands.errors import err, fail
from ctxrag.prefect_commands.server import client, prefect_server
from ctxrag.storage.errors import UserError

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

DEFAULT_POOL = "ctxrag-process"


def deploy(
    name: list[str] | None = typer.Option(
        None, "--name", help="Deploy only these deployments of prefect.yaml (repeatable)."
    ),
    directory: Path | None = typer.Option(
        None, "--project-dir", help="Folder holding prefect.yaml (default: here, else this one)."
    ),
) -> None:
    """Create prefect.yaml's work pools if missing, then `prefect --no-prompt deploy --all` from the project folder."""
    try:
        folder = project_dir(directory)
        pools = work_pools_of(folder / "prefect.yaml") or [DEFAULT_POOL]
        with prefect_server() as api_url:
            with client() as api:
                for pool in pools:
                    if ensure_process_pool(api, pool):
                        err.print(f"created work pool {pool!r} (type process)", highlight=False)
            selection = [argument for value in name for argument in ("--name", value)] if name else ["--all"]
            command = _prefect_command("--no-prompt", "deploy", *selection)
            err.print(
                f"$ (cd {folder} && prefect --no-prompt deploy {' '.join(selection)})", highlight=False, markup=False
            )
            # The prefect CLI's own output is progress: it goes to stderr, so stdout holds only the deployments made.
            sys.stderr.flush()
            result = subprocess.run(
                command, cwd=folder, stdout=sys.stderr, stderr=sys.stderr, env=client_environment(folder, api_url)
            )
            if result.returncode != 0:
                fail(
                    f"`prefect deploy` failed (exit code {result.returncode}); its output is above",
                    code=result.returncode,
                )
            lines = _deployed(folder / "prefect.yaml", name)
    except UserError as error:  # CommandError, or the server's own
        fail(str(error))
    for line in lines:
        print(line)
    worker = f"prefect worker start --pool {pools[0]}"
    err.print(f"start a worker to run them: {worker_settings(api_url)} {worker}", highlight=False, markup=False)


def client_environment(folder: Path, api_url: str) -> dict[str, str]:
    """The environment of the ``prefect`` CLI run here: ours, pointed at the server, with its auth string when the
    server takes one (by environment: a command line is world-readable)."""
    from prefect.settings import get_current_settings

    env = {**os.environ, "PWD": str(folder), "PREFECT_API_URL": api_url}
    if (auth := get_current_settings().api.auth_string) is not None:
        env["PREFECT_API_AUTH_STRING"] = auth.get_secret_value()
    return env


def worker_settings(api_url: str) -> str:
    """What a worker's shell sets for this server: the URL, and for the local server its auth string read from its
    file by the shell (the secret itself is never printed)."""
    from ctxrag.prefect_commands.local_server import configured_api_url, prefect_home
    from ctxrag.prefect_commands.server_auth import export_line

    if configured_api_url():
        return f"PREFECT_API_URL={api_url}"
    return export_line(api_url, prefect_home()).removeprefix("export ")


def ensure_process_pool(api: SyncPrefectClient, name: str) -> bool:
    """Create work pool NAME (type process, Prefect's default job template) if missing; True if created."""
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.workers.process import ProcessWorker

    try:
        pool = api.read_work_pool(name)
    except ObjectNotFound:
        try:
            api.create_work_pool(
                WorkPoolCreate(
                    name=name, type="process", base_job_template=ProcessWorker.get_default_base_job_template()
                )
            )
        except ObjectAlreadyExists:
            return False
        return True
    if pool.type != "process":
        err.print(
            f"[yellow]note:[/] {escape(f'work pool {name!r} has type {pool.type!r}, not process')}", highlight=False
        )
    return False


def _prefect_command(*args: str) -> list[str]:
    """The ``prefect`` CLI of this interpreter's environment."""
    return [sys.executable, "-m", "prefect", *args]


def _deployed(prefect_yaml: Path, only: list[str] | None) -> list[str]:
    """``flow/deployment<TAB>id`` for prefect.yaml's deployments, as the server now has them."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    wanted = {
        (item.name, str(item.entrypoint)) for item in read_deployments(prefect_yaml) if not only or item.name in only
    }
    lines = []
    with client() as api:
        names = sorted({name for name, _ in wanted})
        for deployment in api.read_deployments(
            deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=names))
        ):
            if (deployment.name, str(deployment.entrypoint)) in wanted:
                lines.append(f"{api.read_flow(deployment.flow_id).name}/{deployment.name}\t{deployment.id}")
    return sorted(lines)
