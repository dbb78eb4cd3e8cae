"""What index and evaluate runs show in the Prefect UI: run names that say what ran on which index, figures rounded
in the table artifacts, and progress cards that say what they count."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any
from uuid import UUID

import pytest

from ctxrag.flows.evaluate import evaluate_index
from ctxrag.flows.index import index_corpus
from tests.helpers import SAMPLE_CORPUS, SAMPLE_QUESTIONS

pytestmark = pytest.mark.usefixtures("prefect_harness")


def run_of(state: Any) -> tuple[Any, list[Any]]:
    """The flow run a returned state belongs to, and its artifacts."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    run_id = UUID(str(state.state_details.flow_run_id))
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(run_id)
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
        )
    return flow_run, artifacts


def table(artifacts: list[Any], key: str) -> list[dict[str, Any]]:
    """The rows of the table artifact ``key``."""
    found = [artifact for artifact in artifacts if artifact.key == key]
    assert found, [artifact.key for artifact in artifacts]
    return json.loads(found[0].data) if isinstance(found[0].data, str) else found[0].data


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> dict[str, tuple[Any, list[Any]]]:  # type: ignore[no-untyped-def]
    """A first index of the sample (name "docs"), the same again (nothing to do), and an evaluation of it."""
    folder = tmp_path_factory.mktemp("display")
    corpus, home = folder / "corpus", folder / "home"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    first = index_corpus(source=str(corpus), name="docs", home=str(home), return_state=True)
    again = index_corpus(source=str(corpus), name="docs", home=str(home), return_state=True)
    evaluation = evaluate_index(evalset=str(SAMPLE_QUESTIONS), name="docs", home=str(home), return_state=True)
    assert first.is_completed() and again.is_completed() and evaluation.is_completed()
    return {"first": run_of(first), "again": run_of(again), "evaluate": run_of(evaluation)}


def test_flow_runs_are_named_for_the_command_and_the_index(runs: dict[str, tuple[Any, list[Any]]]) -> None:
    names = {label: flow_run.name for label, (flow_run, _) in runs.items()}
    assert re.fullmatch(r"index-docs-[a-z]+-[a-z]+", names["first"]), names
    assert re.fullmatch(r"index-docs-[a-z]+-[a-z]+", names["again"]) and names["again"] != names["first"]
    assert re.fullmatch(r"evaluate-docs-[a-z]+-[a-z]+", names["evaluate"]), names


def test_table_artifacts_show_metrics_to_3_decimals_and_seconds_to_one(runs: dict[str, tuple[Any, list[Any]]]) -> None:
    summary = {row["item"]: row["value"] for row in table(runs["first"][1], "ctxrag-index-docs")}
    seconds = {item: value for item, value in summary.items() if item.startswith("seconds.")}
    assert set(seconds) == {"seconds.load", "seconds.contextualize", "seconds.embed", "seconds.publish"}
    assert all(re.fullmatch(r"\d+(\.\d)?", value) for value in seconds.values()), seconds
    metrics = table(runs["evaluate"][1], "ctxrag-metrics-docs")
    values = [value for row in metrics for column, value in row.items() if column != "strategy"]
    assert len(values) == 6 * 9  # six strategies, pass/hit/ndcg at 5, 10, 20
    assert all(re.fullmatch(r"[01]\.\d{3}", str(value)) for value in values), values


def test_an_index_with_nothing_to_contextualize_says_so_in_words(runs: dict[str, tuple[Any, list[Any]]]) -> None:
    def cards(label: str) -> list[str]:
        return [artifact.description for artifact in runs[label][1] if artifact.type == "progress"]

    chunks = int(next(row["value"] for row in table(runs["again"][1], "ctxrag-index-docs") if row["item"] == "chunks"))
    assert f"ctxrag: contextualizing: nothing to do (all {chunks} chunks stored)" in cards("again")
    assert f"ctxrag: contextualizing: {chunks} of {chunks} chunks (100%)" in cards("first")
