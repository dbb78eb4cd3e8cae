"""Progress bars for long stages, on stderr (stdout carries results)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

_stderr = Console(stderr=True)


@contextmanager
def stage_progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """Yield ``update(done, total)``; draws a bar on stderr while the stage runs (nothing when stderr is not a terminal)."""
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=_stderr, transient=True, disable=not _stderr.is_terminal,
    ) as progress:
        task_id = progress.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task_id, completed=done, total=total)

        yield update
