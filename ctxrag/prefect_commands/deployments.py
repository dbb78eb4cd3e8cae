"""prefect.yaml, the one definition of ctxrag's deployments: read here for ``ctxrag deploy`` and ``ctxrag serve``.

``prefect deploy`` reads the same file for the work pool; ``serve`` turns each entry into a runner deployment with
the entry's name, entrypoint, description, tags, parameters, schedules and concurrency limit (work pool, build and
pull steps are for workers only).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxrag.prefect_commands.errors import CommandError

if TYPE_CHECKING:
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.flows import Flow
    from prefect.schedules import Schedule

PROJECT_DIR = Path(__file__).resolve().parents[2]


@dataclass
class Deployment:
    """One entry of prefect.yaml's ``deployments``, as written there (YAML aliases and ``<<`` merges resolved)."""

    name: str
    entrypoint: str | None = None
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    schedules: list[dict[str, Any]] = field(default_factory=list)
    concurrency_limit: int | dict[str, Any] | None = None
    work_pool: str | None = None

    def prefect_schedules(self) -> list[Schedule]:
        """The entry's schedules as Prefect schedules (cron, interval or rrule, with their other fields)."""
        from prefect.schedules import Schedule

        known = {item.name for item in dataclasses.fields(Schedule)}
        schedules = []
        for config in self.schedules:
            values = {key: value for key, value in config.items() if value is not None}
            if unknown := sorted(set(values) - known):
                raise CommandError(
                    f"prefect.yaml: deployment {self.name!r}: schedule field {', '.join(unknown)} is not supported here"
                )
            if isinstance(values.get("interval"), (int, float)):
                values["interval"] = timedelta(seconds=values["interval"])
            try:
                schedules.append(Schedule(**values))
            except (TypeError, ValueError) as error:
                raise CommandError(f"prefect.yaml: deployment {self.name!r}: schedule {config}: {error}") from None
        return schedules

    def prefect_concurrency_limit(self) -> int | ConcurrencyLimitConfig | None:
        """``concurrency_limit: N`` or ``{limit, collision_strategy, grace_period_seconds}``, as Prefect takes it."""
        from prefect.client.schemas.objects import ConcurrencyLimitConfig

        if not isinstance(self.concurrency_limit, dict):
            return self.concurrency_limit
        return ConcurrencyLimitConfig.model_validate(self.concurrency_limit)

    def load_flow(self, folder: Path) -> Flow[Any, Any]:
        """The flow of the entrypoint ``FILE.py:FUNCTION``, imported as a module (FILE relative to FOLDER; ctxrag's
        own flows by their ``ctxrag.flows`` name, so the flow is the one the rest of ctxrag imports)."""
        from prefect.exceptions import MissingFlowError
        from prefect.flows import load_flow_from_entrypoint

        path, _, function = (self.entrypoint or "").rpartition(":")
        file = Path(path)
        if (
            not function
            or file.suffix != ".py"
            or file.is_absolute()
            or ".." in file.parts
            or not (folder / file).is_file()
        ):
            raise CommandError(
                f"prefect.yaml: deployment {self.name!r} has entrypoint {self.entrypoint!r}; "
                f"expected FILE.py:FLOW with FILE a module in {folder}"
            )
        try:
            return load_flow_from_entrypoint(f"{module_name(folder, file)}:{function}", use_placeholder_flow=False)
        except MissingFlowError as error:
            raise CommandError(f"prefect.yaml: deployment {self.name!r}: {error}") from None


def module_name(folder: Path, file: Path) -> str:
    """The module FILE (relative to FOLDER) imports as: a file of ctxrag's (``flows/index.py`` in a checkout, or in
    the installed package) by its ctxrag name, ``ctxrag.flows.index``; any other by its dotted path."""
    import ctxrag.flows
    import ctxrag.storage
    import ctxrag.tasks

    resolved = (folder / file).resolve()
    for package in (ctxrag.flows, ctxrag.tasks, ctxrag.storage, ctxrag):
        base = Path(package.__path__[0]).resolve()
        if resolved.is_relative_to(base):
            return ".".join([package.__name__, *resolved.relative_to(base).with_suffix("").parts])
    return ".".join(file.with_suffix("").parts)


def project_dir(given: Path | None = None) -> Path:
    """The folder holding prefect.yaml: the one given, else the current folder, else this checkout."""
    candidates = [given] if given else [Path.cwd(), PROJECT_DIR]
    for candidate in candidates:
        if candidate is not None and (candidate / "prefect.yaml").is_file():
            return candidate.resolve()
    where = given or Path.cwd()
    raise CommandError(f"no prefect.yaml in {where}; run from the ctxrag folder or pass --project-dir")


def read_deployments(prefect_yaml: Path) -> list[Deployment]:
    """prefect.yaml's deployments, in file order (entries without a name are skipped, as ``prefect deploy`` can't use them)."""
    import yaml

    try:
        config = yaml.safe_load(prefect_yaml.read_text()) or {}
    except yaml.YAMLError as error:
        raise CommandError(f"{prefect_yaml} is not valid YAML: {error}") from None
    deployments = []
    for item in config.get("deployments") or []:
        if not isinstance(item, dict) or not item.get("name"):
            continue
        pool = item.get("work_pool")
        deployments.append(
            Deployment(
                name=str(item["name"]),
                entrypoint=item.get("entrypoint"),
                description=item.get("description"),
                tags=list(item.get("tags") or []),
                parameters=dict(item.get("parameters") or {}),
                schedules=list(item.get("schedules") or []),
                concurrency_limit=item.get("concurrency_limit"),
                work_pool=str(pool["name"]) if isinstance(pool, dict) and pool.get("name") else None,
            )
        )
    return deployments


def work_pools_of(prefect_yaml: Path) -> list[str]:
    """The work pool names prefect.yaml's deployments use (aliases resolved)."""
    return list(dict.fromkeys(item.work_pool for item in read_deployments(prefect_yaml) if item.work_pool))
