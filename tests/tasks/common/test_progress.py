"""Progress artifacts: the card in the Prefect UI says what runs, how far, and the percentage."""

from __future__ import annotations

import pytest

from ctxrag.tasks.common.progress import progress_text, stage_progress


def test_progress_text_names_the_stage_what_it_counts_and_percentage() -> None:
    assert progress_text("contextualizing", 120, 737, "chunks") == "ctxrag: contextualizing: 120 of 737 chunks (16%)"
    assert progress_text("embedding", 1412, 2000, "texts") == "ctxrag: embedding: 1,412 of 2,000 texts (71%)"


def test_an_empty_stage_says_there_is_nothing_to_do_and_why() -> None:
    """Not "0 of 0 (100%)": the card says in words that earlier runs did the work."""
    assert (
        progress_text("contextualizing", 0, 0, "chunks", stored=737)
        == "ctxrag: contextualizing: nothing to do (all 737 chunks stored)"
    )
    assert progress_text("evaluating", 0, 0, "searches") == "ctxrag: evaluating: nothing to do (no searches)"


@pytest.mark.usefixtures("prefect_harness")
def test_a_stage_inside_a_flow_leaves_a_progress_artifact_at_100_percent_with_its_counts() -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterType, FlowRunFilter, FlowRunFilterId

    @flow
    def stage() -> str:
        from prefect.runtime import flow_run

        with stage_progress("embedding", "texts") as update:
            for done in range(1, 11):
                update(done, 10)
        return str(flow_run.id)

    run_id = stage()
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(type=ArtifactFilterType(any_=["progress"])),
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])),
        )
    assert [(artifact.data, artifact.description) for artifact in artifacts] == [
        (100.0, "ctxrag: embedding: 10 of 10 texts (100%)")
    ]
