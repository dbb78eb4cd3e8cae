"""The local server is private to its user: an auth string per PREFECT_HOME (ctxrag.prefect_commands.server_auth),
required by the server ctxrag starts and by Prefect's temporary server; files only their owner can read; a real second
OS user reaches nothing; a server the user configured, with its own auth, works as before."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ctxrag.prefect_commands import server_auth
from ctxrag.prefect_commands.server_auth import auth_file, ensure_auth_string, export_line, read_auth_string
from ctxrag.storage.errors import UserError
from tests.equipment.local_server import (
    api_call,
    ctxrag_as_user,
    home_auth,
    post_as_owner,
    recorded_server,
    stopped_afterwards,
    user_env,
)
from tests.equipment.other_user import other_user_missing, probe_as_other_user
from tests.equipment.prefect_server import running_prefect_server
from tests.helpers import REPO, SAMPLE_CORPUS


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_auth_string_is_made_once_private_from_creation_and_never_printed(tmp_path: Path) -> None:
    home = tmp_path / "prefect"
    old = os.umask(0o022)  # a user's usual umask: the modes below are ctxrag's own, not the test's
    try:
        value = ensure_auth_string(home)
    finally:
        os.umask(old)
    assert len(value) >= 40 and ensure_auth_string(home) == value == read_auth_string(home)  # made once, then reused
    assert _mode(home) == 0o700 and _mode(auth_file(home)) == 0o600
    line = export_line("http://127.0.0.1:4200/api", home)
    assert value not in line and f'PREFECT_API_AUTH_STRING="$(cat {auth_file(home)})"' in line
    shell = subprocess.run(
        ["sh", "-c", f'{line}; printf %s "$PREFECT_API_AUTH_STRING"'], capture_output=True, text=True
    )
    assert shell.stdout == value  # the printed line gives Prefect's commands the string


def test_an_auth_file_others_may_read_is_refused(tmp_path: Path) -> None:
    ensure_auth_string(tmp_path)
    os.chmod(auth_file(tmp_path), 0o644)
    with pytest.raises(UserError, match="can be read or changed by another user"):
        read_auth_string(tmp_path)


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.skipif(other_user_missing() is not None, reason=str(other_user_missing()))
def test_another_local_user_reads_no_key_lists_no_run_changes_nothing_and_starts_no_run() -> None:
    shared = Path(tempfile.mkdtemp(prefix="ctxrag-shared-", dir="/tmp"))
    os.chmod(shared, 0o755)  # a folder every user may enter, as /home/USER often is: only ctxrag's own modes protect
    prefect_home, home = shared / "prefect", shared / "ctxrag-home"
    try:
        with stopped_afterwards(prefect_home):
            indexed = ctxrag_as_user(home, prefect_home, "index", str(SAMPLE_CORPUS), "--name", "sample")
            assert indexed.returncode == 0, indexed.stderr[-3000:]
            api_url, auth = recorded_server(prefect_home)["api_url"], home_auth(prefect_home)
            block_id = _secret_block(prefect_home, api_url, "anthropic-api-key", "sk-ant-owner-key-not-for-others")
            (flow,) = post_as_owner(
                prefect_home, api_url, "/flows/filter", {"flows": {"name": {"any_": ["ctxrag-index"]}}}
            )
            deployment = post_as_owner(
                prefect_home, api_url, "/deployments/", {"name": "reindex", "flow_id": flow["id"]}
            )

            ledger_like = next((home / "artifacts" / "contexts").iterdir())  # a store file, as the ledger's journal is
            report = probe_as_other_user(
                api_url,
                block_id,
                deployment["id"],
                [auth_file(prefect_home), prefect_home / "prefect.db", prefect_home / "server.log", ledger_like],
            )
            print(f"\nsecond OS user, attempts that succeeded: {report['succeeded']} of {report['attempts']}")
            assert report["health"] == 200  # the server was reachable: the refusals are the auth's and the modes'
            assert report["succeeded"] == {"read_key": 0, "list_runs": 0, "change": 0, "start_run": 0}, report[
                "outcomes"
            ]
            assert all(
                status == 401
                for kind in ("list_runs", "change", "start_run")
                for _, status, _ in report["outcomes"][kind]
            )

            # the owner's commands, with the string, see everything as it was
            status, block = api_call(api_url, f"/block_documents/{block_id}?include_secrets=true", auth=auth)
            assert status == 200 and block["data"]["value"] == "sk-ant-owner-key-not-for-others"  # type: ignore[index]
            assert post_as_owner(prefect_home, api_url, "/variables/filter", {}) == []
            assert (
                post_as_owner(prefect_home, api_url, "/flow_runs/count", {}) == 1
            )  # the index run; none started by the probe

            # files only their owner can read, so from their creation (the shared folder above is 0755)
            for folder in (prefect_home, home, home / "artifacts", home / "artifacts" / "contexts", home / "indexes"):
                assert _mode(folder) == 0o700, folder
            for file in (
                auth_file(prefect_home),
                prefect_home / "server.log",
                prefect_home / "server.pid",
                prefect_home / "prefect.db",
            ):
                assert _mode(file) == 0o600, file
            secret = auth.encode()
            assert not [pid for pid in _pids() if secret in _read(f"/proc/{pid}/cmdline")]  # `ps` shows it nowhere
            assert (
                secret not in (prefect_home / "server.log").read_bytes() and auth not in indexed.stdout + indexed.stderr
            )
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.server
@pytest.mark.slow
def test_without_the_auth_string_the_local_server_answers_401_for_blocks_runs_deployments_and_the_ui(
    tmp_path: Path,
) -> None:
    prefect_home = tmp_path / "prefect"
    with stopped_afterwards(prefect_home):
        started = ctxrag_as_user(tmp_path / "home", prefect_home, "server", "start")
        assert started.returncode == 0, started.stderr
        api_url, auth = recorded_server(prefect_home)["api_url"], home_auth(prefect_home)
        block_id = _secret_block(prefect_home, api_url, "voyage-api-key", "pa-owner-key")
        requests = [
            ("GET", f"/block_documents/{block_id}?include_secrets=true", None),
            ("POST", "/block_documents/filter", {}),
            ("POST", "/flow_runs/filter", {}),
            ("POST", "/deployments/filter", {}),
            ("POST", "/work_pools/filter", {}),
            ("GET", "/admin/version", None),
        ]  # the last: what the UI's login checks a string with
        for method, path, body in requests:
            assert api_call(api_url, path, body, method=method)[0] == 401, path
            assert api_call(api_url, path, body, auth="a-guess", method=method)[0] == 401, path
            assert api_call(api_url, path, body, auth=auth, method=method)[0] == 200, path
        assert api_call(api_url, "/health")[0] == 200  # Prefect's probe stays open: it tells nothing
        status, ui = api_call(api_url.removesuffix("/api"), "/ui-settings")
        assert status == 200 and ui["auth"] == "BASIC"  # type: ignore[index]  # the UI asks for the string at login
        environ = Path(f"/proc/{recorded_server(prefect_home)['pid']}/environ")
        assert _mode(
            environ
        ) == 0o400 and f"PREFECT_SERVER_API_AUTH_STRING={auth}".encode() in environ.read_bytes().split(b"\0")


@pytest.mark.server
@pytest.mark.slow
def test_the_temporary_server_refuses_requests_without_its_auth_string(tmp_path: Path) -> None:
    script = (
        "import json, urllib.error, urllib.request\n"
        "from prefect.client.orchestration import get_client\n"
        "from ctxrag.prefect_commands.local_server import local_prefect_server\n"
        "with local_prefect_server(mode='temporary'), get_client(sync_client=True) as client:\n"
        "    client.read_flow_runs(limit=1)\n"  # the process's own client: with the string
        "    request = urllib.request.Request(str(client.api_url) + 'flow_runs/filter', data=b'{}', method='POST',"
        " headers={'Content-Type': 'application/json'})\n"
        "    try:\n"
        "        status = urllib.request.urlopen(request, timeout=30).status\n"
        "    except urllib.error.HTTPError as error:\n"
        "        status = error.code\n"
        "print(json.dumps({'without': status}))\n"
    )
    env = {**user_env(tmp_path / "home", tmp_path / "prefect"), "CTXRAG_PREFECT_SERVER": "temporary"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO, timeout=240
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {"without": 401}


@pytest.mark.server
@pytest.mark.slow
def test_a_self_hosted_server_with_its_own_auth_string_keeps_working(tmp_path: Path) -> None:
    with running_prefect_server(ui=False, auth_string="team-string") as server:
        env = server.env(PREFECT_API_AUTH_STRING="team-string", COLUMNS="200")
        command = [sys.executable, "-c", "from ctxrag.cli import main; main()"]
        status = subprocess.run(
            [*command, "server", "status"], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
        )
        assert status.returncode == 0 and f"configured: PREFECT_API_URL={server.api_url}" in status.stdout
        reached = subprocess.run(
            [*command, "trigger", "ctxrag-index/reindex"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )
        assert reached.returncode == 2 and "no deployment 'ctxrag-index/reindex' on this server" in reached.stderr, (
            reached.stderr
        )
        without = {name: value for name, value in env.items() if name != "PREFECT_API_AUTH_STRING"}
        refused = subprocess.run(
            [*command, "trigger", "ctxrag-index/reindex"],
            capture_output=True,
            text=True,
            env=without,
            cwd=REPO,
            timeout=120,
        )
        assert (
            refused.returncode == 2
            and "refused the request (401)" in refused.stderr
            and "PREFECT_API_AUTH_STRING" in refused.stderr
        )
        assert "Traceback" not in refused.stderr and "team-string" not in reached.stderr + refused.stderr
        assert not (
            Path(env["PREFECT_HOME"]) / server_auth.AUTH_FILE
        ).exists()  # nothing of the local server's was made


def _secret_block(prefect_home: Path, api_url: str, name: str, value: str) -> str:
    """A Prefect Secret block made by the owner (as `Secret(value=...).save(name)` does); its id."""
    (block_type,) = post_as_owner(
        prefect_home, api_url, "/block_types/filter", {"block_types": {"slug": {"any_": ["secret"]}}}
    )
    schema = post_as_owner(
        prefect_home,
        api_url,
        "/block_schemas/filter",
        {"block_schemas": {"block_type_id": {"any_": [block_type["id"]]}}},
    )[0]
    document = post_as_owner(
        prefect_home,
        api_url,
        "/block_documents/",
        {"name": name, "data": {"value": value}, "block_schema_id": schema["id"], "block_type_id": block_type["id"]},
    )
    return str(document["id"])


def _pids() -> list[int]:
    return [
        int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and int(entry.name) != os.getpid()
    ]


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""
