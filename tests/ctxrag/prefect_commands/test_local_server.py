"""The local Prefect server that ``index`` and ``evaluate`` start once and reuse (ctxrag.prefect_commands.local_server)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import urllib.request
from contextlib import closing
from pathlib import Path

import pytest

from ctxrag.prefect_commands import local_server
from ctxrag.prefect_commands.local_server import STATE_FILE, LocalServer, local_prefect_server, running_server, stop_server
from storage.errors import UserError
from tests.helpers import SAMPLE_CORPUS


def _ctxrag(home: Path, prefect_home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a new user runs it: no PREFECT_API_URL, no profile, the default server mode."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_") and name != local_server.MODE_VARIABLE}
    env.update({"CTXRAG_HOME": str(home), "PREFECT_HOME": str(prefect_home), "COLUMNS": "200"})
    command = [sys.executable, "-c", "from ctxrag.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def test_the_first_command_starts_a_server_the_next_reuses_and_stop_ends_it(tmp_path: Path) -> None:
    home, prefect_home = tmp_path / "home", tmp_path / "prefect"
    try:
        first = _ctxrag(home, prefect_home, "index", str(SAMPLE_CORPUS), "--name", "sample")
        assert first.returncode == 0, first.stderr
        assert "started a local Prefect server at http://127.0.0.1:" in first.stderr
        started = LocalServer(**json.loads((prefect_home / STATE_FILE).read_text()))

        second = _ctxrag(home, prefect_home, "index", str(SAMPLE_CORPUS), "--name", "sample")
        assert second.returncode == 0, second.stderr
        assert "started a local Prefect server" not in second.stderr
        assert LocalServer(**json.loads((prefect_home / STATE_FILE).read_text())) == started

        # both runs are recorded on that server
        with urllib.request.urlopen(
            urllib.request.Request(f"{started.api_url}/flow_runs/count", data=b"{}", method="POST",
                                                headers={"Content-Type": "application/json"}), timeout=10
        ) as response:
            assert json.loads(response.read()) == 2

        status = _ctxrag(home, prefect_home, "server", "status")
        assert status.returncode == 0 and f"pid {started.pid}" in status.stdout

        stopped = _ctxrag(home, prefect_home, "server", "stop")
        assert stopped.returncode == 0 and "stopped the server" in stopped.stdout
        assert not local_server._alive(started.pid)
        assert _ctxrag(home, prefect_home, "server", "status").returncode == 1

        # the first server kept its migrated database; a server in a new PREFECT_HOME starts from that copy
        template = Path(os.environ["CTXRAG_CACHE_DIR"]) / "prefect" / f"prefect-{local_server._prefect_version()}.db"
        assert _alembic_version(template) == _alembic_version(prefect_home / "prefect.db")
        with closing(sqlite3.connect(template)) as connection:  # a mark that only a copy of the template can carry
            connection.execute("CREATE TABLE ctxrag_test_mark (seeded INTEGER)")
        other_home, other_prefect = tmp_path / "other", tmp_path / "other-prefect"
        third = _ctxrag(other_home, other_prefect, "index", str(SAMPLE_CORPUS), "--name", "sample")
        assert third.returncode == 0, third.stderr
        with closing(sqlite3.connect(other_prefect / "prefect.db")) as connection:
            assert connection.execute("SELECT count(*) FROM sqlite_master WHERE name = 'ctxrag_test_mark'").fetchone() == (1,)
        assert _alembic_version(other_prefect / "prefect.db") == _alembic_version(template)
    finally:
        stop_server(prefect_home)
        stop_server(tmp_path / "other-prefect")


def _alembic_version(database: Path) -> str:
    with closing(sqlite3.connect(database)) as connection:
        return connection.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def test_a_new_database_is_seeded_from_the_template_and_an_existing_one_is_left_alone(tmp_path: Path) -> None:
    source = tmp_path / "migrated.db"
    with closing(sqlite3.connect(source)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")  # as the server's database
        connection.execute("CREATE TABLE alembic_version (version_num TEXT)")
        connection.execute("INSERT INTO alembic_version VALUES ('head')")
        connection.commit()
    template = tmp_path / "cache" / "prefect-x.db"
    local_server.keep_template(source, template)
    assert _alembic_version(template) == "head"
    with closing(sqlite3.connect(template)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # a single file to copy

    fresh = tmp_path / "home" / "prefect.db"
    assert local_server.seed_database(fresh, template) and _alembic_version(fresh) == "head"
    fresh.write_bytes(b"the user's own database")
    assert not local_server.seed_database(fresh, template)
    assert fresh.read_bytes() == b"the user's own database"
    assert not local_server.seed_database(None, template)  # not SQLite: Prefect migrates it itself
    assert not local_server.seed_database(tmp_path / "new.db", tmp_path / "no-template.db")
    assert sorted(path.name for path in template.parent.iterdir()) == ["prefect-x.db"]  # no partial file left


def test_a_dead_servers_state_is_not_reused(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / STATE_FILE).write_text(json.dumps({"pid": dead.pid, "api_url": "http://127.0.0.1:9/api", "prefect_version": "x"}))
    assert running_server(tmp_path) is None


def test_a_live_process_that_does_not_answer_is_not_reused(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text(json.dumps({"pid": os.getpid(), "api_url": "http://127.0.0.1:9/api", "prefect_version": "x"}))
    assert running_server(tmp_path) is None


def test_a_configured_server_wins_and_nothing_is_started(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setenv(local_server.MODE_VARIABLE, "background")
    monkeypatch.setattr(local_server, "reuse_or_start", lambda home: pytest.fail("started a server"))
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        with local_prefect_server() as server:
            assert server is None


def test_temporary_mode_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setenv(local_server.MODE_VARIABLE, "temporary")
    monkeypatch.setattr(local_server, "reuse_or_start", lambda home: pytest.fail("started a server"))
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        with local_prefect_server() as server:
            assert server is None


def test_an_unknown_mode_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(local_server.MODE_VARIABLE, "forever")
    with pytest.raises(UserError, match="CTXRAG_PREFECT_SERVER='forever'"):
        local_server.server_mode()


def test_stop_never_signals_a_process_that_is_not_a_prefect_server(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        (tmp_path / STATE_FILE).write_text(json.dumps({"pid": bystander.pid, "api_url": "http://127.0.0.1:9/api", "prefect_version": "x"}))
        stop_server(tmp_path)
        assert bystander.poll() is None  # the recorded pid was reused by another program: left alone
        assert not (tmp_path / STATE_FILE).exists()
    finally:
        bystander.kill()
        bystander.wait()
