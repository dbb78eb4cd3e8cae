"""``ctxrag serve / deploy / trigger`` without a server: parameter parsing, prefect.yaml's shape, clear errors.

The commands against a real server are in tests/flows/test_prefect_server.py.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ctxrag.prefect_commands.deployments import project_dir, work_pools_of
from ctxrag.prefect_commands.errors import CommandError
from ctxrag.prefect_commands.params import parse_params
from tests.helpers import REPO


def ctxrag(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with no Prefect server configured unless ``env`` names one."""
    base = {name: value for name, value in os.environ.items() if name not in {"PREFECT_API_URL", "PREFECT_PROFILE"}}
    command = [sys.executable, "-c", "from ctxrag.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, env={**base, "COLUMNS": "200", **env}, cwd=REPO, timeout=120)


def test_param_values_are_json_when_they_parse_else_strings() -> None:
    pairs = ["k=5", "name=docs", "ks=[5, 10]", "flag=true", "ratio=0.5", "query=a=b", "empty=", 'claude={"mode": "batch"}']
    parsed = parse_params(pairs)
    assert parsed == {
        "k": 5, "name": "docs", "ks": [5, 10], "flag": True, "ratio": 0.5, "query": "a=b", "empty": "", "claude": {"mode": "batch"},
    }
    assert parse_params(None) == {}
    for bad in ("name", "=docs"):
        with pytest.raises(CommandError, match="KEY=VALUE"):
            parse_params([bad])


def test_the_commands_are_on_the_main_app() -> None:
    from ctxrag.cli import app

    names = {command.name or command.callback.__name__ for command in app.registered_commands if command.callback}
    assert {"serve", "deploy", "trigger"} <= names


@pytest.mark.parametrize("args", [["trigger", "ctxrag-index/reindex"], ["deploy"], ["serve"]])
def test_in_temporary_mode_with_no_server_configured_it_says_how_to_get_one(args: list[str]) -> None:
    """The suite's mode (CTXRAG_PREFECT_SERVER=temporary, as under CI=true) starts no server that outlives a command:
    these commands need one, and say how (tests/ctxrag/prefect_commands/test_one_server.py: the default mode)."""
    result = ctxrag(*args, CTXRAG_PREFECT_SERVER="temporary")
    assert result.returncode == 2
    assert "CTXRAG_PREFECT_SERVER=temporary" in result.stderr and "PREFECT_API_URL" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_unreachable_server_is_one_line() -> None:
    result = ctxrag("trigger", "ctxrag-index/reindex", PREFECT_API_URL="http://127.0.0.1:9/api")
    assert result.returncode == 2
    assert "cannot reach the Prefect API at http://127.0.0.1:9/api" in result.stderr
    assert "Traceback" not in result.stderr


def test_prefect_yaml_declares_the_two_deployments_on_the_process_pool() -> None:
    from ctxrag.flows.evaluate import evaluate_index
    from ctxrag.flows.index import index_corpus

    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    deployments = {item["name"]: item for item in config["deployments"]}
    assert set(deployments) == {"reindex", "evaluate"}
    reindex, evaluation = deployments["reindex"], deployments["evaluate"]
    assert reindex["entrypoint"] == "flows/index.py:index_corpus"
    assert evaluation["entrypoint"] == "flows/evaluate.py:evaluate_index"
    assert set(reindex["parameters"]) == {"source", "name", "contextualizer", "embedder", "backend"}
    assert set(reindex["parameters"]) <= set(inspect.signature(index_corpus.fn).parameters)
    assert set(evaluation["parameters"]) <= set(inspect.signature(evaluate_index.fn).parameters)
    assert (REPO / reindex["parameters"]["source"]).is_dir() and (REPO / evaluation["parameters"]["evalset"]).is_file()
    assert [schedule["cron"] for schedule in reindex["schedules"]] == ["0 3 * * *"]
    assert reindex["work_pool"] is evaluation["work_pool"]  # one shared definition (a YAML alias)
    assert work_pools_of(REPO / "prefect.yaml") == ["ctxrag-process"]
    # the worker runs flows from the folder prefect deploy ran in (captured by a build step)
    step = config["pull"][0]["prefect.deployments.steps.set_working_directory"]
    assert step["directory"] == "{{ project.stdout }}"
    assert config["build"][0]["prefect.deployments.steps.run_shell_script"]["id"] == "project"


def test_project_dir_is_the_folder_with_prefect_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert project_dir(REPO) == REPO.resolve()
    monkeypatch.chdir(tmp_path)
    assert project_dir() == REPO.resolve()  # not here: this checkout's
    with pytest.raises(CommandError, match="no prefect.yaml"):
        project_dir(tmp_path)
