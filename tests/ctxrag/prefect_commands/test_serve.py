"""``ctxrag serve``'s options over prefect.yaml's deployments, without a server.

The served process, against a real server: tests/flows/test_prefect_server.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ctxrag.prefect_commands.errors import CommandError
from ctxrag.prefect_commands.serve import _summary, build, load
from tests.helpers import REPO

SOURCE = str(REPO / "data" / "sample" / "corpus")


@pytest.fixture(scope="module")
def served() -> list[tuple[Any, Any]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        return load(REPO)


@pytest.fixture(autouse=True)
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(REPO)  # relative paths and entrypoints are read from the current folder, as `ctxrag serve` does
    yield


def crons(deployment: Any) -> list[tuple[str, str]]:
    return [(item.schedule.cron, item.schedule.timezone) for item in deployment.schedules]


def test_a_parameter_option_sets_it_where_prefect_yaml_has_it(served: list[tuple[Any, Any]]) -> None:
    reindex, evaluation = build(served, {"name": "docs", "source": "data/sample/corpus/", "backend": "elasticsearch"})
    assert reindex.parameters == {
        "source": SOURCE,
        "name": "docs",
        "options": {"contextualizer": "structural", "embedding": {"embedder": "local"}, "backend": "elasticsearch"},
    }
    (chosen,) = build(served, {"embedder": "voyage"})[:1]  # an index option lands in its group, the others kept
    assert chosen.parameters["options"] == {
        "contextualizer": "structural",
        "embedding": {"embedder": "voyage"},
        "backend": "embedded",
    }
    assert evaluation.parameters == {"evalset": str(REPO / "data" / "sample" / "questions.jsonl"), "name": "docs"}


def test_cron_and_timezone_replace_the_scheduled_deployments_schedules(served: list[tuple[Any, Any]]) -> None:
    reindex, evaluation = build(served, {}, cron="30 2 * * *")
    assert crons(reindex) == [("30 2 * * *", "UTC")] and evaluation.schedules == []
    assert crons(build(served, {}, cron="30 2 * * *", timezone="Europe/Berlin")[0]) == [("30 2 * * *", "Europe/Berlin")]
    assert crons(build(served, {}, timezone="Europe/Berlin")[0]) == [("0 3 * * *", "Europe/Berlin")]
    assert build(served, {}, cron="")[0].schedules == []
    assert build(served, {}, cron="")[0].concurrency_limit == 1  # the rest of the deployment stays prefect.yaml's


def test_what_serve_prints_names_the_deployments_and_their_schedules(served: list[tuple[Any, Any]]) -> None:
    assert _summary(served, build(served, {})) == (
        "ctxrag-index/reindex (cron '0 3 * * *' UTC) and ctxrag-evaluate/evaluate; "
        "trigger with `ctxrag trigger ctxrag-index/reindex --param name=...`"
    )
    assert _summary(served, build(served, {}, cron="")).startswith(
        "ctxrag-index/reindex (no schedule) and ctxrag-evaluate/evaluate;"
    )


def test_bad_options_are_one_line(served: list[tuple[Any, Any]]) -> None:
    with pytest.raises(CommandError, match=r"--cron 'nope': "):
        build(served, {}, cron="nope")
    with pytest.raises(CommandError, match=r"--source no/such/folder not found \(relative paths are read from"):
        build(served, {"source": "no/such/folder"}, cron="nope")  # paths are checked first
    with pytest.raises(CommandError, match="--evalset missing.jsonl not found"):
        build(served, {"evalset": "missing.jsonl"})
    with pytest.raises(CommandError, match="no deployment in prefect.yaml has a parameter 'colour'"):
        build(served, {"colour": "blue"})
