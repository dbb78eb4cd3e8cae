"""prefect.yaml, the one definition of the deployments: what ``deployments`` reads, and that ``serve`` runs exactly that."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from ctxrag.prefect_commands.deployments import Deployment, module_name, read_deployments
from ctxrag.prefect_commands.errors import CommandError
from ctxrag.prefect_commands.serve import PATH_PARAMETERS, build, load
from tests.helpers import REPO


def raw_deployments() -> list[dict[str, Any]]:
    return yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]


def test_the_reader_returns_prefect_yaml_deployments_as_written() -> None:
    read = read_deployments(REPO / "prefect.yaml")
    assert [item.name for item in read] == [item["name"] for item in raw_deployments()] == ["reindex", "evaluate"]
    for entry, raw in zip(read, raw_deployments()):
        assert entry.entrypoint == raw["entrypoint"]
        assert entry.description == raw["description"]
        assert entry.tags == raw["tags"] == ["ctxrag"]
        assert (
            entry.parameters == raw["parameters"] and entry.parameters["name"] == "default"
        )  # the `<<: *corpus` merge
        assert entry.schedules == raw.get("schedules", [])
        assert entry.concurrency_limit == raw.get("concurrency_limit")
        assert entry.work_pool == raw["work_pool"]["name"] == "ctxrag-process"


def test_serve_runs_prefect_yaml_deployments_unchanged_but_for_absolute_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `ctxrag serve` (no options) would register: every field from prefect.yaml, nothing restated in Python."""
    monkeypatch.chdir(REPO)
    served = load(REPO)
    deployments = build(served, {})
    assert [f"{flow.name}/{deployment.name}" for (_, flow), deployment in zip(served, deployments)] == [
        "ctxrag-index/reindex",
        "ctxrag-evaluate/evaluate",
    ]
    for raw, deployment in zip(raw_deployments(), deployments):
        assert deployment.name == raw["name"]
        assert deployment.entrypoint == raw["entrypoint"]
        assert deployment.description == raw["description"]
        assert deployment.tags == raw["tags"]
        expected = {
            key: str((REPO / value).resolve()) if key in PATH_PARAMETERS else value
            for key, value in raw["parameters"].items()
        }
        assert deployment.parameters == expected
        assert [(item.schedule.cron, item.schedule.timezone, item.active) for item in deployment.schedules] == [
            (item["cron"], item["timezone"], item["active"]) for item in raw.get("schedules", [])
        ]
        limit = raw.get("concurrency_limit")
        assert deployment.concurrency_limit == (limit["limit"] if limit else None)
        strategy = deployment.concurrency_options.collision_strategy.value if deployment.concurrency_options else None
        assert strategy == (limit["collision_strategy"] if limit else None)
        assert deployment.work_pool_name is None  # served from the process, not a pool
    assert deployments[0].concurrency_limit == 1 and [item.schedule.cron for item in deployments[0].schedules] == [
        "0 3 * * *"
    ]


def write(folder: Path, deployments: list[dict[str, Any]]) -> Path:
    (folder / "prefect.yaml").write_text(yaml.safe_dump({"name": "test", "deployments": deployments}))
    return folder / "prefect.yaml"


def test_schedules_and_concurrency_limits_in_their_other_forms(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {
                "name": "a",
                "schedules": [{"interval": 600, "active": False}, {"rrule": "FREQ=DAILY"}],
                "concurrency_limit": 2,
            },
            {"name": "b", "schedules": [{"cron": "not a cron"}]},
            {"name": "c", "schedules": [{"cron": "0 1 * * *", "replaces": "x"}]},
            {"entrypoint": "nameless.py:flow"},
        ],
    )
    a, b, c = read_deployments(path)  # the nameless entry is skipped
    interval, rrule = a.prefect_schedules()
    assert (interval.interval, interval.active, rrule.rrule) == (timedelta(minutes=10), False, "FREQ=DAILY")
    assert a.prefect_concurrency_limit() == 2 and b.prefect_concurrency_limit() is None
    with pytest.raises(CommandError, match="deployment 'b': schedule"):
        b.prefect_schedules()
    with pytest.raises(CommandError, match="replaces is not supported"):
        c.prefect_schedules()


UNUSABLE = [
    None,
    "flows/index.py",
    "flows/nope.py:index_corpus",
    "../flows/index.py:index_corpus",
    "ctxrag.flows.index:index_corpus",
]


@pytest.mark.parametrize("entrypoint", UNUSABLE)
def test_an_entrypoint_serve_cannot_import_is_one_line(entrypoint: str | None) -> None:
    with pytest.raises(CommandError, match="expected FILE.py:FLOW"):
        Deployment(name="x", entrypoint=entrypoint).load_flow(REPO)


def test_ctxrag_entrypoints_load_the_flows_the_rest_of_ctxrag_imports() -> None:
    from ctxrag.flows.evaluate import evaluate_index
    from ctxrag.flows.index import index_corpus

    reindex, evaluate = read_deployments(REPO / "prefect.yaml")
    assert reindex.load_flow(REPO) is index_corpus and evaluate.load_flow(REPO) is evaluate_index


def test_module_names_of_entrypoint_files(tmp_path: Path) -> None:
    assert module_name(REPO, Path("flows/index.py")) == "ctxrag.flows.index"
    assert module_name(REPO / "flows", Path("evaluate.py")) == "ctxrag.flows.evaluate"
    assert module_name(REPO, Path("tasks/stages/load.py")) == "ctxrag.tasks.stages.load"
    assert module_name(tmp_path, Path("pipelines/nightly.py")) == "pipelines.nightly"  # a user's own flow


def test_an_entrypoint_naming_no_flow_is_one_line() -> None:
    with pytest.raises(CommandError, match="deployment 'x'.*nope"):
        Deployment(name="x", entrypoint="flows/index.py:nope").load_flow(REPO)


def test_a_prefect_yaml_that_is_not_yaml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "prefect.yaml").write_text("deployments: [\n")
    with pytest.raises(CommandError, match="not valid YAML"):
        read_deployments(tmp_path / "prefect.yaml")
