"""The in-memory priority queue at the heart of tinyq.

Tasks are ordered by priority first (lower numbers run sooner) and by insertion
order second, so two tasks with the same priority run first-in, first-out.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

DEFAULT_PRIORITY = 50
HIGHEST_PRIORITY = 0
LOWEST_PRIORITY = 100

_registry: dict[str, Callable[..., Any]] = {}


class QueueFull(Exception):
    """Raised by ``TaskQueue.push`` when the queue already holds ``maxsize`` tasks."""


class UnknownTask(KeyError):
    """Raised when a task name was never registered with ``@task``."""


def task(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a function as a task handler under ``name`` (default: the function's name)."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        _registry[name or func.__name__] = func
        return func

    return register


def handler_for(name: str) -> Callable[..., Any]:
    """Look up the function registered for a task name."""
    try:
        return _registry[name]
    except KeyError:
        raise UnknownTask(name) from None


@dataclass(order=True)
class Task:
    """One unit of work waiting in the queue."""

    priority: int
    sequence: int
    name: str = field(compare=False)
    payload: dict[str, Any] = field(compare=False, default_factory=dict)
    task_id: str = field(compare=False, default_factory=lambda: uuid.uuid4().hex)
    attempts: int = field(compare=False, default=0)
    not_before: float = field(compare=False, default=0.0)


class TaskQueue:
    """A thread-safe priority queue of tasks with an optional size limit."""

    def __init__(self, maxsize: int = 0) -> None:
        self.maxsize = maxsize
        self._heap: list[Task] = []
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)

    def push(self, name: str, payload: dict[str, Any] | None = None, priority: int = DEFAULT_PRIORITY) -> Task:
        """Add a task; priorities are clamped to the range 0..100."""
        priority = min(max(priority, HIGHEST_PRIORITY), LOWEST_PRIORITY)
        with self._lock:
            if self.maxsize and len(self._heap) >= self.maxsize:
                raise QueueFull(f"queue holds {self.maxsize} tasks already")
            item = Task(priority, next(self._counter), name, payload or {})
            heapq.heappush(self._heap, item)
            self._not_empty.notify()
        return item

    def requeue(self, item: Task, delay: float) -> None:
        """Put a task back after a failure; it will not run for ``delay`` seconds."""
        item.not_before = time.monotonic() + delay
        with self._lock:
            heapq.heappush(self._heap, item)
            self._not_empty.notify()

    def pop(self, timeout: float | None = None) -> Task | None:
        """Take the most urgent task that is due, waiting up to ``timeout`` seconds; None if nothing came."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._not_empty:
            while True:
                now = time.monotonic()
                due = [t for t in self._heap if t.not_before <= now]
                if due:
                    best = min(due)
                    self._heap.remove(best)
                    heapq.heapify(self._heap)
                    return best
                if deadline is not None and now >= deadline:
                    return None
                wait = 0.05 if deadline is None else min(0.05, deadline - now)
                self._not_empty.wait(wait)

    def __len__(self) -> int:
        with self._lock:
            return len(self._heap)
