"""``ctxrag serve / deploy / trigger`` without a server: parameter parsing, prefect.yaml's shape, clear errors.

The commands against a real server are in tests/flows/test_prefect_server.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from ctxrag.prefect_commands.deployments import project_dir, work_pools_of
from ctxrag.prefect_commands.errors import CommandError
from ctxrag.prefect_commands.params import merged, parse_params
from tests.helpers import REPO


def ctxrag(*args: str, api_url: str | None = None) -> Result:
    """The CLI in-process (typer's CliRunner) from the checkout, with no Prefect server configured unless ``api_url``
    names one (Prefect's settings for the call: another test's server, e.g. the session's harness, is not seen)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    import ctxrag.cli as cli

    settings = (
        temporary_settings(updates={PREFECT_API_URL: api_url})
        if api_url
        else temporary_settings(restore_defaults={PREFECT_API_URL})
    )
    with settings, pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        return CliRunner().invoke(cli.app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def never_served(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``ctxrag serve`` in this process must stop before it serves (it would serve until interrupted)."""
    import prefect

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("ctxrag serve started serving")

    monkeypatch.setattr(prefect, "serve", refuse)
    yield


def test_param_values_are_json_when_they_parse_else_strings() -> None:
    pairs = [
        "k=5",
        "name=docs",
        "ks=[5, 10]",
        "flag=true",
        "ratio=0.5",
        "query=a=b",
        "empty=",
        'claude={"mode": "batch"}',
    ]
    parsed = parse_params(pairs)
    assert parsed == {
        "k": 5,
        "name": "docs",
        "ks": [5, 10],
        "flag": True,
        "ratio": 0.5,
        "query": "a=b",
        "empty": "",
        "claude": {"mode": "batch"},
    }
    assert parse_params(["options.gate.evalset=q.jsonl", "options.backend=embedded"]) == {
        "options": {"gate": {"evalset": "q.jsonl"}, "backend": "embedded"}
    }
    deployed = {"name": "docs", "options": {"contextualizer": "structural", "gate": {"max_drop": 0.05}}}
    assert merged(
        parse_params(["options.gate.evalset=q.jsonl"]), deployed
    ) == {  # set field by field over the deployment's
        "name": "docs",
        "options": {"contextualizer": "structural", "gate": {"max_drop": 0.05, "evalset": "q.jsonl"}},
    }
    assert parse_params(None) == {}
    for bad in ("name", "=docs"):
        with pytest.raises(CommandError, match="KEY=VALUE"):
            parse_params([bad])


def test_the_commands_are_on_the_main_app() -> None:
    from ctxrag.cli import app

    names = {command.name or command.callback.__name__ for command in app.registered_commands if command.callback}
    assert {"serve", "deploy", "trigger"} <= names


@pytest.mark.usefixtures("never_served")
@pytest.mark.parametrize("args", [["trigger", "ctxrag-index/reindex"], ["deploy"], ["serve"]])
def test_in_temporary_mode_with_no_server_configured_it_says_how_to_get_one(args: list[str]) -> None:
    """The suite's mode (CTXRAG_PREFECT_SERVER=temporary, as under CI=true) starts no server that outlives a command:
    these commands need one, and say how (tests/ctxrag/prefect_commands/test_one_server.py: the default mode)."""
    result = ctxrag(*args)
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert "CTXRAG_PREFECT_SERVER=temporary" in result.stderr and "PREFECT_API_URL" in result.stderr
    assert isinstance(result.exception, SystemExit) and result.stdout == ""  # exited itself: no traceback


def test_unreachable_server_is_one_line() -> None:
    result = ctxrag("trigger", "ctxrag-index/reindex", api_url="http://127.0.0.1:9/api")
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert "cannot reach the Prefect API at http://127.0.0.1:9/api" in result.stderr
    assert isinstance(result.exception, SystemExit)  # exited itself: no traceback


def test_prefect_yaml_declares_the_two_deployments_on_the_process_pool() -> None:
    from ctxrag.flows.evaluate import evaluate_index
    from ctxrag.flows.index import index_corpus

    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    deployments = {item["name"]: item for item in config["deployments"]}
    assert set(deployments) == {"reindex", "evaluate"}
    reindex, evaluation = deployments["reindex"], deployments["evaluate"]
    assert reindex["entrypoint"] == "flows/index.py:index_corpus"
    assert evaluation["entrypoint"] == "flows/evaluate.py:evaluate_index"
    assert set(reindex["parameters"]) == {"source", "name", "options"}
    assert index_corpus.validate_parameters(reindex["parameters"])["options"].embedding.embedder == "local"
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
