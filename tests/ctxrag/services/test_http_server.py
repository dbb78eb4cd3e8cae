"""``ctxrag serve-search`` as a program sees it: a real subprocess on a free port, asked over HTTP with httpx."""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import jsonschema
import pytest

from ctxrag.service_commands import DEFAULT_PORT
from ctxrag.tasks.common.hits import ANSWER_SCHEMA
from ctxrag.tasks.common.search_request import request_schema
from tests.ctxrag.services.conftest import CTXRAG, publish, service_env
from tests.ctxrag.services.test_mcp_server import BAD_INPUT
from tests.helpers import REPO, copy_home
from tests.test_readme import readme_blocks

pytestmark = pytest.mark.slow
# A search can take seconds on a loaded machine (the first loads the model): httpx's 5 s default would fail it.
post, get, request = (functools.partial(call, timeout=60) for call in (httpx.post, httpx.get, httpx.request))
GOOD = {"query": "retry backoff delay", "k": 2}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def started(home: Path, *options: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """``ctxrag serve-search --name sample OPTIONS`` on a free port of 127.0.0.1, up; its base URL and the start line
    it printed. Stopped after."""
    port = free_port()
    process = subprocess.Popen(
        [*CTXRAG, "serve-search", "--name", "sample", "--port", str(port), *options],
        env=env or service_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, f"serve-search ended: {process.stderr.read() if process.stderr else ''}"
            try:
                if httpx.get(f"{url}/health", timeout=2, headers=_auth(env)).status_code in (200, 401):
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve-search did not answer in 120 s"
            time.sleep(0.3)
        yield url, process.stderr.readline() if process.stderr else ""
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def serving(home: Path, *options: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """As ``started``, its base URL; open to every local user (``--no-token``) unless the test gives a token
    (``CTXRAG_SEARCH_TOKEN`` or ``--token-file``). The default, a token in the home, is test_token.py's."""
    given = "--token-file" in options or "CTXRAG_SEARCH_TOKEN" in (env or {})
    with started(home, *options, *([] if given else ["--no-token"]), env=env) as (url, _):
        yield url


def _auth(env: dict[str, str] | None) -> dict[str, str]:
    token = (env or {}).get("CTXRAG_SEARCH_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def test_search_returns_json_hits_with_filters_and_the_schema_and_index_list(sample_home: Path) -> None:
    with serving(sample_home) as url:
        found = post(f"{url}/search", json={**GOOD, "k": 3}).json()
        assert found["index"] == "sample" and [hit["rank"] for hit in found["hits"]] == [1, 2, 3]
        assert {"source", "location", "language", "score", "content"} <= set(found["hits"][0])
        jsonschema.validate(found, ANSWER_SCHEMA)
        python = post(f"{url}/search", json={**GOOD, "k": 5, "language": "python"}).json()
        assert python["hits"] and {hit["language"] for hit in python["hits"]} == {"python"}
        tests = post(f"{url}/search", json={**GOOD, "k": 5, "path": "*.py"}).json()
        assert tests["hits"] and all(hit["source"].endswith(".py") for hit in tests["hits"])
        schema = get(f"{url}/openapi.json").json()
        assert {"/search", "/indexes"} <= set(schema["paths"])
        body = schema["paths"]["/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == request_schema()  # the contract's, published as it is
        answered = schema["paths"]["/search"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert answered == ANSWER_SCHEMA
        assert [entry["name"] for entry in get(f"{url}/indexes").json()["indexes"]] == ["sample"]


def test_each_bad_input_is_a_4xx_json_error_and_the_service_answers_after_it(sample_home: Path) -> None:
    bodies = [(arguments, says) for arguments, says in BAD_INPUT]
    with serving(sample_home) as url:
        for arguments, says in bodies:
            answer = post(f"{url}/search", json=arguments)
            assert 400 <= answer.status_code < 500 and says in answer.json()["error"]["message"], (
                arguments,
                answer.text,
            )
            assert len(post(f"{url}/search", json=GOOD).json()["hits"]) == 2, f"no answer after {arguments}"
        assert post(f"{url}/search", json={"query": "retry", "index": "no-such-index"}).status_code == 404
        for raw, says in (
            (b"not json", "the request body is not JSON"),
            (b"[1, 2]", "a search request is an object of fields"),
            (b"", "the request body must be a JSON object"),
            (b'{"query": "x", "k": 1.5}', "k must be a whole number"),
        ):
            answer = post(f"{url}/search", content=raw, headers={"content-type": "application/json"})
            assert answer.status_code == 400 and answer.json()["error"]["kind"] == "invalid_request", answer.text
            assert answer.json()["error"]["message"].startswith(says), answer.text
        huge = post(f"{url}/search", json={"query": "x" * 100_000})
        assert huge.status_code == 413 and huge.json()["error"]["kind"] == "too_large"
        assert len(post(f"{url}/search", json=GOOD).json()["hits"]) == 2


def test_every_error_is_the_documented_object_and_a_body_needs_no_content_type(sample_home: Path) -> None:
    with serving(sample_home) as url:
        for method, path, status, kind in (
            ("GET", "/nowhere", 404, "not_found"),
            ("GET", "/search", 405, "method_not_allowed"),
            ("DELETE", "/indexes", 405, "method_not_allowed"),
        ):
            answer = request(method, f"{url}{path}")
            assert answer.status_code == status and set(answer.json()) == {"error"}, answer.text
            assert answer.json()["error"]["kind"] == kind and answer.json()["error"]["message"]
        # curl -d '{...}' sends no JSON content type (application/x-www-form-urlencoded): the body is still read
        plain = post(f"{url}/search", content=b'{"query": "retry backoff delay", "k": 2}')
        assert plain.status_code == 200 and len(plain.json()["hits"]) == 2
        form = post(
            f"{url}/search",
            content=b'{"query": "retry backoff delay", "k": 2}',
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert form.status_code == 200 and len(form.json()["hits"]) == 2


def test_a_promoted_version_is_searched_without_a_restart(changing_home: tuple[Path, Path]) -> None:
    home, corpus = changing_home
    word = "zanzibarquux"
    with serving(home) as url:
        before = post(f"{url}/search", json={"query": word, "k": 1, "strategy": "bm25"}).json()
        (corpus / "README.md").write_text((corpus / "README.md").read_text() + f"\n\n## Islands\n\nThe {word} queue.\n")
        version = publish(corpus, home)
        after = post(f"{url}/search", json={"query": word, "k": 1, "strategy": "bm25"}).json()
    assert after["version"] == version != before["version"]
    assert word in after["hits"][0]["content"] and after["hits"][0]["source"] == "README.md"


def test_a_token_is_required_on_every_path_when_one_is_set(sample_home: Path) -> None:
    env = {**service_env(sample_home), "CTXRAG_SEARCH_TOKEN": "a-test-token-of-some-length"}
    with serving(sample_home, env=env) as url:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-of-some-length"},
            {"Authorization": "Basic a-test-token-of-some-length"},
        ):
            refused = post(f"{url}/search", json=GOOD, headers=headers)
            assert refused.status_code == 401 and refused.json()["error"]["kind"] == "unauthorized"
            assert get(f"{url}/openapi.json", headers=headers).status_code == 401
        assert len(post(f"{url}/search", json=GOOD, headers=_auth(env)).json()["hits"]) == 2


def test_a_token_file_is_made_private_and_one_others_can_read_is_refused(sample_home: Path, tmp_path: Path) -> None:
    env = service_env(sample_home)
    env.pop("CTXRAG_SEARCH_TOKEN", None)
    token_file = tmp_path / "token"
    with serving(sample_home, "--token-file", str(token_file), env=env) as url:
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert post(f"{url}/search", json=GOOD).status_code == 401
        assert post(f"{url}/search", json=GOOD, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    os.chmod(token_file, 0o644)
    shared = subprocess.run(
        [*CTXRAG, "serve-search", "--token-file", str(token_file), "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shared.returncode == 2 and "can be read by others" in shared.stderr and token not in shared.stderr


def test_the_docs_serve_search_block_runs_as_pasted_with_curl(sample_home: Path, tmp_path: Path) -> None:
    """docs/cli.md's block that starts the service and asks it with curl, run by bash as written where the README's
    ``ctxrag index data/sample/corpus --name sample`` left its home (``./.ctxrag``): the default port, the token the
    service makes on first use, the real curl; its last line stops the service."""
    blocks = readme_blocks((REPO / "docs" / "cli.md").read_text(encoding="utf-8"), "docs/cli.md")
    (block,) = [block for block in blocks if "ctxrag serve-search" in block.code and "curl" in block.code]
    bin_folder = Path(sys.executable).parent
    for tool, found in (
        ("bash", shutil.which("bash")),
        ("curl", shutil.which("curl")),
        ("ctxrag", shutil.which("ctxrag", path=str(bin_folder))),
    ):
        if found is None:
            pytest.skip(f"docs/cli.md line {block.line} runs {tool}, which this machine (or {bin_folder}) lacks")
    if _listening(DEFAULT_PORT):
        pytest.skip(f"docs/cli.md line {block.line} serves on port {DEFAULT_PORT}, which another program holds here")
    folder = tmp_path / "checkout"
    copy_home(sample_home, folder / ".ctxrag")
    env = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
    for variable in ("CTXRAG_HOME", "CTXRAG_SEARCH_TOKEN"):
        env.pop(variable, None)
    done = subprocess.run(["bash", "-c", block.code], cwd=folder, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["index"] == "sample" and len(answer["hits"]) == 3, done.stdout[:500]
    assert "retry.py" in answer["hits"][0]["source"]
    deadline = time.monotonic() + 30
    while _listening(DEFAULT_PORT):  # its `kill $!` stopped it
        assert time.monotonic() < deadline, f"the service of docs/cli.md line {block.line} still listens"
        time.sleep(0.2)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
