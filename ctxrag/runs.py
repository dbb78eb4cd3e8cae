"""Runs of the index and evaluate flows, made the same way by ``ctxrag index``/``evaluate`` and by ``ctxrag.index``/
``ctxrag.evaluate``: the input is checked first (well under a second, before Prefect or a model is loaded), then the
flow runs against the local Prefect server (or the configured one). Errors are raised;
``ctxrag.errors.user_message`` says which are the user's to fix (the command shows those as one line, exit code 2).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ctxrag.errors import user_message
from ctxrag.storage.environment import ctxrag_home
from ctxrag.tasks.options import EvaluateOptions, IndexOptions
from ctxrag.tasks.stages.input_checks import check_index_input

if TYPE_CHECKING:
    from ctxrag.prefect_commands.server_mode import ServerMode


HEARTBEAT_DEFAULT = 180  # Prefect's PREFECT_FLOWS_HEARTBEAT_FREQUENCY when not set


class _NoTracebackForUserErrors(logging.Filter):
    """Prefect logs a failed task's traceback; for bad input the one-line message is the whole story."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and user_message(record.exc_info[1]) is not None:
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_tracebacks() -> None:
    """Configure Prefect's logging now (later runs only update it) and filter Prefect's handlers (the host program's
    own handlers on the root logger are left alone)."""
    from prefect.logging.configuration import setup_logging
    from prefect.logging.handlers import PrefectConsoleHandler

    setup_logging()
    loggers = [
        logger
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.startswith("prefect") and isinstance(logger, logging.Logger)
    ]
    handlers = {handler for logger in loggers for handler in logger.handlers}
    handlers |= {handler for handler in logging.getLogger().handlers if isinstance(handler, PrefectConsoleHandler)}
    for handler in handlers:
        if not any(isinstance(existing, _NoTracebackForUserErrors) for existing in handler.filters):
            handler.addFilter(_NoTracebackForUserErrors())


def run_flow(
    load_flow: Callable[[], Callable[..., Any]], *, server: ServerMode | None = None, **parameters: Any
) -> Any:
    """Run the flow ``load_flow`` imports against the configured Prefect server, else the local one ``server`` names
    (None: ``server_mode()``, the command's choice); its errors are raised. The import, and Prefect's logging set-up,
    happen while the local server starts."""
    with flow_session(load_flow, server=server) as run:
        return run(**parameters)


@contextmanager
def flow_session(
    load_flow: Callable[[], Callable[..., Any]], *, server: ServerMode | None = None
) -> Iterator[Callable[..., Any]]:
    """The flow ``load_flow`` imports, to be run (once, or many times: ``ctxrag index --watch``) within the block
    against the server ``run_flow`` uses; the server, Prefect's settings and logging are set up once for them all."""
    from ctxrag.prefect_commands.local_server import local_prefect_server

    loaded: list[Callable[..., Any]] = []

    def prepare() -> None:
        loaded.append(load_flow())
        quiet_tracebacks()

    with local_prefect_server(meanwhile=prepare, mode=server), heartbeats_as_configured():
        yield loaded[0]


@contextmanager
def heartbeats_as_configured() -> Iterator[None]:
    """Flow-run heartbeats only when the user set them. Prefect sends them by default (every 180 s) for an automation
    that marks a deployment's crashed runs; a run in the command's own process feeds none unless the user made one,
    and the heartbeat thread costs up to a second at the end of every run (it sleeps in steps of one second)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    if {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY"} & set(os.environ) or (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY.value() != HEARTBEAT_DEFAULT
    ):
        yield
        return
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def run_index(source: str, name: str, options: IndexOptions, server: ServerMode | None = None) -> dict[str, Any]:
    """Check, then run the index flow (``server``: as ``run_flow``); returns its report. A new index on the local
    model embeds every chunk, so the model is loaded while the server starts (the embed task reuses it when its tasks
    run in this process)."""
    check_index_input(source, name, options)
    return run_flow(index_flow(name, options), server=server, source=source, name=name, options=options)


def index_flow(name: str, options: IndexOptions) -> Callable[[], Callable[..., Any]]:
    """What imports the index flow with ``options``' task runner (for ``run_flow``/``flow_session``); for a new index
    on the local model, it also loads the model."""
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.common.providers import Provider

    new_local_index = (
        options.embedding.embedder == Provider.LOCAL and IndexStore(ctxrag_home()).live_version(name) is None
    )

    def load_flow() -> Callable[..., Any]:
        from prefect.task_runners import ThreadPoolTaskRunner

        from ctxrag.flows.index import index_corpus
        from ctxrag.tasks.runners import make_task_runner

        runner = make_task_runner(options.task_runner)
        if new_local_index and isinstance(runner, ThreadPoolTaskRunner):
            from ctxrag.tasks.embedding.embed import preload_local_model

            preload_local_model(options.embedding.spec())
        return index_corpus.with_options(task_runner=runner)

    return load_flow


def check_evaluate_input(evalset: str, name: str, options: EvaluateOptions, warn: Callable[[str], None]) -> None:
    """What ``evaluate`` can check before Prefect starts: the set (its warnings, e.g. skipped questions, go to
    ``warn``; the flow loads it again), the index and the strategies."""
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.evaluation.evalset import load_evalset
    from ctxrag.tasks.retrieval.search import StrategyConfig

    for warning in load_evalset(evalset).warnings:
        warn(warning)
    store = IndexStore(ctxrag_home())
    if store.live_version(name) is None:
        store.open(name)  # raises UnknownIndexError, naming the indexes there are
    for value in options.strategies() or []:
        StrategyConfig.from_str(value)
    if options.rerank not in {"", "none"}:
        from ctxrag.tasks.retrieval.rerank import RerankSpec

        RerankSpec.from_str(options.rerank, options.rerank_model)


def run_evaluate(
    evalset: str, name: str, options: EvaluateOptions, warn: Callable[[str], None], server: ServerMode | None = None
) -> dict[str, Any]:
    """Check, then run the evaluate flow (``server``: as ``run_flow``); returns its result (metrics, where the run's
    files went, ...)."""
    check_evaluate_input(evalset, name, options, warn)

    def load_flow() -> Callable[..., Any]:
        from ctxrag.flows.evaluate import evaluate_index

        return evaluate_index

    return run_flow(load_flow, server=server, evalset=evalset, name=name, options=options)
