"""Fixtures used across test folders: a private CTXRAG_HOME/PREFECT_HOME, telemetry off, one Prefect harness per session,
the API simulators and the Elasticsearch emulator (test equipment in tests/equipment/); the session fails if a Prefect
server a test started is still running at its end.

Markers (registered in pyproject.toml): ``server`` for a test that starts a real Prefect server or worker, ``browser``
for headless Chromium, ``slow`` for any test of more than about 2 s. A test using the ``prefect_harness`` or
``prefect_server`` fixture is marked ``server`` here, and every ``server`` or ``browser`` test is also ``slow``, so
``-m "not slow"`` is the quick loop.

Under pytest-xdist (``-n 3`` in pyproject.toml's addopts) every worker imports this file and gets its own session home
inside the controller's, so session fixtures run once per worker and the leftover-server check, run once by the
controller after every worker ended, covers them all. tests/equipment/parallel.py says how tests are shared out.

Folder-local fixtures are in that folder's conftest.py; non-fixture helpers (paths, keys, corpora) in tests/helpers.py.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # set by pytest-xdist in a worker before it imports this file
_CONTROLLER_HOME = os.environ.get("CTXRAG_TESTS_SESSION_HOME") if _WORKER else None
if _CONTROLLER_HOME:  # an xdist worker: its home inside the controller's, so the controller's check finds its servers
    _SESSION_HOME = Path(tempfile.mkdtemp(prefix=f"{_WORKER}-", dir=_CONTROLLER_HOME))
else:
    _SESSION_HOME = Path(tempfile.mkdtemp(prefix="ctxrag-tests-"))
    os.environ["CTXRAG_TESTS_SESSION_HOME"] = str(_SESSION_HOME)  # read by the xdist workers this process starts
    # The session home, every test's files in it, goes when the session's process ends: after the exit hooks of what
    # was registered later (Prefect's test harness removes its own folder in one), as atexit runs them last first.
    atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)
# Every temporary folder of the session (pytest's tmp_path, tempfile, subprocesses) is inside the session home, so a
# Prefect server whose PREFECT_HOME lies in it was started by this session and by no other.
(_SESSION_HOME / "tmp").mkdir()
os.environ["TMPDIR"] = str(_SESSION_HOME / "tmp")
tempfile.tempdir = None  # read TMPDIR again
os.environ["CTXRAG_HOME"] = str(_SESSION_HOME / "ctxrag")
os.environ["PREFECT_HOME"] = str(_SESSION_HOME / "prefect")
os.environ.pop("PREFECT_API_URL", None)
# A CLI subprocess with no server configured uses Prefect's temporary server, so no test leaves a background server
# behind; tests/ctxrag/prefect_commands/test_local_server.py sets "background" for its own commands.
os.environ["CTXRAG_PREFECT_SERVER"] = "temporary"
# A local server a test starts takes a free port, not Prefect's 4200: tests on several xdist workers never race for it.
os.environ["PREFECT_SERVER_API_PORT"] = "0"
# No resident search process outlives a test's `ctxrag search`: tests/ctxrag/services/test_resident.py turns it on.
os.environ["CTXRAG_SEARCH_IDLE_MINUTES"] = "0"
# What ctxrag makes once per machine (the ONNX exports, the precision decision, the server's database template): made
# once per test session, by the first worker that needs it while the others wait (ctxrag.storage.locks); the
# ``sample_index`` fixture's home, likewise.
_MACHINE = Path(_CONTROLLER_HOME) if _CONTROLLER_HOME else _SESSION_HOME
os.environ["CTXRAG_MODELS_DIR"] = str(_MACHINE / "models")
os.environ["CTXRAG_CACHE_DIR"] = str(_MACHINE / "cache")
os.environ["DO_NOT_TRACK"] = "1"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from tests.equipment.local_server import kill_group, leftover_servers  # noqa: E402
from tests.helpers import ANTHROPIC_TEST_KEY  # noqa: E402

SERVER_FIXTURES = (
    "prefect_harness",
    "prefect_server",
)  # a real Prefect server: the session's test harness, or `prefect server start`


@pytest.hookimpl(tryfirst=True)  # before pytest's -m selection and xdist's own hook
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``server`` on every test using a server fixture, ``slow`` on every ``server`` or ``browser`` test; under
    xdist, the heaviest files first (tests/equipment/parallel.py)."""
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in SERVER_FIXTURES):
            item.add_marker(pytest.mark.server)
        if item.get_closest_marker("server") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
    if _WORKER:
        from tests.equipment.parallel import heaviest_units_first

        items[:] = heaviest_units_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    from tests.equipment.parallel import FileScheduling

    return FileScheduling(config, log)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite fails if a Prefect server this session started (its PREFECT_HOME in the session home) still runs;
    it is killed, and named. Under xdist the controller checks, once every worker has ended: a worker's own
    exit status would not fail the run."""
    if _CONTROLLER_HOME:
        return
    leftovers = leftover_servers(_SESSION_HOME)
    for pid in leftovers:
        kill_group(pid)
    if leftovers:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "Prefect servers left running by the tests (now killed): " + ", ".join(
            f"pid {pid} (PREFECT_HOME {home})" for pid, home in sorted(leftovers.items())
        )
        if reporter is not None:
            reporter.write("\n")
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API for every flow test (start-up allowed 60 s on slow machines)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=60):
        yield


@pytest.fixture(scope="session")
def sample_index(prefect_harness) -> Path:  # type: ignore[no-untyped-def]
    """A home with the sample corpus indexed as "sample" on the defaults (``index_as_sample``), made once per test
    session: the first worker to ask builds it while the others wait. Never changed: a fixture hands its tests a copy
    (``tests.helpers.copy_home``), so each module or package has a home of its own, as when each indexed its own."""
    from ctxrag.storage.locks import one_process_at_a_time
    from tests.helpers import index_as_sample

    folder = _MACHINE / "sample-index"
    home, published = folder / "home", folder / "published"
    with one_process_at_a_time(_MACHINE / "sample-index.lock"):
        if not published.exists():
            shutil.rmtree(home, ignore_errors=True)  # a build a failed worker left half-way
            published.parent.mkdir(exist_ok=True)
            published.write_text(index_as_sample(home))
    return home


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh CTXRAG_HOME for one test."""
    return tmp_path / "home"


@pytest.fixture
def anthropic_simulator(monkeypatch: pytest.MonkeyPatch):
    """The Anthropic API simulator (test equipment) with the SDK pointed at it and a fake key set."""
    from tests.equipment.anthropic_simulator import AnthropicSimulator

    with AnthropicSimulator() as simulator:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", simulator.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_TEST_KEY)
        yield simulator


@pytest.fixture
def cohere_simulator(monkeypatch: pytest.MonkeyPatch):
    from tests.equipment.cohere_simulator import CohereSimulator

    with CohereSimulator() as simulator:
        monkeypatch.setenv("CO_API_URL", simulator.url)
        monkeypatch.setenv("CO_API_KEY", "co-test-key")
        yield simulator


@pytest.fixture
def voyage_simulator(monkeypatch: pytest.MonkeyPatch):
    from tests.equipment.voyage_simulator import VoyageSimulator

    with VoyageSimulator() as simulator:
        monkeypatch.setenv("VOYAGE_BASE_URL", simulator.url)
        monkeypatch.setenv("VOYAGE_API_KEY", "pa-test-key-0123456789abcdefghij")
        yield simulator


@pytest.fixture(scope="session")
def es_emulator_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a running Elasticsearch emulator (noida-db, test equipment), stopped at the end of the session."""
    from tests.equipment.es_emulator import _stop, start_emulator

    process, url = start_emulator(tmp_path_factory.mktemp("es-emulator"))
    try:
        yield url
    finally:
        _stop(process)
