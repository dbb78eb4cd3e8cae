"""Prefect operations: ``ctxrag serve``, ``ctxrag deploy`` and ``ctxrag trigger`` (added to the CLI by ``register``).

Results go to stdout, progress to stderr; a missing or unreachable Prefect server is one line and exit code 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional, cast

import ctxrag.offline  # noqa: F401  (offline, telemetry-off defaults before Prefect is imported)
import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments.runner import RunnerDeployment

PROJECT_DIR = Path(__file__).resolve().parents[1]
DEFAULT_POOL = "ctxrag-process"
DEFAULT_CRON = "0 3 * * *"
NO_SERVER = (
    "no Prefect server configured (PREFECT_API_URL is unset). Start one in another terminal with "
    "`prefect server start`, then `export PREFECT_API_URL=http://127.0.0.1:4200/api` "
    "(or `prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`)."
)

err = Console(stderr=True, soft_wrap=True)


class _UserError(Exception):
    """A problem the user can fix; shown as one line, no traceback."""


def _fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code=code)


def _api_url() -> str:
    """The configured Prefect API URL, or a clear error saying how to start a server."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        raise _UserError(NO_SERVER)
    return str(url)


@contextmanager
def _client() -> Iterator[SyncPrefectClient]:
    """A client for the configured server, checked to answer /health."""
    from prefect.client.orchestration import get_client

    url = _api_url()
    with get_client(sync_client=True) as client:
        problem = client.api_healthcheck()
        if problem is not None:
            raise _UserError(
                f"cannot reach the Prefect API at {url} ({type(problem).__name__}: {problem}). "
                "Is `prefect server start` running, and is PREFECT_API_URL right?"
            )
        yield client


def parse_params(pairs: Optional[list[str]]) -> dict[str, Any]:
    """``k=v`` pairs -> parameters; a value that parses as JSON is JSON (``k=5`` -> 5), otherwise a string."""
    parameters: dict[str, Any] = {}
    for pair in pairs or []:
        key, separator, raw = pair.partition("=")
        if not separator or not key.strip():
            raise _UserError(f"--param takes KEY=VALUE, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        parameters[key.strip()] = value
    return parameters


def _parse_env(pairs: Optional[list[str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs or []:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise _UserError(f"--env takes NAME=VALUE, got {pair!r}")
        env[key.strip()] = value
    return env


def project_dir(given: Optional[Path] = None) -> Path:
    """The folder holding prefect.yaml: the one given, else the current folder, else this checkout."""
    candidates = [given] if given else [Path.cwd(), PROJECT_DIR]
    for candidate in candidates:
        if candidate is not None and (candidate / "prefect.yaml").is_file():
            return candidate.resolve()
    where = given or Path.cwd()
    raise _UserError(f"no prefect.yaml in {where}; run from the ctxrag folder or pass --project-dir")


def work_pools_of(prefect_yaml: Path) -> list[str]:
    """The work pool names prefect.yaml's deployments use (aliases resolved)."""
    import yaml

    config = yaml.safe_load(prefect_yaml.read_text()) or {}
    names = [
        str(deployment["work_pool"]["name"])
        for deployment in config.get("deployments") or []
        if isinstance(deployment.get("work_pool"), dict) and deployment["work_pool"].get("name")
    ]
    return list(dict.fromkeys(names))


def ensure_process_pool(client: SyncPrefectClient, name: str) -> bool:
    """Create work pool NAME (type process, Prefect's default job template) if missing; True if created."""
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.workers.process import ProcessWorker

    try:
        pool = client.read_work_pool(name)
    except ObjectNotFound:
        try:
            client.create_work_pool(
                WorkPoolCreate(name=name, type="process", base_job_template=ProcessWorker.get_default_base_job_template())
            )
        except ObjectAlreadyExists:
            return False
        return True
    if pool.type != "process":
        err.print(f"[yellow]note:[/] {escape(f'work pool {name!r} has type {pool.type!r}, not process')}", highlight=False)
    return False


def _prefect_command(*args: str) -> list[str]:
    """The ``prefect`` CLI of this interpreter's environment."""
    return [sys.executable, "-m", "prefect", *args]


def deploy(
    name: Optional[list[str]] = typer.Option(None, "--name", help="Deploy only these deployments of prefect.yaml (repeatable)."),
    directory: Optional[Path] = typer.Option(None, "--project-dir", help="Folder holding prefect.yaml (default: here, else this one)."),
) -> None:
    """Create prefect.yaml's work pools if missing, then `prefect --no-prompt deploy --all` from the project folder."""
    try:
        folder = project_dir(directory)
        pools = work_pools_of(folder / "prefect.yaml") or [DEFAULT_POOL]
        with _client() as client:
            for pool in pools:
                if ensure_process_pool(client, pool):
                    err.print(f"created work pool {pool!r} (type process)", highlight=False)
    except _UserError as error:
        _fail(str(error))
    selection = [argument for value in name for argument in ("--name", value)] if name else ["--all"]
    command = _prefect_command("--no-prompt", "deploy", *selection)
    err.print(f"$ (cd {folder} && prefect --no-prompt deploy {' '.join(selection)})", highlight=False, markup=False)
    # The prefect CLI's own output is progress: it goes to stderr, so stdout holds only the deployments made.
    sys.stderr.flush()
    result = subprocess.run(command, cwd=folder, stdout=sys.stderr, stderr=sys.stderr, env={**os.environ, "PWD": str(folder)})
    if result.returncode != 0:
        _fail(f"`prefect deploy` failed (exit code {result.returncode}); its output is above", code=result.returncode)
    try:
        lines = _deployed(folder / "prefect.yaml", name)
    except _UserError as error:
        _fail(str(error))
    for line in lines:
        print(line)
    err.print(f"start a worker to run them: prefect worker start --pool {pools[0]}", highlight=False)


def _deployed(prefect_yaml: Path, only: Optional[list[str]]) -> list[str]:
    """``flow/deployment<TAB>id`` for prefect.yaml's deployments, as the server now has them."""
    import yaml
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    config = yaml.safe_load(prefect_yaml.read_text()) or {}
    wanted = {
        (str(item["name"]), str(item.get("entrypoint")))
        for item in config.get("deployments") or []
        if item.get("name") and (not only or item["name"] in only)
    }
    lines = []
    with _client() as client:
        names = sorted({name for name, _ in wanted})
        for deployment in client.read_deployments(deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=names))):
            if (deployment.name, str(deployment.entrypoint)) in wanted:
                lines.append(f"{client.read_flow(deployment.flow_id).name}/{deployment.name}\t{deployment.id}")
    return sorted(lines)


def serve(
    cron: str = typer.Option(DEFAULT_CRON, help="Re-index schedule (cron); '' for none."),
    timezone: str = typer.Option("UTC", help="Time zone of the cron schedule."),
    source: str = typer.Option("data/sample/corpus", help="What the scheduled re-index indexes (made absolute here)."),
    name: str = typer.Option("default", "--name", help="Index name for both deployments."),
    contextualizer: str = typer.Option("structural", help="structural, none, claude, claude-summary."),
    embedder: str = typer.Option("local", help="local or voyage."),
    backend: str = typer.Option("embedded", help="embedded or elasticsearch."),
    evalset: str = typer.Option("data/sample/questions.jsonl", help="Evaluation set of the evaluate deployment."),
    limit: Optional[int] = typer.Option(None, min=1, help="Most flow runs this process runs at once."),
) -> None:
    """Serve ctxrag-index/reindex (scheduled) and ctxrag-evaluate/evaluate from this process: no work pool needed."""
    try:
        with _client() as client:
            _refuse_pool_deployments(client, ["ctxrag-index/reindex", "ctxrag-evaluate/evaluate"])
        paths = {"source": Path(source), "evalset": Path(evalset)}
        for option, path in paths.items():
            if not path.exists():
                raise _UserError(f"--{option} {path} not found (relative paths are read from {Path.cwd()})")
    except _UserError as error:
        _fail(str(error))
    from prefect import serve as prefect_serve
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.schedules import Cron

    from flows.evaluate import evaluate_index
    from flows.index import index_corpus

    try:
        schedules = [Cron(cron, timezone=timezone)] if cron.strip() else []
    except ValueError as error:
        _fail(f"--cron {cron!r}: {error}")
    reindex: RunnerDeployment = index_corpus.to_deployment(  # type: ignore[assignment]  # a sync call: no coroutine
        name="reindex",
        description="Scheduled re-index (served by `ctxrag serve`).",
        schedules=schedules,
        parameters={
            "source": str(paths["source"].resolve()), "name": name, "contextualizer": contextualizer,
            "embedder": embedder, "backend": backend,
        },
        tags=["ctxrag"],
        concurrency_limit=ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE),
    )
    evaluation: RunnerDeployment = evaluate_index.to_deployment(  # type: ignore[assignment]
        name="evaluate",
        description="Evaluate an index's search strategies (served by `ctxrag serve`).",
        parameters={"evalset": str(paths["evalset"].resolve()), "name": name},
        tags=["ctxrag"],
    )
    err.print(
        f"serving ctxrag-index/reindex ({'cron ' + repr(cron) + ' ' + timezone if schedules else 'no schedule'}) and "
        "ctxrag-evaluate/evaluate; trigger with `ctxrag trigger ctxrag-index/reindex --param name=...`; Ctrl-C stops",
        highlight=False,
    )
    prefect_serve(reindex, evaluation, limit=limit, print_starting_message=False)


def _refuse_pool_deployments(client: SyncPrefectClient, names: list[str]) -> None:
    """Serving a deployment that is also on a work pool would let a worker and this process both pick its runs."""
    from prefect.exceptions import ObjectNotFound

    for full_name in names:
        try:
            deployment = client.read_deployment_by_name(full_name)
        except ObjectNotFound:
            continue
        if deployment.work_pool_name:
            raise _UserError(
                f"deployment {full_name!r} is on work pool {deployment.work_pool_name!r} (from `ctxrag deploy`); serve it from "
                f"a worker (`prefect worker start --pool {deployment.work_pool_name}`), or delete it first "
                f"(`prefect deployment delete {full_name}`) to serve it from this process"
            )


def trigger(
    deployment: str = typer.Argument(..., help="FLOW/DEPLOYMENT, e.g. ctxrag-index/reindex (or a deployment id)."),
    param: Optional[list[str]] = typer.Option(None, "--param", "-p", help="KEY=VALUE (repeatable); JSON when it parses, else a string."),
    env: Optional[list[str]] = typer.Option(None, "--env", help="NAME=VALUE for this run's environment (job variable env; repeatable)."),
    watch: bool = typer.Option(False, "--watch/--no-watch", help="Wait for the run to end; exit 1 unless it completed."),
    timeout: float = typer.Option(3600.0, min=1, help="--watch: give up waiting after this many seconds (the run goes on)."),
    as_json: bool = typer.Option(False, "--json", help="Print the flow run as one JSON object."),
) -> None:
    """Start a run of DEPLOYMENT; prints its id and state (with --watch, the final state)."""
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    try:
        parameters = parse_params(param)
        job_variables = {"env": _parse_env(env)} if env else None
        if "/" not in deployment and not _is_uuid(deployment):
            raise _UserError(f"name the deployment as FLOW/DEPLOYMENT, e.g. ctxrag-index/reindex (got {deployment!r})")
        with _client() as client:
            _check_parameters(client, deployment, parameters)
            try:
                flow_run = cast(
                    "FlowRun",
                    run_deployment(deployment, parameters=parameters, timeout=0, as_subflow=False, job_variables=job_variables),
                )
            except ObjectNotFound:
                raise _UserError(
                    f"no deployment {deployment!r} on this server; `prefect deployment ls` lists them, `ctxrag deploy` creates them"
                ) from None
            except PrefectHTTPStatusError as error:
                raise _UserError(f"the server refused the run: {_detail(error)}") from None
            err.print(
                f"created flow run {flow_run.name!r} ({flow_run.id}) of {deployment}: {_ui_url(flow_run)}", highlight=False, markup=False
            )
            if watch:
                flow_run = _watch(client, flow_run, timeout)
    except _UserError as error:
        _fail(str(error))
    state = flow_run.state
    state_type = state.type.value if state else "UNKNOWN"
    if as_json:
        print(json.dumps({
            "id": str(flow_run.id), "name": flow_run.name, "deployment": deployment, "state": state_type,
            "state_name": state.name if state else None, "message": state.message if state else None,
            "parameters": flow_run.parameters, "url": _ui_url(flow_run),
        }))
    else:
        print(f"{flow_run.id}\t{state_type}")
    if watch and not (state and state.is_completed()):
        if state and state.message:
            err.print(f"flow run {flow_run.name!r} ended {state.name}: {state.message}", highlight=False, markup=False)
        raise typer.Exit(code=1)


def _check_parameters(client: SyncPrefectClient, deployment: str, parameters: dict[str, Any]) -> None:
    """Unknown parameter names fail here, with the known ones listed (the server would accept them, the run would not)."""
    from uuid import UUID

    from prefect.exceptions import ObjectNotFound

    try:
        found = client.read_deployment(UUID(deployment)) if _is_uuid(deployment) else client.read_deployment_by_name(deployment)
    except ObjectNotFound:
        raise _UserError(
            f"no deployment {deployment!r} on this server; `prefect deployment ls` lists them, `ctxrag deploy` creates them"
        ) from None
    known = set((found.parameter_openapi_schema or {}).get("properties", {}))
    unknown = sorted(set(parameters) - known)
    if known and unknown:
        raise _UserError(f"{deployment} has no parameter {', '.join(map(repr, unknown))}; its parameters: {', '.join(sorted(known))}")


def _watch(client: SyncPrefectClient, flow_run: FlowRun, timeout: float) -> FlowRun:
    """Poll the run until it ends (state changes on stderr) or TIMEOUT passes."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        flow_run = client.read_flow_run(flow_run.id)
        name = str(flow_run.state.name) if flow_run.state else "?"
        if name != last:
            err.print(f"  {time.strftime('%H:%M:%S')} {flow_run.name}: {name}", highlight=False, markup=False)
            last = name
        if flow_run.state and flow_run.state.is_final():
            return flow_run
        if time.monotonic() > deadline:
            err.print(f"still {name} after {timeout:.0f} s; not waiting longer (the run goes on)", highlight=False, markup=False)
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


def register(app: typer.Typer) -> None:
    """Add serve, deploy and trigger to the ``ctxrag`` command."""
    app.command("serve")(serve)
    app.command("deploy")(deploy)
    app.command("trigger")(trigger)
