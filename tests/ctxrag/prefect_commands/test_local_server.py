"""The local Prefect server every ctxrag command starts once and reuses (ctxrag.prefect_commands.local_server)."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from ctxrag.prefect_commands import local_server, server_template
from ctxrag.prefect_commands.local_server import (
    PID_FILE,
    LocalServer,
    ServerError,
    ensure_server,
    find_server,
    local_prefect_server,
    stop_server,
)
from ctxrag.storage.errors import UserError
from tests.equipment.local_server import (
    ctxrag_as_user,
    fake_server,
    home_auth,
    post_as_owner,
    recorded_server,
    stopped_afterwards,
    wait_for,
)
from tests.helpers import REPO, SAMPLE_CORPUS


@pytest.mark.server
def test_one_server_for_every_home_with_the_whole_run_and_prefects_own_stop(tmp_path: Path) -> None:
    prefect_home = tmp_path / "prefect"
    first_home, second_home = tmp_path / "project-a", tmp_path / "project-b"
    with stopped_afterwards(prefect_home):
        first = ctxrag_as_user(
            first_home,
            prefect_home,
            "index",
            str(SAMPLE_CORPUS),
            "--name",
            "sample",
            ANTHROPIC_API_KEY="sk-ant-must-not-reach-the-daemon",
        )
        assert first.returncode == 0, first.stderr
        told = [line for line in first.stderr.splitlines() if "started a local Prefect server" in line]
        assert len(told) == 1 and "UI at http://127.0.0.1:" in told[0] and "ctxrag server stop" in told[0], first.stderr
        recorded = recorded_server(prefect_home)
        server = LocalServer(recorded["pid"], recorded["api_url"])
        assert (prefect_home / PID_FILE).read_text() == str(server.pid)  # Prefect's own pid file

        # the daemon's environment holds no key and no client setting
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        assert not [item for item in environ if item.startswith((b"ANTHROPIC", b"PREFECT_API_URL"))]

        # a second project folder reuses it, and is told nothing
        second = ctxrag_as_user(second_home, prefect_home, "index", str(SAMPLE_CORPUS), "--name", "other")
        assert second.returncode == 0, second.stderr
        assert "started a local Prefect server" not in second.stderr
        assert recorded_server(prefect_home)["pid"] == server.pid

        # the whole run is recorded: flow runs of both homes, every stage as a named task run, logs tagged with them
        assert post_as_owner(prefect_home, server.api_url, "/flow_runs/count", {}) == 2
        task_runs = post_as_owner(prefect_home, server.api_url, "/task_runs/filter", {})
        names = {name for run in task_runs for name in (run["name"], run["name"].rsplit("-", 1)[0])}  # type: ignore[union-attr]
        assert {"load_corpus", "contextualize-1-of-1", "embed-1-of-1", "publish_index"} <= names, names
        assert all(run["state_type"] == "COMPLETED" for run in task_runs)  # type: ignore[union-attr]
        logs = post_as_owner(
            prefect_home, server.api_url, "/logs/filter", {"logs": {"task_run_id": {"is_null_": False}}, "limit": 5}
        )
        assert logs, "no log line is tagged with its task run"

        status = ctxrag_as_user(first_home, prefect_home, "server", "status")
        assert status.returncode == 0
        assert f"pid {server.pid}" in status.stdout and "Prefect 3." in status.stdout
        export = status.stdout.splitlines()[
            -1
        ]  # one step for Prefect's commands; the shell reads the secret from its file
        assert (
            export
            == f'export PREFECT_API_URL={server.api_url} PREFECT_API_AUTH_STRING="$(cat {prefect_home / "ctxrag-api-auth-string"})"'
        )
        assert home_auth(prefect_home) not in status.stdout + status.stderr + first.stderr + second.stderr

        # Prefect's own command stops it, and ctxrag sees that
        stop = subprocess.run(
            [str(Path(sys.executable).with_name("prefect")), "server", "stop"],
            capture_output=True,
            text=True,
            env={**os.environ, "PREFECT_HOME": str(prefect_home)},
            timeout=60,
        )
        assert stop.returncode == 0, stop.stderr
        assert wait_for(lambda: not local_server.alive(server.pid), 30)
        assert ctxrag_as_user(first_home, prefect_home, "server", "status").returncode == 1


@pytest.mark.slow  # Prefect's migrations
def test_the_template_is_migrated_in_a_private_home_and_seeds_an_empty_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXRAG_CACHE_DIR", str(tmp_path / "cache"))
    template = server_template.template_path("test")
    assert server_template.make_template(template, local_server.server_environment(tmp_path / "unused"))
    assert server_template.tables_with_rows(template) == []
    assert oct(template.stat().st_mode & 0o777) == "0o600"
    assert oct(template.parent.stat().st_mode & 0o777) == oct((tmp_path / "cache").stat().st_mode & 0o777) == "0o700"
    assert sorted(path.name for path in template.parent.iterdir()) == [template.name]  # no scratch home left

    fresh = tmp_path / "home" / "prefect.db"
    assert server_template.seed_database(fresh, template)
    assert server_template.tables_with_rows(fresh) == []
    fresh.write_bytes(b"the user's own database")
    assert not server_template.seed_database(fresh, template)
    assert fresh.read_bytes() == b"the user's own database"
    assert not server_template.seed_database(None, template)  # not SQLite: Prefect migrates it itself


def test_a_template_that_holds_data_is_never_copied(tmp_path: Path) -> None:
    used = tmp_path / "used.db"
    with closing(sqlite3.connect(used)) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num TEXT)")
        connection.execute("INSERT INTO alembic_version VALUES ('head')")
        connection.execute("CREATE TABLE block_document (name TEXT, data TEXT)")
        connection.execute("INSERT INTO block_document VALUES ('anthropic-api-key', 'encrypted')")
        connection.commit()
    assert server_template.tables_with_rows(used) == ["block_document"]
    target = tmp_path / "new" / "prefect.db"
    assert not server_template.seed_database(target, used)
    assert not target.exists() and not used.exists()  # refused, and the bad template removed


def test_a_stale_record_is_cleared_and_a_reused_pid_is_not_taken_for_the_server(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / PID_FILE).write_text(str(dead.pid))
    assert find_server(tmp_path) is None and not (tmp_path / PID_FILE).exists()

    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        (tmp_path / PID_FILE).write_text(str(bystander.pid))  # the server's pid, now another program's
        assert find_server(tmp_path) is None
        (tmp_path / PID_FILE).write_text(str(bystander.pid))
        stop_server(tmp_path)
        assert bystander.poll() is None  # never signalled
    finally:
        bystander.kill()
        bystander.wait()


def test_a_slow_server_is_waited_for_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    busy = fake_server()
    try:
        (tmp_path / PID_FILE).write_text(str(busy.pid))
        monkeypatch.setattr(local_server, "WAIT_SECONDS", 1.0)
        monkeypatch.setattr(
            local_server, "start_server", lambda home: pytest.fail("started a second server on the same database")
        )
        with pytest.raises(ServerError, match=f"pid {busy.pid}.*has not answered"):
            ensure_server(tmp_path)
        assert busy.poll() is None and (tmp_path / PID_FILE).read_text() == str(busy.pid)
    finally:
        busy.kill()
        busy.wait()


def test_a_server_of_another_prefect_version_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = fake_server()
    try:
        (tmp_path / PID_FILE).write_text(str(other.pid))
        monkeypatch.setattr(local_server, "answers", lambda *args, **kwargs: True)
        monkeypatch.setattr(local_server, "check_guarded", lambda server, home, auth: "3.0.0")
        monkeypatch.setattr(local_server, "start_server", lambda home: pytest.fail("started a second server"))
        with pytest.raises(
            ServerError, match=rf"Prefect 3\.0\.0.*this environment has Prefect {local_server.prefect_version()}"
        ):
            ensure_server(tmp_path)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def _as_in_a_terminal() -> None:
    """Ctrl-C's default action, as in a terminal: a command started with ``&`` by a shell without job control
    (a CI script run in the background) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.server
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_start_leaves_no_server(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C or SIGTERM while the server starts: the server is stopped and its pid file removed. The command's
    health check never sees the server answer, so the signal always lands while it is starting (on a busy machine a
    fast start could otherwise finish first, and a started server is meant to outlive its command)."""
    prefect_home = tmp_path / "prefect"
    code = (
        "from pathlib import Path; from ctxrag.prefect_commands import local_server; "
        "local_server.answers = lambda *args, **kwargs: False; local_server.ensure_server(Path.cwd())"
    )
    prefect_home.mkdir()
    env = {**os.environ, "PREFECT_HOME": str(prefect_home), "PYTHONPATH": str(REPO)}
    env.pop("CTXRAG_PREFECT_SERVER")
    command = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=prefect_home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_as_in_a_terminal,
    )
    try:
        assert wait_for(lambda: local_server._read_pid(prefect_home) is not None, 120), command.communicate(timeout=5)
        server_pid = local_server._read_pid(prefect_home)
        assert wait_for(lambda: local_server.is_prefect_server(server_pid), 30)
        assert command.poll() is None, command.communicate(timeout=5)
        command.send_signal(sig)
        assert command.wait(timeout=60) != 0  # interrupted, not finished
        assert not local_server.alive(server_pid), "the server outlived the interrupted command"
        assert not (prefect_home / PID_FILE).exists()
    finally:
        command.kill()
        stop_server(prefect_home)


@pytest.mark.server
def test_a_server_that_dies_at_start_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database migrated by a newer Prefect: the error names it, the exit code and the log's last lines."""
    prefect_home = tmp_path / "prefect"
    prefect_home.mkdir()
    with closing(sqlite3.connect(prefect_home / "prefect.db")) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num TEXT)")
        connection.execute("INSERT INTO alembic_version VALUES ('ffffffffffff')")
        connection.commit()
    result = ctxrag_as_user(tmp_path / "home", prefect_home, "index", str(SAMPLE_CORPUS))
    assert result.returncode == 2, result.stderr
    assert "migrated by a newer Prefect" in result.stderr and "exit code" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr.split("the last lines of")[0]

    assert not (prefect_home / PID_FILE).exists()


@pytest.mark.server
def test_a_port_taken_after_the_check_is_replaced_by_a_free_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process binds the port between ctxrag's check and Prefect's: the start is tried on a free port."""
    prefect_home = tmp_path / "prefect"
    prefect_home.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        held = taken.getsockname()[1]
        chosen, free = iter([held]), local_server.choose_port
        monkeypatch.setattr(local_server, "choose_port", lambda preferred: next(chosen, None) or free(0))
        with stopped_afterwards(prefect_home):
            server = local_server.start_server(prefect_home)
            assert f":{held}/" not in server.api_url
            assert local_server.answers(server.api_url)
            assert find_server(prefect_home) == server
            assert (
                local_server.server_home(server.api_url, home_auth(prefect_home)) == prefect_home.resolve()
            )  # how a start knows it is its own
            assert local_server.server_home(server.api_url) is None  # refused without the auth string


def test_errors_name_a_taken_port_and_a_home_that_cannot_be_written(tmp_path: Path) -> None:
    log = "ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', 4200): address already in use\n"
    assert "port 4200 on 127.0.0.1 is taken" in local_server.why_it_died(tmp_path / "server-home", 4200, 1, log)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(UserError, match="read-only or cannot be created"):
        local_server.check_writable(tmp_path / "a-file" / "prefect")


def test_the_daemon_gets_no_secrets() -> None:
    env = local_server.server_environment(
        Path("/x"),
        {
            "PATH": "/bin",
            "HOME": "/root",
            "ANTHROPIC_API_KEY": "k",
            "VOYAGE_API_KEY": "k",
            "AWS_SECRET_ACCESS_KEY": "k",
            "PREFECT_API_URL": "http://elsewhere/api",
            "PREFECT_API_KEY": "pnu_k",
            "PREFECT_SERVER_API_PORT": "4300",
            "PREFECT_LOGGING_LEVEL": "INFO",
            "GITHUB_TOKEN": "t",
            "PREFECT_CLOUD_API_TOKEN": "t",
        },
        port=4300,
    )  # the port start_server chose (PREFECT_SERVER_API_PORT when free)
    assert env["PATH"] == "/bin" and env["HOME"] == "/root" and env["PREFECT_HOME"] == "/x"
    assert env["PREFECT_SERVER_API_PORT"] == "4300" and env["PREFECT_LOGGING_LEVEL"] == "INFO"
    assert (
        "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED" not in env
    )  # on, as Prefect's default: deployments' schedules run
    assert env["PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED"] == "false"
    assert not {
        "ANTHROPIC_API_KEY",
        "VOYAGE_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "PREFECT_API_URL",
        "PREFECT_API_KEY",
        "GITHUB_TOKEN",
        "PREFECT_CLOUD_API_TOKEN",
    } & set(env)


def test_ci_and_temporary_mode_start_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setattr(local_server, "ensure_server", lambda home=None: pytest.fail("started a server"))
    monkeypatch.delenv(local_server.MODE_VARIABLE)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("CI", "true")
    assert local_server.server_mode() == "temporary"
    with (
        temporary_settings(restore_defaults={PREFECT_API_URL}),
        local_prefect_server() as url,
    ):  # not the suite's harness
        assert url is None
    monkeypatch.setenv(local_server.MODE_VARIABLE, "background")  # said explicitly: it wins over CI
    assert local_server.server_mode() == "background"


@pytest.mark.parametrize("where", ["environment", "profile"])
def test_a_configured_server_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    monkeypatch.setenv(local_server.MODE_VARIABLE, "background")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setattr(local_server, "ensure_server", lambda home=None: pytest.fail("started a server"))
    if where == "environment":
        monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    else:  # what `prefect config set PREFECT_API_URL=...` writes, read as a command that has not imported Prefect reads it
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
        monkeypatch.delitem(sys.modules, "prefect.settings")
        (tmp_path / "profiles.toml").write_text(
            'active = "team"\n\n[profiles.team]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n'
        )
    for mode in (None, "background", "temporary"):  # the command's, and the Python API's server= choices
        with local_prefect_server(mode=mode) as url:  # type: ignore[arg-type]
            assert url == "http://127.0.0.1:9/api"


def test_an_unknown_mode_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(local_server.MODE_VARIABLE, "forever")
    with pytest.raises(UserError, match="CTXRAG_PREFECT_SERVER='forever'"):
        local_server.server_mode()
