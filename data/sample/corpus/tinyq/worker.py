"""Workers take tasks off a queue and run their handlers."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from tinyq.queue import Task, TaskQueue, handler_for
from tinyq.retry import RetryPolicy

log = logging.getLogger("tinyq.worker")


@dataclass
class DeadLetter:
    """A task that failed for good, with the last error it raised."""

    task: Task
    error: str


@dataclass
class WorkerStats:
    """Counters a worker keeps while it runs."""

    succeeded: int = 0
    retried: int = 0
    failed: int = 0
    dead_letters: list[DeadLetter] = field(default_factory=list)


class Worker:
    """Runs tasks from one queue, one at a time, applying a retry policy on failure."""

    def __init__(self, queue: TaskQueue, policy: RetryPolicy | None = None, name: str = "worker") -> None:
        self.queue = queue
        self.policy = policy or RetryPolicy()
        self.name = name
        self.stats = WorkerStats()
        self._stop = threading.Event()

    def run_once(self, timeout: float = 1.0) -> bool:
        """Run at most one task; False when no task arrived within ``timeout`` seconds."""
        item = self.queue.pop(timeout=timeout)
        if item is None:
            return False
        item.attempts += 1
        try:
            handler_for(item.name)(**item.payload)
        except Exception as error:  # noqa: BLE001 - a task may raise anything
            self._failed(item, error)
        else:
            self.stats.succeeded += 1
        return True

    def _failed(self, item: Task, error: Exception) -> None:
        if self.policy.should_retry(error, item.attempts):
            delay = self.policy.delay_for(item.attempts)
            log.warning("%s: task %s failed (%s); retry in %.1fs", self.name, item.task_id, error, delay)
            self.stats.retried += 1
            self.queue.requeue(item, delay)
            return
        log.error("%s: task %s failed for good: %s", self.name, item.task_id, error)
        self.stats.failed += 1
        self.stats.dead_letters.append(DeadLetter(item, repr(error)))

    def run_forever(self) -> None:
        """Run tasks until ``stop`` is called; the task in progress always finishes first."""
        while not self._stop.is_set():
            self.run_once(timeout=0.2)

    def stop(self) -> None:
        """Ask the worker to stop after its current task."""
        self._stop.set()


class WorkerPool:
    """Several workers sharing one queue, each on its own thread."""

    def __init__(self, queue: TaskQueue, size: int = 4, policy: RetryPolicy | None = None) -> None:
        self.workers = [Worker(queue, policy, name=f"worker-{n}") for n in range(size)]
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start every worker on a daemon thread."""
        for worker in self.workers:
            thread = threading.Thread(target=worker.run_forever, name=worker.name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def shutdown(self, timeout: float = 30.0) -> dict[str, Any]:
        """Stop all workers, wait up to ``timeout`` seconds for them, and return merged stats."""
        for worker in self.workers:
            worker.stop()
        for thread in self._threads:
            thread.join(timeout)
        return {
            "succeeded": sum(w.stats.succeeded for w in self.workers),
            "retried": sum(w.stats.retried for w in self.workers),
            "failed": sum(w.stats.failed for w in self.workers),
        }
