"""The input checks every index run gets before any work: ``ctxrag index`` runs them before Prefect starts, and a
deployment's run (``ctxrag serve``, a worker) runs them first thing, since its parameters come from the server, not
from this user's command line.

A deployment run also reads and writes only where it was served for: ``CTXRAG_ALLOWED_SOURCES`` (folders, separated
by ``os.pathsep``; ``ctxrag serve`` sets it from its deployments' parameters and ``--allow-source``, a worker's user
may set it) lists the folders a run's ``source``, ``evalset``, ``options.gate.evalset`` and ``home`` may name (``home``
may also be the run's own ``CTXRAG_HOME``). A path outside them, symbolic links and ``..`` resolved, is refused.
"""

from __future__ import annotations

from pathlib import Path

from ctxrag.storage.environment import ctxrag_home
from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.settings import Settings, settings
from ctxrag.tasks.options import IndexOptions

ALLOWED_VARIABLE = "CTXRAG_ALLOWED_SOURCES"


def check_index_input(source: str, name: str, options: IndexOptions) -> None:
    """What ``index`` can check without Prefect: the name, the choices, the ``--include``/``--exclude`` patterns, and
    the source (a JSON corpus is read and validated in full, which takes well under a second; a folder must exist).
    The cheap checks come first: a mistyped name or path is refused before the loaders are imported."""
    from ctxrag.storage.names import validate_name
    from ctxrag.tasks.common.models import CorpusError

    validate_name(name)
    if not Path(source).exists():
        raise CorpusError(f"{source}: no such file or directory")  # as the loader says it
    from ctxrag.storage.backends import backend_for
    from ctxrag.tasks.common.memory import release_freed_memory
    from ctxrag.tasks.context.offline import ContextualizerKind
    from ctxrag.tasks.load import load_source
    from ctxrag.tasks.load.directory import filter_spec

    options.embedding.spec()
    backend_for(options.backend)
    ContextualizerKind.from_str(options.contextualizer)
    filter_spec(
        options.files.include, "--include"
    )  # a pattern pathspec cannot compile is named here, not after Prefect started
    filter_spec(options.files.exclude, "--exclude")
    if not Path(source).is_dir():
        load_source(source)  # reads a JSON corpus in full; for a missing path, names what is missing, as the flow would
        release_freed_memory()  # that corpus's pages go back to the OS before the flow reads it again


def allowed_folders(environment: dict[str, str] | None = None) -> list[Path] | None:
    """The folders ``CTXRAG_ALLOWED_SOURCES`` lists, resolved (None: the variable is not set, nothing is limited)."""
    chosen = settings() if environment is None else Settings.from_environment(environment)
    return None if chosen.allowed_sources is None else list(chosen.allowed_sources)


def check_allowed(paths: dict[str, str | None], folders: list[Path], home: str | None = None) -> None:
    """Refuse a path of ``paths`` (parameter -> value; None: not given) outside ``folders``, and a ``home`` that is
    neither the run's own ctxrag home nor inside them, naming the parameter, the path and the folders."""

    def inside(path: Path) -> bool:
        return any(path == folder or path.is_relative_to(folder) for folder in folders)

    listed = ", ".join(map(str, folders)) or "(none)"
    widen = f"`ctxrag serve --allow-source DIR` (a worker: {ALLOWED_VARIABLE} in its environment) adds one"
    for parameter, value in paths.items():
        if value is not None and not inside(resolved := Path(value).expanduser().resolve()):
            raise InvalidInput(
                f"deployment parameter {parameter}={value!r} ({resolved}) is outside the folders this "
                f"deployment was served for ({listed}); {widen}"
            )
    if home is not None and (resolved := Path(home).expanduser().resolve()) != ctxrag_home() and not inside(resolved):
        raise InvalidInput(
            f"deployment parameter home={home!r} ({resolved}) is neither this deployment's CTXRAG_HOME "
            f"({ctxrag_home()}) nor inside the folders it was served for ({listed}); {widen}"
        )


def in_deployment_run() -> bool:
    """Whether this flow run is a deployment's (its parameters came from the server), not a command's own."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    return bool(context and context.flow_run and context.flow_run.deployment_id)


def check_deployment_run(paths: dict[str, str | None], home: str | None) -> None:
    """In a deployment's run with ``CTXRAG_ALLOWED_SOURCES`` set: ``check_allowed``; elsewhere nothing."""
    if in_deployment_run() and (folders := allowed_folders()) is not None:
        check_allowed(paths, folders, home)
