"""``ctxrag index FOLDER --watch`` end to end: the command in a process of its own, a folder edited as a user edits
it. A save becomes searchable; a file the index holds that can no longer be read keeps the live version and says
why; a deleted file leaves the index; Ctrl-C (SIGINT) or SIGTERM ends the watch and every process it started. With
the Claude contextualizer (the Anthropic simulator, test equipment), a change pays for its own document only."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import ctxrag
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.options import IndexOptions
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.helpers import SAMPLE_CORPUS

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]
WAIT_S = 300.0  # a first run on a loaded machine, with the session's first model files made in it


class Watch:
    """A running ``ctxrag index FOLDER --name watched --watch --json``: its JSON lines (a report per run) and its
    stderr lines, read on threads."""

    def __init__(self, folder: Path, home: Path, harness: bool = True, **environment: str) -> None:
        from prefect.settings import PREFECT_API_URL

        env = {**os.environ, "CTXRAG_HOME": str(home), **environment}
        if harness:
            env["PREFECT_API_URL"] = str(PREFECT_API_URL.value())
        command = [sys.executable, "-c", "from ctxrag.cli import main; main()", "index", str(folder)]
        self.process = subprocess.Popen(
            [*command, "--name", "watched", "--watch", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal, whoever started pytest
        )
        self.reports: queue.SimpleQueue[dict] = queue.SimpleQueue()
        self.errors: list[str] = []
        threading.Thread(target=self._read_reports, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read_reports(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            self.reports.put(json.loads(line))

    def _read_errors(self) -> None:
        for line in self.process.stderr:  # type: ignore[union-attr]
            self.errors.append(line.rstrip("\n"))

    def next_report(self) -> dict:
        try:
            return self.reports.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError("no report from the watch; its stderr:\n" + "\n".join(self.errors[-30:])) from None

    def said(self, start: str) -> str:
        """The first stderr line starting with ``start``, waited for."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if found := [line for line in self.errors if line.startswith(start)]:
                return found[0]
            assert self.process.poll() is None, "\n".join(self.errors[-30:])
            time.sleep(0.05)
        raise AssertionError(f"no line {start!r}; stderr:\n" + "\n".join(self.errors[-30:]))

    def stop(self, signal_number: int = signal.SIGINT) -> int:
        self.process.send_signal(signal_number)
        return self.process.wait(WAIT_S)


def sample_folder(path: Path) -> Path:
    shutil.copytree(SAMPLE_CORPUS, path)
    return path


def search(home: Path, query: str) -> list[ctxrag.Hit]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CTXRAG_HOME", str(home))
        return ctxrag.search(query, name="watched", k=3)


@pytest.fixture(scope="module")
def watching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Watch, Path, Path]]:
    """A watch of a copy of the sample folder, its first run done: (the watch, the folder, the home)."""
    root = tmp_path_factory.mktemp("watch")
    folder, home = sample_folder(root / "src"), root / "home"
    watch = Watch(folder, home)
    first = watch.next_report()
    assert first["status"] == "published" and first["documents_new"] == first["documents"] > 3
    assert watch.said("watching ").endswith("for changes; Ctrl-C stops")  # one line, however long the path
    yield watch, folder, home
    assert watch.stop() == 0


def test_a_save_is_searchable_as_soon_as_its_run_ends(watching: tuple[Watch, Path, Path]) -> None:
    watch, folder, home = watching
    changed = next(path for path in sorted((folder / "tinyq").iterdir()) if path.suffix == ".py")
    with changed.open("a") as file:
        file.write("\n\ndef quokkaberry_window():\n    return 'a saved change'\n")
    report = watch.next_report()
    relative = changed.relative_to(folder).as_posix()
    assert report["watch"]["files"] == [relative] and report["status"] == "published"
    assert report["documents_changed"] == 1 and report["documents_new"] == report["documents_removed"] == 0
    assert report["chunks_embedded"] >= 1 and report["chunks_embedding_reused"] > 0  # only what changed
    hits = search(home, "quokkaberry_window")
    assert hits[0].source == relative and "quokkaberry_window" in hits[0].content


def test_a_file_that_cannot_be_read_keeps_the_live_version_and_says_why(watching: tuple[Watch, Path, Path]) -> None:
    watch, folder, home = watching
    readme = folder / "README.md"
    good = readme.read_bytes()
    live = IndexStore(home).live_version("watched")
    assert live is not None
    readme.write_bytes(good + b"\n\xff\xfe not text\n")
    line = watch.said(f"error: {readme.resolve()}: not UTF-8")
    assert line.endswith(f"; index 'watched' keeps version {live.name}")
    assert IndexStore(home).live_version("watched") == live and watch.reports.empty()
    assert any(hit.source == "README.md" for hit in search(home, good.decode().split("\n")[0]))
    readme.write_bytes(good + b"\nFixed: watch the folder.\n")  # the watch went on: the fix is indexed
    report = watch.next_report()
    assert report["watch"]["files"] == ["README.md"] and report["documents_changed"] == 1
    assert IndexStore(home).live_version("watched") != live


def test_a_deleted_file_leaves_the_index(watching: tuple[Watch, Path, Path]) -> None:
    watch, folder, home = watching
    deleted = sorted((folder / "docs").iterdir())[0]
    deleted.unlink()
    report = watch.next_report()
    assert report["documents_removed"] == 1 and report["watch"]["files"] == [f"docs/{deleted.name}"]
    assert f"docs/{deleted.name}" not in set(IndexStore(home).chunk_column("watched", "doc_id") or [])


def test_an_edited_gitignore_drops_what_it_ignores_and_ignored_files_run_nothing(
    watching: tuple[Watch, Path, Path],
) -> None:
    watch, folder, home = watching
    (folder / ".gitignore").write_text("*.log\nCHANGELOG.txt\n")
    report = watch.next_report()
    assert report["documents_removed"] == 1 and report["watch"]["files"] == ["CHANGELOG.txt"]
    (folder / "debug.log").write_text("ignored\n")
    (folder / "CHANGELOG.txt").write_text("ignored now\n")
    (folder / ".notes.md").write_text("# hidden\n")
    (folder / "tinyq" / "__pycache__").mkdir(exist_ok=True)
    (folder / "tinyq" / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    with pytest.raises(queue.Empty):
        watch.reports.get(timeout=3)
    assert not [line for line in watch.errors if line.startswith("error:") and "not UTF-8" not in line]


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_ends_the_watch_and_every_process_it_started(tmp_path: Path, signal_number: int) -> None:
    """Prefect's temporary server (no server configured, as under CI) and the resident search it left are the watch's
    own processes: none outlives it."""
    runtime = Path(tempfile.mkdtemp(prefix="ctxrag-rt-", dir="/tmp"))  # a socket's path holds 100 bytes at most
    started: list[psutil.Process] = []
    try:
        watch = Watch(
            sample_folder(tmp_path / "src"),
            tmp_path / "home",
            harness=False,
            CTXRAG_PREFECT_SERVER="temporary",
            CTXRAG_SEARCH_IDLE_MINUTES="5",
            XDG_RUNTIME_DIR=str(runtime),
        )
        watch.next_report()
        watch.said("watching ")
        started += [psutil.Process(watch.process.pid), *psutil.Process(watch.process.pid).children(recursive=True)]
        commands = [" ".join(child.cmdline()) for child in started[1:]]
        assert any("prefect" in command and "server" in command for command in commands), commands
        assert any("ctxrag.services.resident" in command for command in commands), commands
        assert watch.stop(signal_number) == 0
        assert "stopped watching" in watch.errors and not any("Traceback" in line for line in watch.errors)
        _, alive = psutil.wait_procs(started, timeout=30)
        assert [" ".join(process.cmdline()) for process in alive] == []
    finally:
        for process in started:  # on a failure too, nothing of the test is left
            if process.is_running():
                process.kill()
        shutil.rmtree(runtime, ignore_errors=True)


def test_with_claude_a_change_pays_for_its_document_only(
    anthropic_simulator: AnthropicSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process: the watch ends when the report of the change has been shown."""
    from ctxrag.watch import watch_index

    folder, home = sample_folder(tmp_path / "src"), tmp_path / "home"
    monkeypatch.setenv("CTXRAG_HOME", str(home))
    changed = folder / "README.md"
    reports: list[dict] = []
    asked: list[int] = []

    def edit() -> None:
        asked.append(len(anthropic_simulator.requests))
        with changed.open("a") as file:
            file.write("\nA paid change: wombatquill.\n")

    def show(report: dict) -> None:
        reports.append(report)
        if len(reports) == 1:
            threading.Timer(0.5, edit).start()
        else:
            raise KeyboardInterrupt  # as Ctrl-C

    notes: list[str] = []
    failures: list[str] = []
    watch_index(str(folder), "watched", IndexOptions(contextualizer="claude"), show, notes.append, failures.append)
    assert failures == [] and notes[-1] == "stopped watching"
    first, change = reports
    assert first["contextualizer_calls"]["calls"] == first["chunks"]  # every chunk paid once, at the first run
    calls = [request for request in anthropic_simulator.requests[asked[0] :] if request.path == "/v1/messages"]
    readme_chunks = (IndexStore(home).chunk_column("watched", "doc_id") or []).count("README.md")
    assert change["watch"]["files"] == ["README.md"] and change["documents_contextualized"] == 1
    assert len(calls) == change["contextualizer_calls"]["calls"] == readme_chunks > 0
    assert all("wombatquill" in json.dumps(request.json) for request in calls)  # each call is the changed document's
