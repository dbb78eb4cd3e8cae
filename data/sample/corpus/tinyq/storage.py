"""Persistence: keep pending tasks in SQLite so a restart does not lose them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tinyq.queue import Task

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id    TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    priority   INTEGER NOT NULL,
    sequence   INTEGER NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    state      TEXT NOT NULL DEFAULT 'pending'
)
"""


class SqliteStore:
    """Pending and finished tasks in one SQLite file.

    The store uses write-ahead logging, so a reader never blocks the worker
    that records results. Call ``vacuum`` now and then to drop finished rows.
    """

    def __init__(self, path: str | Path = "tinyq.db") -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(SCHEMA)

    def save(self, item: Task) -> None:
        """Insert or update a task as pending."""
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?, 'pending')",
                (item.task_id, item.name, json.dumps(item.payload), item.priority, item.sequence, item.attempts),
            )

    def mark_done(self, task_id: str, state: str = "done") -> None:
        """Record that a task finished; ``state`` is "done" or "dead"."""
        if state not in ("done", "dead"):
            raise ValueError(f"unknown state {state!r}")
        with self._db:
            self._db.execute("UPDATE tasks SET state = ? WHERE task_id = ?", (state, task_id))

    def pending(self) -> list[Task]:
        """Every task not yet finished, most urgent first, ready to push back into a queue."""
        rows = self._db.execute(
            "SELECT priority, sequence, name, payload, task_id, attempts FROM tasks "
            "WHERE state = 'pending' ORDER BY priority, sequence"
        )
        return [Task(p, s, n, json.loads(body), tid, a) for p, s, n, body, tid, a in rows]

    def vacuum(self) -> int:
        """Delete finished rows and return how many went."""
        with self._db:
            cursor = self._db.execute("DELETE FROM tasks WHERE state != 'pending'")
        self._db.execute("VACUUM")
        return cursor.rowcount

    def close(self) -> None:
        """Close the database file."""
        self._db.close()


class MemoryStore:
    """A store that keeps nothing across restarts; the default, and handy in tests."""

    def __init__(self) -> None:
        self._tasks: dict[str, tuple[Task, str]] = {}

    def save(self, item: Task) -> None:
        self._tasks[item.task_id] = (item, "pending")

    def mark_done(self, task_id: str, state: str = "done") -> None:
        item, _ = self._tasks[task_id]
        self._tasks[task_id] = (item, state)

    def pending(self) -> list[Task]:
        return sorted(item for item, state in self._tasks.values() if state == "pending")
