"""Acceptance: a real Prefect server, prefect.yaml deployed on a process work pool, a worker, runs triggered from the CLI.

One server for the session (``tests/equipment/prefect_server.py``, fixture ``prefect_server`` in tests/flows/conftest.py);
every wait is bounded. The worker starts outside the project folder, so a completed run also proves the deployment's
pull step moved it there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

import pytest
from prefect.exceptions import ObjectNotFound

from tests.equipment.prefect_server import stop_group
from tests.helpers import REPO, shadowing_folder

if TYPE_CHECKING:
    from tests.equipment.prefect_server import PrefectServer

POOL = "ctxrag-process"


def ctxrag(
    server: PrefectServer, home: Path, *args: str, timeout: float = 120, cwd: Path = REPO, **env_extra: str
) -> subprocess.CompletedProcess[str]:
    """The ``ctxrag`` command as a user runs it, pointed at the test server."""
    env = server.env(CTXRAG_HOME=str(home), COLUMNS="200", **env_extra)
    command = [sys.executable, "-c", "from ctxrag.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def api(server: PrefectServer):  # type: ignore[no-untyped-def]
    """A sync Prefect client for the test server (this process's own Prefect settings are left alone)."""
    from prefect.client.orchestration import SyncPrefectClient

    return SyncPrefectClient(server.api_url)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prefect-server") / "ctxrag-home"


@pytest.fixture(scope="module")
def deployed(prefect_server: PrefectServer, home: Path) -> dict[str, str]:
    """`ctxrag deploy`: creates the process work pool, then `prefect --no-prompt deploy --all` from prefect.yaml."""
    result = ctxrag(prefect_server, home, "deploy")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "prefect --no-prompt deploy --all" in result.stderr
    lines = dict(line.split("\t") for line in result.stdout.splitlines())
    assert set(lines) == {"ctxrag-index/reindex", "ctxrag-evaluate/evaluate"}, result.stdout
    return lines


@pytest.fixture(scope="module")
def worker(
    prefect_server: PrefectServer, home: Path, deployed: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """`prefect worker start --pool ctxrag-process`, started outside the project folder; stopped afterwards."""
    elsewhere = tmp_path_factory.mktemp("worker-cwd")
    log = elsewhere / "worker.log"
    env = prefect_server.env(
        CTXRAG_HOME=str(home), PREFECT_WORKER_QUERY_SECONDS="1", PREFECT_WORKER_PREFETCH_SECONDS="5"
    )
    command = [
        str(Path(sys.executable).with_name("prefect")),
        "worker",
        "start",
        "--pool",
        POOL,
        "--name",
        "ctxrag-test-worker",
    ]
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, env=env, cwd=elsewhere, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield log
    finally:
        stop_group(process)


def test_deploy_creates_the_process_pool_and_both_deployments(
    prefect_server: PrefectServer, deployed: dict[str, str]
) -> None:
    with api(prefect_server) as client:
        pool = client.read_work_pool(POOL)
        assert pool.type == "process"
        assert "env" in pool.base_job_template["variables"]["properties"]  # Prefect's default process job template
        reindex = client.read_deployment(UUID(deployed["ctxrag-index/reindex"]))
        evaluation = client.read_deployment(UUID(deployed["ctxrag-evaluate/evaluate"]))
    assert reindex.work_pool_name == evaluation.work_pool_name == POOL
    assert reindex.entrypoint == "flows/index.py:index_corpus"
    assert evaluation.entrypoint == "flows/evaluate.py:evaluate_index"
    # the pull step runs flows from this checkout, whatever folder the worker started in
    assert reindex.pull_steps == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(REPO.resolve())}}
    ]
    assert [schedule.schedule.cron for schedule in reindex.schedules] == ["0 3 * * *"]
    assert set(reindex.parameters) == {"source", "name", "options"}
    assert reindex.parameters["source"] == "data/sample/corpus"
    assert evaluation.parameters == {"evalset": "data/sample/questions.jsonl", "name": "default"}


def test_deploy_works_from_a_folder_with_its_own_tasks_storage_and_flows(
    prefect_server: PrefectServer, home: Path, deployed: dict[str, str], tmp_path: Path
) -> None:
    user = shadowing_folder(tmp_path / "user")  # first on sys.path here, as a user's project folder is
    result = ctxrag(prefect_server, home, "deploy", cwd=user, PYTHONPATH=str(user))
    assert result.returncode == 0, result.stderr[-3000:]
    assert dict(line.split("\t") for line in result.stdout.splitlines()) == deployed  # the same deployments, updated
    with api(prefect_server) as client:
        assert (
            client.read_deployment(UUID(deployed["ctxrag-index/reindex"])).entrypoint == "flows/index.py:index_corpus"
        )


def test_trigger_reindex_runs_on_the_worker_and_publishes_its_artifact(
    prefect_server: PrefectServer, home: Path, worker: Path
) -> None:
    started = time.monotonic()
    result = ctxrag(
        prefect_server,
        home,
        "trigger",
        "ctxrag-index/reindex",
        "--param",
        "name=sample",
        "--param",
        "source=data/sample/corpus",
        "--param",
        "options.embedding.max_seq_length=256",
        "--watch",
        "--timeout",
        "100",
        "--json",
        timeout=130,
    )
    assert result.returncode == 0, f"{result.stderr[-3000:]}\nworker log:\n{worker.read_text()[-3000:]}"
    run = json.loads(result.stdout)  # stdout is exactly one JSON object; progress went to stderr
    assert run["state"] == "COMPLETED", run
    assert (
        run["parameters"]["name"] == "sample" and run["parameters"]["options"]["embedding"]["max_seq_length"] == 256
    )  # a JSON number
    assert run["parameters"]["options"]["contextualizer"] == "structural"  # the deployment's other options kept
    assert "created flow run" in result.stderr and "Completed" in result.stderr
    assert (
        "ctxrag-index-sample:" in result.stderr and "item=seconds.embed" in result.stderr
    )  # --watch shows the summary
    assert re.search(r"item=seconds\.embed  value=\d+(\.\d)?\n", result.stderr), result.stderr  # seconds to 0.1 s
    assert "value=None" not in result.stderr
    assert time.monotonic() - started < 110

    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with api(prefect_server) as client:
        flow_run = client.read_flow_run(UUID(run["id"]))
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run.id]))
        )
    assert flow_run.state is not None and flow_run.state.is_completed()
    assert flow_run.work_queue_name == "default"
    table = {artifact.key: artifact for artifact in artifacts}
    assert "ctxrag-index-sample" in table, sorted(str(key) for key in table)
    assert table["ctxrag-index-sample"].type == "table"
    assert table["ctxrag-index-sample"].data  # the run's summary rows
    # the worker's CTXRAG_HOME got the index; nothing was written in the worker's own folder
    assert (home / "indexes" / "sample").is_dir()
    assert not (worker.parent / "data").exists()


def test_trigger_watch_exits_nonzero_when_the_run_fails(
    prefect_server: PrefectServer, home: Path, worker: Path
) -> None:
    result = ctxrag(
        prefect_server,
        home,
        "trigger",
        "ctxrag-index/reindex",
        "--param",
        "name=broken",
        "--param",
        "source=no/such/folder",
        "--watch",
        "--timeout",
        "60",
        timeout=90,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    run_id, state = result.stdout.strip().split("\t")
    assert state == "FAILED"
    assert "no/such/folder" in result.stderr  # the flow's own message, one line
    with api(prefect_server) as client:
        flow_run = client.read_flow_run(UUID(run_id))
    assert flow_run.state is not None and flow_run.state.is_failed()


def test_trigger_names_what_is_wrong_without_a_traceback(prefect_server: PrefectServer, home: Path) -> None:
    missing = ctxrag(prefect_server, home, "trigger", "ctxrag-index/nope")
    assert missing.returncode == 2
    assert "no deployment 'ctxrag-index/nope'" in missing.stderr and "Traceback" not in missing.stderr
    bad = ctxrag(prefect_server, home, "trigger", "ctxrag-index/reindex", "--param", "name")
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr and "Traceback" not in bad.stderr
    unknown = ctxrag(prefect_server, home, "trigger", "ctxrag-index/reindex", "--param", "nmae=sample")
    assert unknown.returncode == 2 and "has no parameter 'nmae'" in unknown.stderr and "source" in unknown.stderr
    wrong_type = ctxrag(
        prefect_server, home, "trigger", "ctxrag-index/reindex", "--param", "options.embedding.max_seq_length=many"
    )
    assert (
        wrong_type.returncode == 2
        and "the server refused the run" in wrong_type.stderr
        and "max_seq_length" in wrong_type.stderr
    )


def test_serve_runs_the_flows_from_one_process(
    prefect_server: PrefectServer, home: Path, deployed: dict[str, str], tmp_path: Path
) -> None:
    """`ctxrag serve` (no work pool): refuses while the pool deployments exist; then serves both, scheduled, triggerable."""
    refused = ctxrag(prefect_server, home, "serve", "--name", "served")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "'ctxrag-index/reindex' is on work pool 'ctxrag-process'" in refused.stderr  # a worker would run them too
    with api(prefect_server) as client:
        for full_name in ("ctxrag-index/reindex", "ctxrag-evaluate/evaluate"):
            client.delete_deployment(client.read_deployment_by_name(full_name).id)

    log = tmp_path / "serve.log"
    env = prefect_server.env(CTXRAG_HOME=str(home), COLUMNS="200", PREFECT_RUNNER_POLL_FREQUENCY="1")
    command = [
        sys.executable,
        "-c",
        "from ctxrag.cli import main; main()",
        "serve",
        "--name",
        "served",
        "--cron",
        "30 2 * * *",
    ]
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, env=env, cwd=REPO, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        with api(prefect_server) as client:
            deadline = time.monotonic() + 60
            while True:
                try:  # serve registers them one after the other
                    reindex = client.read_deployment_by_name("ctxrag-index/reindex")
                    evaluation = client.read_deployment_by_name("ctxrag-evaluate/evaluate")
                    break
                except ObjectNotFound:  # not registered yet
                    pass
                assert process.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "ctxrag serve did not register its deployments within 60 s"
                time.sleep(0.5)
        assert reindex.work_pool_name is None and [schedule.schedule.cron for schedule in reindex.schedules] == [
            "30 2 * * *"
        ]
        assert reindex.parameters["source"] == str(REPO / "data" / "sample" / "corpus")  # made absolute by serve
        assert evaluation.parameters["name"] == "served" and evaluation.work_pool_name is None
        result = ctxrag(
            prefect_server,
            home,
            "trigger",
            "ctxrag-index/reindex",
            "--watch",
            "--timeout",
            "100",
            "--json",
            timeout=130,
        )
        assert result.returncode == 0, f"{result.stderr[-3000:]}\nserve log:\n{log.read_text()[-3000:]}"
        run = json.loads(result.stdout)
        assert run["state"] == "COMPLETED" and run["parameters"]["name"] == "served"
        assert (home / "indexes" / "served").is_dir()
    finally:
        stop_group(process, wait_seconds=20)
