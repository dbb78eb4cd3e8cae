"""A migrated, empty Prefect database kept once per machine and Prefect version: a new server's database is copied
from it instead of spending ~8 s on migrations. It is migrated in a private scratch home that no server served, and
checked to hold no row outside ``alembic_version`` (no runs, logs, blocks, variables...) before it is saved and
before each copy; a template that fails the check is deleted and Prefect migrates the database itself."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

from ctxrag.storage.environment import cache_dir


def template_path(prefect_version: str) -> Path:
    return cache_dir() / "prefect" / f"prefect-{prefect_version}.db"


def tables_with_rows(database: Path) -> list[str]:
    """The tables of the SQLite ``database`` that hold a row, ``alembic_version`` aside."""
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10)) as connection:
        names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if "alembic_version" not in names:
            return ["(no alembic_version: not a migrated Prefect database)"]
        return [
            name
            for name in names
            if name != "alembic_version"
            and connection.execute(f'SELECT 1 FROM "{name}" LIMIT 1').fetchone() is not None
        ]


def _empty(database: Path) -> bool:
    try:
        return database.is_file() and not tables_with_rows(database)
    except sqlite3.Error:
        return False


def _copy_private(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` (mode 0600) through a partial file, so a reader never sees half a database."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        shutil.copyfile(source, partial)
        os.chmod(partial, 0o600)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def make_template(template: Path, environment: dict[str, str]) -> bool:
    """Migrate a fresh database in a scratch home (``environment`` is the migration's) and keep it as ``template``
    (its folder private to the user) if it is empty. True when saved."""
    template.parent.mkdir(parents=True, exist_ok=True)
    for folder in {cache_dir(), template.parent}:
        os.chmod(folder, 0o700)
    with tempfile.TemporaryDirectory(prefix="ctxrag-prefect-template-", dir=template.parent) as scratch:
        database = Path(scratch) / "prefect.db"
        env = {
            **environment,
            "PREFECT_HOME": scratch,
            "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{database}",
        }
        try:
            migrated = (
                subprocess.run(
                    [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
                    env=env,
                    cwd=scratch,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=300,
                ).returncode
                == 0
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        if not (migrated and _empty(database)):
            return False
        with closing(sqlite3.connect(database)) as connection:
            connection.execute("PRAGMA journal_mode=DELETE")  # one self-contained file to copy
        _copy_private(database, template)
        return True


def seed_database(database: Path | None, template: Path) -> bool:
    """Copy an empty ``template`` to a ``database`` that does not exist yet (None: not SQLite); a template holding
    data is deleted, never copied. True if copied; on any failure Prefect migrates the database itself."""
    if database is None or database.exists() or not template.is_file():
        return False
    if not _empty(template):
        template.unlink(missing_ok=True)
        return False
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
        _copy_private(template, database)
    except OSError:
        return False
    return True


def prepare_database(database: Path | None, prefect_version: str, environment: dict[str, str]) -> bool:
    """Seed a server's new SQLite ``database`` from this Prefect version's template, made first if needed."""
    if database is None or database.exists():
        return False
    template = template_path(prefect_version)
    return (template.is_file() or make_template(template, environment)) and seed_database(database, template)
