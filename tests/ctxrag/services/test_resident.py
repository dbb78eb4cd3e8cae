"""The resident search: a later ``ctxrag search`` asks the process the first one left, gets what it would have printed
itself, and never an answer made under other settings; the process is its user's only and exits when idle."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import ctxrag
from ctxrag.services import resident_socket as resident
from ctxrag.services.residents import residents, stop_all
from ctxrag.storage.environment import OFFLINE_DEFAULTS
from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.common.search_request import SearchRequest
from tests.ctxrag.services.conftest import CTXRAG
from tests.equipment.other_user import PYTHON, ensure_other_user, other_user_missing
from tests.helpers import SAMPLE_CORPUS

# The command, telling on stderr whether it loaded what a search in its own process loads.
CTXRAG_TELLING = [
    sys.executable,
    "-c",
    "import sys\nfrom ctxrag.cli import main\ntry:\n    main()\nfinally:\n"
    "    print('LOADED' if 'onnxruntime' in sys.modules or 'pyarrow' in sys.modules else 'ASKED', file=sys.stderr)",
]


@pytest.fixture
def resident_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Resident search on (idle 1 minute), its socket folder in a short private folder of its own, in this process's
    environment (and so the commands'); that folder. Every resident search started there is stopped after."""
    runtime = Path(tempfile.mkdtemp(prefix="ctxrag-rt-", dir="/tmp"))
    for name, value in {**OFFLINE_DEFAULTS, "XDG_RUNTIME_DIR": str(runtime), resident.IDLE_ENV: "1"}.items():
        monkeypatch.setenv(name, os.environ.get(name, value) if name in OFFLINE_DEFAULTS else value)
    try:
        yield runtime
    finally:
        stop_all()  # the resident searches of this folder (the test's own)
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def resident_env(resident_on: Path, sample_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``resident_on`` for ``sample_home`` (CTXRAG_HOME): its resident search's socket path."""
    monkeypatch.setenv("CTXRAG_HOME", str(sample_home))
    path = resident.socket_path(sample_home)
    assert path is not None and path.parent == resident_on / "ctxrag"
    return path


def wait_for(condition, what: str, seconds: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.2)


def search_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CTXRAG_TELLING, "search", *args], env=env or dict(os.environ), capture_output=True, text=True, timeout=300
    )


REQUEST = SearchRequest(query="retry backoff delay", index="sample", k=3)


@pytest.mark.slow
def test_a_later_search_asks_the_resident_one_and_prints_what_it_would_have(
    resident_env: Path, sample_home: Path
) -> None:
    first = search_command("retry backoff delay", "--name", "sample", "-k", "3", "--json")
    assert first.returncode == 0, first.stderr
    assert first.stderr.strip().endswith("LOADED")  # no resident search yet: this process searched, and started one
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "the resident search to answer")

    for options in (["--json"], [], ["--strategy", "bm25"], ["--strategy", "hybrid(rrf_k=10)", "--json"]):
        asked = search_command("how are failed calls retried", "--name", "sample", "-k", "4", *options)
        itself = search_command(
            "how are failed calls retried",
            "--name",
            "sample",
            "-k",
            "4",
            *options,
            env={**os.environ, resident.IDLE_ENV: "0"},
        )
        assert asked.returncode == itself.returncode == 0, (asked.stderr, itself.stderr)
        assert asked.stderr.strip() == "ASKED" and itself.stderr.strip().endswith("LOADED")
        assert asked.stdout == itself.stdout and asked.stdout.strip()
    in_process = ctxrag.search("how are failed calls retried", name="sample", k=4)
    assert json.loads(
        search_command("how are failed calls retried", "--name", "sample", "-k", "4", "--json").stdout
    ) == json.loads(json.dumps(in_process.to_dict()))


@pytest.mark.slow
def test_what_the_resident_one_cannot_answer_the_command_answers_as_always(
    resident_env: Path, sample_home: Path
) -> None:
    resident.start(resident_env, sample_home, "sample")
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "the resident search to answer")
    with socket.socket(socket.AF_UNIX) as raw:  # not a request: an error line, and the process answers after it
        raw.connect(os.fspath(resident_env))
        raw.sendall(b'{"query": "retry", "top_k": 3}\n')
        refused = json.loads(raw.makefile("rb").readline())
        assert refused["error"]["kind"] == "invalid_request" and "did you mean k?" in refused["error"]["message"]
    assert resident.ask(resident_env, dataclasses.replace(REQUEST, index="missing")) is None

    unknown = search_command("retry", "--name", "missing")
    assert unknown.returncode == 2 and "no index named 'missing'" in unknown.stderr
    bad = search_command("retry", "--name", "sample", "--strategy", "bogus")
    assert bad.returncode == 2 and "unknown strategy 'bogus'" in bad.stderr
    assert resident.ask(resident_env, REQUEST) is not None


@pytest.mark.slow
def test_it_exits_when_idle_and_a_killed_ones_socket_is_replaced(
    resident_env: Path, sample_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(resident.IDLE_ENV, "0.02")  # 1.2 s
    resident.start(resident_env, sample_home, "sample")
    resident.start(resident_env, sample_home, "sample")  # a second start while the first warms: one serves
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "the resident search to answer")
    wait_for(
        lambda: not resident.running(resident_env) and not resident_env.exists(), "the idle one to exit", seconds=60
    )

    monkeypatch.setenv(resident.IDLE_ENV, "1")
    resident.start(resident_env, sample_home, "sample")
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "the resident search to answer")
    os.kill(int(resident.lock_path(resident_env).read_text()), 9)  # killed: its socket stays, with no one behind it
    wait_for(lambda: not resident.running(resident_env), "the killed one to go")
    assert resident_env.exists() and resident.ask(resident_env, REQUEST) is None
    resident.start(resident_env, sample_home, "sample")
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "a new resident search to answer")


@pytest.mark.slow
def test_an_index_run_leaves_none(
    resident_on: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness
) -> None:  # type: ignore[no-untyped-def]
    """Only a search starts a resident search (docs/decisions.md, "The resident search's life")."""
    from prefect.settings import PREFECT_API_URL

    home = tmp_path / "home"
    monkeypatch.setenv("CTXRAG_HOME", str(home))
    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))
    indexed = subprocess.run(
        [*CTXRAG, "index", str(SAMPLE_CORPUS), "--name", "fresh", "--contextualizer", "none"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert indexed.returncode == 0, indexed.stderr
    time.sleep(1.0)
    assert residents() == []
    first = search_command("retry backoff delay", "--name", "fresh")
    assert first.returncode == 0 and first.stderr.strip().endswith("LOADED"), first.stderr
    path = resident.socket_path(home.resolve())
    assert path is not None
    wait_for(lambda: resident.ask(path, dataclasses.replace(REQUEST, index="fresh")) is not None, "one to answer")


@pytest.mark.slow
def test_server_status_lists_it_and_server_stop_stops_it_politely(resident_env: Path, sample_home: Path) -> None:
    resident.start(resident_env, sample_home, "sample")
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "the resident search to answer")
    (found,) = residents()
    status = subprocess.run(
        [*CTXRAG, "server", "status"], env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    line = next(line for line in status.stdout.splitlines() if f"pid {found.pid}" in line)
    assert f"home {sample_home}" in line and "indexes sample (version " in line and " MB" in line, line
    assert "idle " in line and " of 1 min" in line, line
    stopped = subprocess.run(
        [*CTXRAG, "server", "stop"], env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    assert f"stopped the resident search of {sample_home} (pid {found.pid}, asked)" in stopped.stdout, stopped.stdout
    time.sleep(2.0)  # the target: no process of it 2 s after the stop
    assert not psutil.pid_exists(found.pid) or psutil.Process(found.pid).status() == psutil.STATUS_ZOMBIE
    assert not resident_env.exists() and residents() == []
    assert (
        "resident searches: none"
        in subprocess.run(
            [*CTXRAG, "server", "status"], env=dict(os.environ), capture_output=True, text=True, timeout=120
        ).stdout
    )


@pytest.mark.slow
def test_sigterm_finishes_and_removes_the_socket_and_a_stopped_one_costs_a_search_a_second(
    resident_env: Path, sample_home: Path
) -> None:
    resident.start(resident_env, sample_home, "sample")
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "the resident search to answer")
    (found,) = residents()
    os.kill(found.pid, signal.SIGSTOP)  # hung: its socket takes connections, nothing answers
    try:
        started = time.monotonic()
        assert resident.ask(resident_env, REQUEST) is None
        assert time.monotonic() - started <= 1.5
    finally:
        os.kill(found.pid, signal.SIGCONT)
    os.kill(found.pid, signal.SIGTERM)
    wait_for(lambda: not resident.running(resident_env), "the resident search to end", seconds=10)
    assert not resident_env.exists()
    assert "stopping: SIGTERM" in resident.log_path(resident_env).read_text()


@pytest.mark.slow
def test_a_failed_warm_up_is_remembered_and_starts_no_other(resident_env: Path, sample_home: Path) -> None:
    resident.start(resident_env, sample_home, "missing")
    wait_for(lambda: resident.failed_recently(resident_env) is not None, "the failed warm-up's note")
    note = resident.failed_recently(resident_env)
    assert note is not None and note["index"] == "missing" and "no index named 'missing'" in str(note["reason"])
    wait_for(lambda: not resident.running(resident_env), "the failed one to end")
    resident.start(resident_env, sample_home, "sample")  # within the next minutes: none is started
    time.sleep(1.0)
    assert residents() == [] and not resident.running(resident_env)
    status = subprocess.run(
        [*CTXRAG, "server", "status"], env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    assert "failed to warm up index 'missing': no index named 'missing'" in status.stdout, status.stdout
    subprocess.run([*CTXRAG, "server", "stop"], env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert resident.failed_recently(resident_env) is None  # stop forgets it: the next search may start one


@pytest.mark.slow
def test_a_resident_search_of_newer_code_retires_the_older_one(
    resident_env: Path, sample_home: Path, tmp_path: Path
) -> None:
    """Code is told apart by the interpreter and ctxrag's files: this virtualenv seen from another folder (its
    Python and libraries linked) is "other code" for the same home and settings, as an upgrade or an edit is."""
    venv = Path(sys.prefix)
    other = tmp_path / "other-venv"
    (other / "bin").mkdir(parents=True)
    shutil.copy(venv / "pyvenv.cfg", other / "pyvenv.cfg")
    (other / "lib").symlink_to(venv / "lib")
    other_python = other / "bin" / "python"
    other_python.symlink_to(sys.executable)
    older = subprocess.run(
        [str(other_python), "-c", "import sys; from ctxrag.services import resident_socket as r; from pathlib import Path;"
         "print(r.socket_path(Path(sys.argv[1])))", str(sample_home)],
        env=dict(os.environ), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    older_path = Path(older.stdout.strip())
    assert resident.lineage(older_path) == resident.lineage(resident_env) and older_path != resident_env
    subprocess.Popen(
        [str(other_python), "-m", "ctxrag.services.resident", str(older_path), str(sample_home), "sample", "1"],
        env=dict(os.environ), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for(lambda: resident.ask(older_path, REQUEST) is not None, "the older one to answer")
    resident.start(resident_env, sample_home, "sample")
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "the newer one to answer")
    wait_for(lambda: not resident.running(older_path), "the older one to be retired", seconds=30)
    assert [found.socket for found in residents()] == [resident_env]


def test_other_settings_other_socket_and_an_unsafe_folder_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="ctxrag-rt-", dir="/tmp"))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        monkeypatch.delenv(resident.IDLE_ENV)
        monkeypatch.delenv("CI", raising=False)
        home = tmp_path / "home"
        here = resident.socket_path(home)
        assert here is not None and (runtime / "ctxrag").stat().st_mode & 0o777 == 0o700
        monkeypatch.setenv("TERM", "something-else")  # nothing a search reads
        monkeypatch.setenv(resident.IDLE_ENV, "3")
        assert resident.socket_path(home) == here
        for name, value in (
            ("CTXRAG_RERANK", "local:/models/ce"),
            ("VOYAGE_API_KEY", "pa-other"),
            ("HF_HUB_OFFLINE", "0"),
            ("XDG_CACHE_HOME", str(tmp_path / "cache")),  # the cache folders (query model, precision), Hugging Face's
        ):
            with monkeypatch.context() as changed:
                changed.setenv(name, value)
                assert resident.socket_path(home) not in (None, here), name
        assert resident.socket_path(tmp_path / "other-home") != here

        monkeypatch.setenv(resident.IDLE_ENV, "0")
        assert resident.socket_path(home) is None
        monkeypatch.setenv(
            resident.IDLE_ENV, "soon"
        )  # one line naming it (ctxrag.storage.settings; the command: exit 2)
        with pytest.raises(InvalidInput, match=resident.IDLE_ENV):
            resident.socket_path(home)
        monkeypatch.delenv(resident.IDLE_ENV)
        monkeypatch.setenv("CI", "true")  # a CI job: none by default, one when asked
        assert resident.socket_path(home) is None
        monkeypatch.setenv(resident.IDLE_ENV, "5")
        assert resident.socket_path(home) == here
        monkeypatch.delenv("CI")
        monkeypatch.setenv(resident.IDLE_ENV, "1")
        os.chmod(runtime / "ctxrag", 0o755)  # open to others: not used
        assert resident.socket_path(home) is None
        shutil.rmtree(runtime / "ctxrag")
        (runtime / "elsewhere").mkdir(mode=0o700)
        (runtime / "ctxrag").symlink_to(runtime / "elsewhere")  # a link (someone else's, perhaps): not used
        assert resident.socket_path(home) is None
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(other_user_missing() is not None, reason=str(other_user_missing()))
def test_another_user_of_the_machine_cannot_ask(resident_env: Path, sample_home: Path) -> None:
    resident.start(resident_env, sample_home, "sample")
    wait_for(lambda: resident.ask(resident_env, REQUEST) is not None, "the resident search to answer")
    other = ensure_other_user()
    # The other user may reach the folders above (as /tmp): open the runtime folder's parent for the probe.
    os.chmod(resident_env.parent.parent, 0o755)
    probe = (
        "import json, socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1])\n"
        "    s.sendall(json.dumps(json.loads(sys.argv[2])).encode() + b'\\n')\n    print('ANSWER', s.makefile('rb').readline()[:60])\n"
        "except OSError as error:\n    print('REFUSED', type(error).__name__)\n"
    )
    done = subprocess.run(
        ["runuser", "-u", other, "--", PYTHON, "-c", probe, os.fspath(resident_env), json.dumps(REQUEST.to_dict())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.startswith("REFUSED PermissionError"), (done.stdout, done.stderr)
