"""``ctxrag serve``: serve prefect.yaml's deployments from this process (no work pool, no worker).

The deployments are prefect.yaml's: names, entrypoints, descriptions, tags, parameters, schedules and concurrency
limits. The options override some of them for this process: a parameter option sets that parameter in every
deployment prefect.yaml gives it to; ``--cron``/``--timezone`` replace the schedules of the scheduled ones.

A run reads only under the folders served for: its deployment's ``source`` (a file's folder), ``evalset`` and gate
evaluation set's folders, and each ``--allow-source``; a run naming a path elsewhere is refused by the flow itself
(``CTXRAG_ALLOWED_SOURCES``, which this process sets for its runs: ``tasks/stages/input_checks.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ctxrag.prefect_commands.deployments import Deployment, project_dir, read_deployments
from ctxrag.prefect_commands.errors import CommandError, err, fail
from ctxrag.prefect_commands.server import client, prefect_server
from ctxrag.storage.errors import UserError

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.deployments.runner import RunnerDeployment
    from prefect.flows import Flow
    from prefect.schedules import Schedule

INDEX_OPTIONS = {"contextualizer", "embedder", "backend"}  # serve's options that go into the index options
PATH_PARAMETERS = ("source", "evalset")  # made absolute when serve starts (relative to the current folder), must exist
YAML = "from prefect.yaml"


def serve(
    cron: str | None = typer.Option(None, help="Re-index schedule (cron); '' for none.", show_default=YAML),
    timezone: str | None = typer.Option(None, help="Time zone of the cron schedule.", show_default=f"{YAML}, else UTC"),
    source: str | None = typer.Option(
        None, help="What the scheduled re-index indexes (made absolute here).", show_default=YAML
    ),
    name: str | None = typer.Option(None, "--name", help="Index name for both deployments.", show_default=YAML),
    contextualizer: str | None = typer.Option(
        None, help="structural, none, claude, claude-summary.", show_default=YAML
    ),
    embedder: str | None = typer.Option(None, help="local, voyage or voyage-context-3.", show_default=YAML),
    backend: str | None = typer.Option(None, help="embedded or elasticsearch.", show_default=YAML),
    evalset: str | None = typer.Option(None, help="Evaluation set of the evaluate deployment.", show_default=YAML),
    limit: int | None = typer.Option(None, min=1, help="Most flow runs this process runs at once."),
    allow_source: list[Path] | None = typer.Option(
        None,
        "--allow-source",
        help="Another folder a triggered run may read (source, evalset; repeatable). Runs read only under "
        "the folders of the served source and evalset, and these.",
    ),
) -> None:
    """Serve ctxrag-index/reindex (scheduled) and ctxrag-evaluate/evaluate from this process: no work pool needed."""
    options = {
        "source": source,
        "name": name,
        "contextualizer": contextualizer,
        "embedder": embedder,
        "backend": backend,
        "evalset": evalset,
    }
    try:
        with prefect_server():
            with client() as api:
                served = load(project_dir())
                _refuse_pool_deployments(api, [full_name(entry, flow) for entry, flow in served])
            deployments = build(
                served, {key: value for key, value in options.items() if value is not None}, cron, timezone
            )
            folders = allowed_for(deployments, allow_source or [])
            from ctxrag.tasks.stages.input_checks import ALLOWED_VARIABLE

            os.environ[ALLOWED_VARIABLE] = os.pathsep.join(
                map(str, folders)
            )  # the runs' environment: no parameter changes it
            from prefect import serve as prefect_serve

            err.print(
                f"serving {_summary(served, deployments)}; runs read only under {', '.join(map(str, folders))}; Ctrl-C stops",
                highlight=False,
                markup=False,
            )
            prefect_serve(*deployments, limit=limit, print_starting_message=False)
    except UserError as error:  # CommandError, or the server's own
        fail(str(error))


def load(folder: Path) -> list[tuple[Deployment, Flow[Any, Any]]]:
    """FOLDER's prefect.yaml deployments, each with its entrypoint's flow."""
    entries = read_deployments(folder / "prefect.yaml")
    if not entries:
        raise CommandError(f"{folder / 'prefect.yaml'} defines no deployments")
    return [(entry, entry.load_flow(folder)) for entry in entries]


def full_name(entry: Deployment, flow: Flow[Any, Any]) -> str:
    return f"{flow.name}/{entry.name}"


def build(
    served: list[tuple[Deployment, Flow[Any, Any]]],
    options: dict[str, Any],
    cron: str | None = None,
    timezone: str | None = None,
) -> list[RunnerDeployment]:
    """Runner deployments as prefect.yaml defines them, with OPTIONS' parameters and --cron/--timezone applied: a
    deployment's own parameter is replaced, an index option (``--contextualizer``, ``--embedder``, ``--backend``)
    goes into the ``options`` of the deployments that take them."""
    known = {key for entry, _ in served for key in entry.parameters} | (
        INDEX_OPTIONS if any("options" in entry.parameters for entry, _ in served) else set()
    )
    if unused := sorted(options.keys() - known):
        raise CommandError(f"--{unused[0]}: no deployment in prefect.yaml has a parameter {unused[0]!r}")
    parameters = [_parameters(entry, options) for entry, _ in served]  # every path checked before any schedule
    deployments = []
    for (entry, flow), values in zip(served, parameters):
        deployment: RunnerDeployment = flow.to_deployment(  # type: ignore[assignment]  # a sync call: no coroutine
            name=entry.name,
            description=entry.description,
            schedules=_schedules(entry, cron, timezone),
            parameters=values,
            tags=entry.tags,
            concurrency_limit=entry.prefect_concurrency_limit(),
        )
        deployments.append(deployment)
    return deployments


def _parameters(entry: Deployment, options: dict[str, Any]) -> dict[str, Any]:
    parameters = {**entry.parameters, **{key: value for key, value in options.items() if key in entry.parameters}}
    if "options" in entry.parameters:
        from ctxrag.tasks.options import IndexOptions, nested

        chosen = {key: value for key, value in options.items() if key in INDEX_OPTIONS}
        parameters["options"] = nested(
            IndexOptions, chosen, "ctxrag serve", into=copy.deepcopy(entry.parameters["options"] or {})
        )
    for key in PATH_PARAMETERS:
        if key in parameters:
            path = Path(str(parameters[key]))
            if not path.exists():
                raise CommandError(f"--{key} {path} not found (relative paths are read from {Path.cwd()})")
            parameters[key] = str(path.resolve())
    return parameters


def allowed_for(deployments: list[RunnerDeployment], extra: list[Path]) -> list[Path]:
    """The folders the runs may read: each deployment's ``source`` (a file's folder), ``evalset`` and
    ``options.gate.evalset`` folders, and ``extra`` (``--allow-source``: existing folders), resolved, without repeats."""
    folders: list[Path] = []
    for deployment in deployments:
        parameters = deployment.parameters or {}
        options: dict[str, Any] = parameters.get("options") or {}
        gate: dict[str, Any] = options.get("gate") or {}
        for value in (parameters.get("source"), parameters.get("evalset"), gate.get("evalset")):
            if value:
                path = Path(str(value)).resolve()
                folders.append(path if path.is_dir() else path.parent)
    for folder in extra:
        if not folder.is_dir():
            raise CommandError(f"--allow-source {folder}: no such folder (relative paths are read from {Path.cwd()})")
        folders.append(folder.resolve())
    return list(dict.fromkeys(folders))


def _schedules(entry: Deployment, cron: str | None, timezone: str | None) -> list[Schedule]:
    from prefect.schedules import Cron

    schedules = entry.prefect_schedules()
    if not schedules or (cron is None and timezone is None):
        return schedules
    if cron is None:
        return [dataclasses.replace(schedule, timezone=timezone) for schedule in schedules]
    if not cron.strip():
        return []
    try:
        return [Cron(cron, timezone=timezone or schedules[0].timezone or "UTC")]
    except ValueError as error:
        raise CommandError(f"--cron {cron!r}: {error}") from None


def _summary(served: list[tuple[Deployment, Flow[Any, Any]]], deployments: list[RunnerDeployment]) -> str:
    """``flow/name (cron '0 3 * * *' UTC) and flow/name; trigger with `...```: what serve runs, for stderr."""
    described = []
    for (entry, flow), deployment in zip(served, deployments):
        schedules = [_describe(item.schedule) for item in deployment.schedules or []]
        when = f" ({', '.join(schedules)})" if schedules else " (no schedule)" if entry.schedules else ""
        described.append(full_name(entry, flow) + when)
    listed = " and ".join([", ".join(described[:-1]), described[-1]] if len(described) > 1 else described)
    first, flow = served[0]
    example = f"ctxrag trigger {full_name(first, flow)}" + (" --param name=..." if "name" in first.parameters else "")
    return f"{listed}; trigger with `{example}`"


def _describe(schedule: Any) -> str:
    if getattr(schedule, "cron", None):
        return f"cron {schedule.cron!r} {schedule.timezone or 'UTC'}"
    if getattr(schedule, "interval", None):
        return f"every {schedule.interval}"
    return f"rrule {getattr(schedule, 'rrule', schedule)!r}"


def _refuse_pool_deployments(api: SyncPrefectClient, names: list[str]) -> None:
    """Serving a deployment that is also on a work pool would let a worker and this process both pick its runs."""
    from prefect.exceptions import ObjectNotFound

    for name in names:
        try:
            deployment = api.read_deployment_by_name(name)
        except ObjectNotFound:
            continue
        if deployment.work_pool_name:
            raise CommandError(
                f"deployment {name!r} is on work pool {deployment.work_pool_name!r} (from `ctxrag deploy`); serve it from "
                f"a worker (`prefect worker start --pool {deployment.work_pool_name}`), or delete it first "
                f"(`prefect deployment delete {name}`) to serve it from this process"
            )
