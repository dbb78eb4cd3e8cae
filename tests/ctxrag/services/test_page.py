"""The search page's paths of ``ctxrag serve-search`` (the app in this process, asked with Starlette's test client):
the page and its files without a token and without data; ``/lines`` and ``/evaluation`` private, their answers the
index's own, every bad input one error object. The page in a real browser: tests/ctxrag/services/test_page_browser.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from ctxrag.services.http_server import build_app
from ctxrag.services.warm import WarmIndexes
from ctxrag.tasks.common.strategies import Strategy
from ctxrag.tasks.evaluation.report import write_chart, write_run
from ctxrag.tasks.evaluation.runs import run_folder
from tests.helpers import SAMPLE_CORPUS

TOKEN = "a-page-test-token-of-some-length"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
METRICS = {"bm25": {"pass@5": 0.5, "pass@10": 0.75}, "hybrid-score": {"pass@5": 0.625, "pass@10": 0.875}}


@pytest.fixture(scope="module")
def home(sample_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sample index's home (a test adds an evaluation run to it)."""
    copy = tmp_path_factory.mktemp("page") / "home"
    shutil.copytree(sample_home, copy)
    return copy


@pytest.fixture(scope="module")
def client(home: Path) -> Iterator[TestClient]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CTXRAG_HOME", str(home))
        warm = WarmIndexes(home)
        with TestClient(build_app(warm, "sample", TOKEN)) as client:
            yield client
        warm._thread.shutdown()


def error_of(answer: object) -> tuple[int, str, str]:
    body = answer.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"} and set(body["error"]) == {"kind", "message"}, body
    return answer.status_code, body["error"]["kind"], body["error"]["message"]  # type: ignore[attr-defined]


def test_the_page_and_its_files_need_no_token_and_hold_no_data(client: TestClient, home: Path) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    for strategy in Strategy:
        assert f'<option value="{strategy.value}">' in page.text
    token_file = (home / "search-token").read_text().strip() if (home / "search-token").exists() else TOKEN
    assert TOKEN not in page.text and token_file not in page.text and "tinyq" not in page.text
    for path, kind in (("/page.js", "text/javascript"), ("/page.css", "text/css")):
        answer = client.get(path)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind), path
        assert answer.headers["x-content-type-options"] == "nosniff"
    script = client.get("/page.js").text
    assert "innerHTML" not in script and "outerHTML" not in script and "insertAdjacentHTML" not in script
    assert "http://" not in script and "https://" not in script  # nothing fetched from elsewhere
    for method in ("POST", "HEAD", "OPTIONS"):  # only GET of the page is open
        answer = client.request(method, "/")
        assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer", method


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/indexes"),
        ("GET", "/lines?source=tinyq/retry.py"),
        ("GET", "/evaluation"),
        ("GET", "/evaluation/chart?run=x"),
        ("POST", "/search"),
        ("GET", "/page.js/../indexes"),
    ],
)
def test_every_data_path_needs_the_token(client: TestClient, method: str, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token-of-some-length"}):
        assert error_of(client.request(method, path, headers=headers))[:2] == (401, "unauthorized")


def test_lines_are_the_file_s_as_the_index_holds_it(client: TestClient) -> None:
    on_disk = Path(SAMPLE_CORPUS, "tinyq/retry.py").read_text().splitlines()
    answer = client.get("/lines", params={"source": "tinyq/retry.py", "first": 2, "last": 4}, headers=AUTH).json()
    version = client.get("/indexes", headers=AUTH).json()["indexes"][0]["version"]
    assert answer == {
        "index": "sample",
        "version": version,
        "source": "tinyq/retry.py",
        "first": 2,
        "last": 4,
        "total": len(on_disk),
        "lines": [{"line": number, "text": on_disk[number - 1]} for number in (2, 3, 4)],
    }
    whole = client.get("/lines", params={"index": "sample", "source": "docs/guide.md"}, headers=AUTH).json()
    assert [line["text"] for line in whole["lines"]] == Path(SAMPLE_CORPUS, "docs/guide.md").read_text().splitlines()


@pytest.mark.parametrize(
    ("query", "status", "kind", "says"),
    [
        ("source=tinyq/retry.py&frist=2", 400, "invalid_request", "unknown parameter 'frist' (did you mean first?)"),
        ("source=tinyq/retry.py&first=1&first=2", 400, "invalid_request", "first is given 2 times"),
        ("source=tinyq/retry.py&first=two", 400, "invalid_request", "first must be a whole number from 1, got 'two'"),
        ("source=tinyq/retry.py&first=0", 400, "invalid_request", "first must be a whole number from 1"),
        ("source=tinyq/retry.py&last=-3", 400, "invalid_request", "last must be a whole number from 1"),
        ("source=tinyq/retry.py&first=9&last=3", 400, "invalid_request", "give 1 <= first <= last"),
        ("source=tinyq/retry.py&first=5000", 400, "invalid_request", "tinyq/retry.py has 60 lines"),
        ("first=1", 400, "invalid_request", "source: give a hit's source"),
        ("source=" + "x" * 1_001, 400, "invalid_request", "source: give a hit's source, 1 to 1,000 characters"),
        ("source=no/such.py", 404, "not_found", "the index has no source 'no/such.py'"),
        ("source=x&index=nowhere", 404, "unknown_index", "no index named 'nowhere'"),
        ("source=x&index=Bad!Name", 400, "invalid_request", "invalid index name 'Bad!Name'"),
    ],
)
def test_each_bad_request_for_lines_is_one_error_object(
    client: TestClient, query: str, status: int, kind: str, says: str
) -> None:
    found = error_of(client.get(f"/lines?{query}", headers=AUTH))
    assert found[:2] == (status, kind) and says in found[2], found
    assert client.get("/lines?source=README.md&last=1", headers=AUTH).status_code == 200  # and it answers after


def test_the_evaluation_is_null_until_a_run_then_the_latest_with_its_chart(client: TestClient, home: Path) -> None:
    assert client.get("/evaluation", headers=AUTH).json() == {"index": "sample", "run": None}
    assert error_of(client.get("/evaluation?index=nowhere", headers=AUTH))[:2] == (404, "unknown_index")
    assert "unknown parameter 'name'" in error_of(client.get("/evaluation?name=sample", headers=AUTH))[2]
    folder = run_folder(home, "sample")
    config = {"index": "sample", "index_manifest": {"version": "v1"}, "evalset": "/q/questions.jsonl", "format": "jsonl",
              "ks": [5, 10], "index_strategy": "hybrid-score"}  # fmt: skip
    write_run(folder, config, METRICS, pa.table({"query_id": ["q1"]}))
    write_chart(METRICS, folder / "chart.svg", "sample: questions.jsonl")
    run = client.get("/evaluation", headers=AUTH).json()["run"]
    assert run["run"] == folder.name and run["version"] == "v1" and run["chart"] is True
    assert run["metrics"] == [{"strategy": name, **values} for name, values in METRICS.items()]
    chart = client.get("/evaluation/chart", params={"run": folder.name}, headers=AUTH)
    assert chart.status_code == 200 and chart.headers["content-type"] == "image/svg+xml"
    assert (
        chart.content == (folder / "chart.svg").read_bytes()
        and "default-src 'none'" in chart.headers["content-security-policy"]
    )
    for wrong in ("../../search-token", folder.name.replace("sample", "other"), "evaluate-sample-1-1"):
        assert error_of(client.get("/evaluation/chart", params={"run": wrong}, headers=AUTH))[:2] == (404, "not_found")


def test_the_index_list_names_the_default_and_an_unknown_path_names_the_page_s(client: TestClient) -> None:
    assert client.get("/indexes", headers=AUTH).json()["default"] == "sample"
    message = error_of(client.get("/nowhere", headers=AUTH))[2]
    assert "/ (the search page)" in message and "/lines" in message and "/evaluation" in message
    schema = client.get("/openapi.json", headers=AUTH).json()
    assert {"/lines", "/evaluation", "/evaluation/chart"} <= set(schema["paths"]) and "/" not in schema["paths"]
    parameters = {item["name"]: item for item in schema["paths"]["/lines"]["get"]["parameters"]}
    assert set(parameters) == {"index", "source", "first", "last"} and parameters["source"]["required"] is True
