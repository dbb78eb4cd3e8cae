"""A migrated, empty Prefect database kept once per machine and Prefect version, so a new server skips migrations.

A new SQLite database costs ~8 s of migrations on 2 cores. The template is made by migrating a fresh database in a
private temporary home that no server ever served (``prefect server database upgrade``), and it is checked to be
empty (no row in any table but ``alembic_version``: no flow or task runs, logs, artifacts, variables, block
documents, deployments, events) before it is saved and again before a database is seeded from it. A template that
fails the check is refused and deleted; the server then migrates its database itself. The folder is private to the
user (0700, files 0600).
"""

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

MIGRATION_SECONDS = 300.0
ALLOWED_ROWS = frozenset({"alembic_version"})  # the only table a migrated, never-served database has rows in


def template_path(prefect_version: str) -> Path:
    """Where this Prefect version's migrated, empty database is kept (one per machine)."""
    return cache_dir() / "prefect" / f"prefect-{prefect_version}.db"


def tables_with_rows(database: Path) -> list[str]:
    """The tables of ``database`` (SQLite) that hold at least one row, other than ``alembic_version``."""
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10)) as connection:
        names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if "alembic_version" not in names:
            return ["(no alembic_version: not a migrated Prefect database)"]
        return [name for name in names if name not in ALLOWED_ROWS
                and connection.execute(f'SELECT 1 FROM "{name}" LIMIT 1').fetchone() is not None]


def is_empty_template(database: Path) -> bool:
    """True when ``database`` is a migrated Prefect database with no data in it."""
    try:
        return database.is_file() and not tables_with_rows(database)
    except sqlite3.Error:
        return False


def _private_dir(folder: Path) -> None:
    """Create ``folder`` (and the cache folder above it) readable by the user only."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in {cache_dir(), folder}:
        if path.is_dir():
            os.chmod(path, 0o700)


def make_template(template: Path, environment: dict[str, str]) -> bool:
    """Migrate a fresh database in a private temporary home and save it as ``template`` if it is empty.

    ``environment`` is the (minimal) environment of the migration process. Returns True when a template was saved."""
    _private_dir(template.parent)
    with tempfile.TemporaryDirectory(prefix="ctxrag-prefect-template-", dir=template.parent) as scratch:
        database = Path(scratch) / "prefect.db"
        env = {**environment, "PREFECT_HOME": scratch,
               "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{database}"}
        try:
            result = subprocess.run(
                [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], env=env, cwd=scratch,
                stdin=subprocess.DEVNULL, capture_output=True, timeout=MIGRATION_SECONDS, check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        if result.returncode != 0 or not is_empty_template(database):
            return False
        with closing(sqlite3.connect(database)) as connection:
            connection.execute("PRAGMA journal_mode=DELETE")  # one self-contained file to copy
        partial = template.with_name(f"{template.name}.{os.getpid()}.partial")
        shutil.copyfile(database, partial)
        os.chmod(partial, 0o600)
        os.replace(partial, template)
        return True


def seed_database(database: Path | None, template: Path) -> bool:
    """Copy the template to ``database`` when the database does not exist yet and the template is still empty.

    True if copied. A template that is not empty is deleted (never copied); any failure leaves the database to
    Prefect's own migrations."""
    if database is None or database.exists() or not template.is_file():
        return False
    if not is_empty_template(template):
        template.unlink(missing_ok=True)
        return False
    partial = database.with_name(f"{database.name}.{os.getpid()}.partial")
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, partial)
        os.chmod(partial, 0o600)
        os.replace(partial, database)
        return True
    except OSError:
        partial.unlink(missing_ok=True)
        return False


def prepare_database(database: Path | None, prefect_version: str, environment: dict[str, str]) -> bool:
    """Seed a server's new SQLite ``database`` from this version's template, making the template first if needed."""
    if database is None or database.exists():
        return False
    template = template_path(prefect_version)
    if not template.is_file() and not make_template(template, environment):
        return False
    return seed_database(database, template)
