"""Progress of long stages: a bar on stderr (stdout carries results) and, inside a Prefect run, a progress
artifact that the Prefect UI shows while the stage runs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ctxrag.tasks.common.display import console

_stderr = console(stderr=True)
ARTIFACT_STEP = 5.0  # percent between two updates of the Prefect artifact


@contextmanager
def stage_progress(description: str, unit: str = "items", stored: int = 0) -> Iterator[Callable[[int, int], None]]:
    """Yield ``update(done, total)``, counting ``unit`` (e.g. "chunks"); draws a bar on stderr while the stage runs
    (nothing when stderr is not a terminal) and keeps a Prefect progress artifact up to date when running inside a
    flow. ``stored``: how many were done by earlier runs (the card of an empty stage says so)."""
    artifact = _PrefectProgress(description, unit, stored)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_stderr,
        transient=True,
        disable=not _stderr.is_terminal,
    ) as progress:
        task_id = progress.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task_id, completed=done, total=total)
            artifact.update(done, total)

        yield update
    artifact.finish()


def progress_text(description: str, done: int, total: int, unit: str = "items", stored: int = 0) -> str:
    """The card's description: what runs, how far in what it counts, and the percentage (the UI's card shows only
    the bar); a stage with nothing to do says so, and why when earlier runs did it (``stored``)."""
    if not total:
        return f"ctxrag: {description}: nothing to do" + (
            f" (all {stored:,} {unit} stored)" if stored else f" (no {unit})"
        )
    return f"ctxrag: {description}: {done:,} of {total:,} {unit} ({100.0 * done / total:.0f}%)"


class _PrefectProgress:
    """A progress artifact, created on the first update; silently absent outside a Prefect run."""

    def __init__(self, description: str, unit: str, stored: int) -> None:
        self.description, self.unit, self.stored = description, unit, stored
        self.artifact_id: Any = None  # the artifact's UUID once created
        self.shown = -ARTIFACT_STEP
        self.last = (0, 0)

    def finish(self) -> None:
        _, total = self.last
        self.update(total, total)

    def text(self, done: int, total: int) -> str:
        return progress_text(self.description, done, total, self.unit, self.stored)

    def update(self, done: int, total: int) -> None:
        self.last = (done, total)
        percent = 100.0 * done / total if total else 100.0
        if percent - self.shown < ARTIFACT_STEP and percent < 100.0:
            return
        try:
            from prefect.artifacts import create_progress_artifact, update_progress_artifact
            from prefect.context import FlowRunContext, TaskRunContext

            if TaskRunContext.get() is None and FlowRunContext.get() is None:
                return
            if self.artifact_id is None:
                self.artifact_id = create_progress_artifact(progress=percent, description=self.text(done, total))
            elif percent > self.shown:
                update_progress_artifact(self.artifact_id, progress=percent, description=self.text(done, total))
            self.shown = percent
        except Exception as error:
            logging.getLogger(__name__).debug("progress artifact not updated: %s", error)
