"""One Prefect server for every command, as a new user meets it (no PREFECT_API_URL, a private PREFECT_HOME):
``ctxrag index`` starts the local server, ``ctxrag serve`` serves the deployments on it (a cron schedule included),
``ctxrag trigger --watch`` runs one there, the scheduler's own run completes too, and ``ctxrag server stop`` leaves no
Prefect process. The real server, the real scheduler; no other server is started on the way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.equipment.local_server import (
    _server_processes,
    ctxrag_as_user,
    post_as_owner,
    recorded_server,
    stopped_afterwards,
    user_env,
    wait_for,
)
from tests.equipment.prefect_server import stop_group
from tests.helpers import REPO, SAMPLE_CORPUS

# a real server and scheduler (slow)
pytestmark = [pytest.mark.server, pytest.mark.slow]


def _servers_in(root: Path) -> set[int]:
    return {
        pid
        for pid, home in _server_processes().items()
        if home is not None and home.resolve().is_relative_to(root.resolve())
    }


def test_index_serve_trigger_and_a_scheduled_run_share_the_local_server_and_stop_leaves_nothing(tmp_path: Path) -> None:
    prefect_home, home = tmp_path / "prefect", tmp_path / "home"
    # the scheduler looks for due schedules every 5 s (Prefect's default: 60 s); serve polls every second
    fast = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5", "PREFECT_RUNNER_POLL_FREQUENCY": "1"}
    serve = None
    with stopped_afterwards(prefect_home):
        indexed = ctxrag_as_user(home, prefect_home, "index", str(SAMPLE_CORPUS), "--name", "docs", **fast)
        assert indexed.returncode == 0, indexed.stderr
        server = recorded_server(prefect_home)
        assert _servers_in(tmp_path) == {server["pid"]}

        status = ctxrag_as_user(home, prefect_home, "server", "status")
        assert (
            status.returncode == 0
            and f"export PREFECT_API_URL={server['api_url']} PREFECT_API_AUTH_STRING=" in status.stdout
        )

        log = tmp_path / "serve.log"
        command = [
            sys.executable,
            "-c",
            "from ctxrag.cli import main; main()",
            "serve",
            "--name",
            "docs",
            "--cron",
            "* * * * *",
        ]
        with open(log, "wb") as output:
            serve = subprocess.Popen(
                command,
                env=user_env(home, prefect_home, **fast),
                cwd=REPO,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            assert wait_for(lambda: "serving" in log.read_text() or serve.poll() is not None, 120), log.read_text()
            assert serve.poll() is None, log.read_text()[-3000:]
            assert "started a local Prefect server" not in log.read_text()  # serve found the server index started

            triggered = ctxrag_as_user(
                home,
                prefect_home,
                "trigger",
                "ctxrag-index/reindex",
                "--watch",
                "--timeout",
                "150",
                "--json",
                timeout=200,
                **fast,
            )
            assert triggered.returncode == 0, f"{triggered.stderr[-3000:]}\nserve log:\n{log.read_text()[-3000:]}"
            run = json.loads(triggered.stdout)
            assert run["state"] == "COMPLETED" and run["parameters"]["name"] == "docs"
            assert run["url"].startswith(server["ui_url"])
            task_runs = post_as_owner(
                prefect_home, server["api_url"], "/task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}}
            )

            # a run naming a source outside the folders served for is refused by the run itself, before any work
            outside = ctxrag_as_user(
                home,
                prefect_home,
                "trigger",
                "ctxrag-index/reindex",
                "--param",
                "source=/etc",
                "--watch",
                "--timeout",
                "120",
                timeout=200,
                **fast,
            )
            assert (
                outside.returncode == 1
                and "source='/etc' (/etc) is outside the folders this deployment was served for" in outside.stderr
            ), outside.stderr[-3000:]
            assert "load_corpus" in {
                task["name"].rsplit("-", 1)[0] for task in task_runs
            }  # the index is up to date: no other stage runs

            # the cron schedule's own run: made by the server's scheduler, run by serve, completed
            def scheduled_completed() -> bool:
                runs = post_as_owner(
                    prefect_home,
                    server["api_url"],
                    "/flow_runs/filter",
                    {"flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}},
                )
                return any(item["auto_scheduled"] for item in runs)

            assert wait_for(scheduled_completed, 150), (
                f"no scheduled run completed\nserve log:\n{log.read_text()[-3000:]}"
            )
            assert _servers_in(tmp_path) == {server["pid"]}  # no temporary server in any command or flow run
        finally:
            stop_group(serve, signal.SIGINT, wait_seconds=30)

        stopped = ctxrag_as_user(home, prefect_home, "server", "stop")
        assert stopped.returncode == 0 and f"pid {server['pid']}" in stopped.stdout
        assert not _servers_in(tmp_path), "a Prefect server outlived `ctxrag server stop`"
        assert not (prefect_home / "server.pid").exists()
        time.sleep(0.5)
        leftovers = [pid for pid in _process_tree_of_home(tmp_path)]
        assert not leftovers, f"Prefect processes left: {leftovers}"


def _process_tree_of_home(root: Path) -> list[int]:
    """Processes (any Prefect command, server, runner or flow run) whose environment names a home inside ``root``."""
    found = []
    marker = str(root.resolve()).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"PREFECT_HOME=" + marker in environ:
            found.append(int(entry.name))
    return found
