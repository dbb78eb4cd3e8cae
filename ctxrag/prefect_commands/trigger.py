"""``ctxrag trigger``: start a run of a deployment, optionally wait for it; its id and state on stdout."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, cast

import typer

from ctxrag.prefect_commands.errors import CommandError, err, fail
from ctxrag.prefect_commands.params import merged, parse_env, parse_params
from ctxrag.prefect_commands.server import client, prefect_server
from ctxrag.storage.errors import UserError
from ctxrag.tasks.common.display import readable_rows

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.objects import FlowRun


def trigger(
    deployment: str = typer.Argument(..., help="FLOW/DEPLOYMENT, e.g. ctxrag-index/reindex (or a deployment id)."),
    param: list[str] | None = typer.Option(
        None, "--param", "-p", help="KEY=VALUE (repeatable); JSON when it parses, else a string."
    ),
    env: list[str] | None = typer.Option(
        None, "--env", help="NAME=VALUE for this run's environment (job variable env; repeatable)."
    ),
    watch: bool = typer.Option(
        False, "--watch/--no-watch", help="Wait for the run to end; exit 1 unless it completed."
    ),
    timeout: float = typer.Option(
        3600.0, min=1, help="--watch: give up waiting after this many seconds (the run goes on)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the flow run as one JSON object."),
) -> None:
    """Start a run of DEPLOYMENT; prints its id and state (with --watch, the final state)."""
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    try:
        parameters = parse_params(param)
        job_variables = {"env": parse_env(env)} if env else None
        if "/" not in deployment and not _is_uuid(deployment):
            raise CommandError(
                f"name the deployment as FLOW/DEPLOYMENT, e.g. ctxrag-index/reindex (got {deployment!r})"
            )
        with prefect_server(), client() as api:
            parameters = merged(parameters, _check_parameters(api, deployment, parameters))
            try:
                flow_run = cast(
                    "FlowRun",
                    run_deployment(
                        deployment, parameters=parameters, timeout=0, as_subflow=False, job_variables=job_variables
                    ),
                )
            except ObjectNotFound:
                raise CommandError(_no_deployment(deployment)) from None
            except PrefectHTTPStatusError as error:
                raise CommandError(f"the server refused the run: {_detail(error)}") from None
            url = _ui_url(flow_run)
            err.print(
                f"created flow run {flow_run.name!r} ({flow_run.id}) of {deployment}: {url}",
                highlight=False,
                markup=False,
            )
            if watch:
                flow_run = _watch(api, flow_run, timeout)
                tables = _result_tables(api, flow_run) if flow_run.state and flow_run.state.is_completed() else []
    except UserError as error:  # CommandError, or the server's own
        fail(str(error))
    state = flow_run.state
    state_type = state.type.value if state else "UNKNOWN"
    for key, rows in tables if watch else []:  # what the run found (metrics, the index summary), on stderr
        err.print("\n".join(table_lines(key, rows)), highlight=False, markup=False)
    if as_json:
        print(
            json.dumps(
                {
                    "id": str(flow_run.id),
                    "name": flow_run.name,
                    "deployment": deployment,
                    "state": state_type,
                    "state_name": state.name if state else None,
                    "message": state.message if state else None,
                    "parameters": flow_run.parameters,
                    "url": url,
                }
            )
        )
    else:
        print(f"{flow_run.id}\t{state_type}")
    if watch and not (state and state.is_completed()):
        if state and state.message:
            err.print(f"flow run {flow_run.name!r} ended {state.name}: {state.message}", highlight=False, markup=False)
        raise typer.Exit(code=1)


def table_lines(key: str, rows: list[dict[str, Any]]) -> list[str]:
    """A table artifact as log lines: its key, then each row as ``column=value``, figures rounded for people."""
    return [f"{key}:"] + [
        "  " + "  ".join(f"{column}={value}" for column, value in row.items()) for row in readable_rows(rows)
    ]


def _result_tables(api: SyncPrefectClient, flow_run: FlowRun) -> list[tuple[str, list[dict[str, Any]]]]:
    """The run's table artifacts (the evaluation's metrics, the index run's summary), as (key, rows)."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    found = api.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run.id])))
    tables = []
    for artifact in found:
        if artifact.type == "table" and artifact.key:
            rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
            if isinstance(rows, list):
                tables.append((artifact.key, [row for row in rows if isinstance(row, dict)]))
    return tables


def _no_deployment(deployment: str) -> str:
    return (
        f"no deployment {deployment!r} on this server; `prefect deployment ls` lists them, `ctxrag deploy` creates them"
    )


def _check_parameters(api: SyncPrefectClient, deployment: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """Unknown parameter names fail here, with the known ones listed (the server would accept them, the run would
    not); returns the deployment's parameters."""
    from uuid import UUID

    from prefect.exceptions import ObjectNotFound

    try:
        found = (
            api.read_deployment(UUID(deployment)) if _is_uuid(deployment) else api.read_deployment_by_name(deployment)
        )
    except ObjectNotFound:
        raise CommandError(_no_deployment(deployment)) from None
    known = set((found.parameter_openapi_schema or {}).get("properties", {}))
    unknown = sorted(set(parameters) - known)
    if known and unknown:
        raise CommandError(
            f"{deployment} has no parameter {', '.join(map(repr, unknown))}; its parameters: {', '.join(sorted(known))}"
        )
    return dict(found.parameters or {})


def _watch(api: SyncPrefectClient, flow_run: FlowRun, timeout: float) -> FlowRun:
    """Poll the run until it ends (state changes on stderr) or TIMEOUT passes."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        flow_run = api.read_flow_run(flow_run.id)
        name = str(flow_run.state.name) if flow_run.state else "?"
        if name != last:
            err.print(f"  {time.strftime('%H:%M:%S')} {flow_run.name}: {name}", highlight=False, markup=False)
            last = name
        if flow_run.state and flow_run.state.is_final():
            return flow_run
        if time.monotonic() > deadline:
            err.print(
                f"still {name} after {timeout:.0f} s; not waiting longer (the run goes on)",
                highlight=False,
                markup=False,
            )
            return flow_run
        time.sleep(1.0)


def _is_uuid(value: str) -> bool:
    from uuid import UUID

    try:
        UUID(value)
    except ValueError:
        return False
    return True


def _detail(error: Exception) -> str:
    response = getattr(error, "response", None)
    try:
        return str(response.json().get("detail", response.text)) if response is not None else str(error)
    except ValueError:
        return str(response.text if response is not None else error)


def _ui_url(flow_run: FlowRun) -> str:
    from prefect.utilities.urls import url_for

    return url_for(flow_run) or ""
