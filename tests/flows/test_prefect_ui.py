"""The Prefect UI (headless Chromium) shows a whole ``ctxrag index`` run on the local server ctxrag starts, as a new
user sees it: the run, its task runs by name, their logs, and its artifact. Skipped where Chromium or Playwright is
missing. The server is started by ``ctxrag index`` itself (no PREFECT_API_URL, a private PREFECT_HOME) and stopped
afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.equipment.browser import browser_missing, page_text
from tests.equipment.local_server import ctxrag_as_user, home_auth, post_as_owner, recorded_server, stopped_afterwards
from tests.helpers import SAMPLE_CORPUS

pytestmark = [
    pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing())),
    pytest.mark.browser,
    pytest.mark.server,  # ctxrag's local Prefect server, started by `ctxrag index`
]

STAGES = ("load_corpus", "contextualize-1-of-1", "publish_index")


@dataclass(frozen=True)
class IndexRun:
    ui_url: str
    api_url: str
    run_id: str
    run_name: str
    auth: str  # the UI's login: what the user pastes from PREFECT_HOME/ctxrag-api-auth-string

    def post(self, path: str, body: dict) -> list[dict]:
        from tests.equipment.local_server import api_call

        status, answer = api_call(self.api_url, path, body, self.auth)
        assert status == 200, f"POST {path}: HTTP {status}"
        return answer  # type: ignore[return-value]


@pytest.fixture(scope="module")
def index_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexRun]:
    base = tmp_path_factory.mktemp("ui")
    with stopped_afterwards(base / "prefect") as prefect_home:
        result = ctxrag_as_user(base / "home", prefect_home, "index", str(SAMPLE_CORPUS), "--name", "ui")
        assert result.returncode == 0, result.stderr[-3000:]
        api_url = recorded_server(prefect_home)["api_url"]
        (run,) = post_as_owner(
            prefect_home, api_url, "/flow_runs/filter", {"flows": {"name": {"any_": ["ctxrag-index"]}}}
        )
        yield IndexRun(api_url.removesuffix("/api"), api_url, run["id"], run["name"], home_auth(prefect_home))


def test_the_run_has_its_task_runs_and_their_logs(index_run: IndexRun) -> None:
    task_runs = index_run.post("/task_runs/filter", {"flow_runs": {"id": {"any_": [index_run.run_id]}}})
    names = {name for run in task_runs for name in (run["name"], run["name"].rsplit("-", 1)[0])}  # load_corpus-<id>
    assert set(STAGES) <= names, names
    assert all(run["state_type"] == "COMPLETED" and run["total_run_time"] is not None for run in task_runs)
    logs = index_run.post("/logs/filter", {"logs": {"flow_run_id": {"any_": [index_run.run_id]}}})
    tagged = {log["task_run_id"] for log in logs} - {None}
    assert tagged <= {run["id"] for run in task_runs} and tagged, "no log line names its task run"


def test_flow_run_page_lists_the_task_runs(index_run: IndexRun) -> None:
    url = f"{index_run.ui_url}/runs/flow-run/{index_run.run_id}?tab=Task%20Runs"
    text = page_text(url, index_run.run_name, *STAGES, auth_string=index_run.auth)
    assert index_run.run_name in text and "Completed" in text, text[:2000]
    assert all(stage in text for stage in STAGES), text[:3000]


def test_artifact_page_shows_the_index_artifact_and_its_run(index_run: IndexRun) -> None:
    text = page_text(
        f"{index_run.ui_url}/artifacts/key/ctxrag-index-ui",
        "ctxrag-index-ui",
        index_run.run_name,
        auth_string=index_run.auth,
    )
    assert "ctxrag index run for" in text and index_run.run_name in text, text[:2000]
