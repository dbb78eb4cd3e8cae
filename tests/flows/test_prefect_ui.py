"""The Prefect UI (headless Chromium) shows a ctxrag run and its artifact; skipped where Chromium or Playwright is missing.

Uses the session's real Prefect server. A completed ``ctxrag-index`` run with its ``ctxrag-index-<name>`` artifact is
taken from the acceptance test when it ran first, else made here by running the flow against the server.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.equipment.browser import browser_missing, page_text
from tests.helpers import REPO, SAMPLE_CORPUS

if TYPE_CHECKING:
    from tests.equipment.prefect_server import PrefectServer

pytestmark = pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))


def completed_index_run(server: PrefectServer) -> tuple[str, str, str] | None:
    """(flow run id, flow run name, artifact key) of a completed ctxrag-index run that has its artifact."""
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType

    with SyncPrefectClient(server.api_url) as client:
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["ctxrag-index"])),
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.COMPLETED]))),
        )
        for run in runs:
            keys = [artifact.key for artifact in client.read_artifacts() if artifact.flow_run_id == run.id and artifact.key]
            for key in keys:
                if key.startswith("ctxrag-index-"):
                    return str(run.id), run.name, key
    return None


@pytest.fixture(scope="module")
def index_run(prefect_server: PrefectServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    found = completed_index_run(prefect_server)
    if found is None:
        home = tmp_path_factory.mktemp("ui") / "home"
        code = f"from flows.index import index_corpus; index_corpus(source={str(SAMPLE_CORPUS)!r}, name='ui')"
        result = subprocess.run(
            [sys.executable, "-c", code], env=prefect_server.env(CTXRAG_HOME=str(home)), cwd=REPO,
            capture_output=True, text=True, timeout=180,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        found = completed_index_run(prefect_server)
    assert found is not None
    return found


def test_flow_run_page_shows_the_completed_ctxrag_run(prefect_server: PrefectServer, index_run: tuple[str, str, str]) -> None:
    run_id, run_name, _ = index_run
    text = page_text(f"{prefect_server.ui_url}/runs/flow-run/{run_id}", run_name, "Completed", "ctxrag-index")
    assert run_name in text, text[:2000]
    assert "Completed" in text and "ctxrag-index" in text, text[:2000]


def test_artifact_page_shows_the_index_artifact_and_its_run(prefect_server: PrefectServer, index_run: tuple[str, str, str]) -> None:
    _, run_name, key = index_run
    text = page_text(f"{prefect_server.ui_url}/artifacts/key/{key}", key, run_name)
    assert key in text, text[:2000]
    assert "ctxrag index run for" in text and run_name in text, text[:2000]
