"""The resident search's life, on its real server class with a search the test holds: a long search is waited for
(heartbeats), a silent one costs about a second, a stop finishes the search in flight and removes the socket, the
status says what it holds, and at most a few indexes stay open."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from ctxrag.services import resident_socket
from ctxrag.services.resident import ResidentServer
from ctxrag.services.warm import WarmIndexes
from ctxrag.tasks.common.hits import SearchAnswer
from ctxrag.tasks.common.search_request import SearchRequest

REQUEST = SearchRequest(query="retry backoff", index="sample", k=2)


class HeldSearch:
    """A ``WarmIndexes`` whose searches end when the test says (``release``), or at once when not held."""

    def __init__(self, held: bool = False) -> None:
        self.release = threading.Event()
        if not held:
            self.release.set()
        self.started = threading.Event()

    def submit(self, request: SearchRequest) -> Future[SearchAnswer]:
        pending: Future[SearchAnswer] = Future()

        def answer() -> None:
            self.started.set()
            self.release.wait(30)
            pending.set_result(SearchAnswer(request.index, "v1", "hybrid-score", []))

        threading.Thread(target=answer, daemon=True).start()
        return pending

    def open_indexes(self) -> list[dict[str, str]]:
        return [{"name": "sample", "version": "v1"}]


@pytest.fixture
def folder() -> Iterator[Path]:
    made = Path(tempfile.mkdtemp(prefix="ctxrag-rl-", dir="/tmp"))  # short: a socket path holds ~100 bytes
    try:
        yield made
    finally:
        for leftover in made.iterdir():
            leftover.unlink()
        made.rmdir()


def serving(path: Path, warm: HeldSearch) -> tuple[ResidentServer, threading.Thread]:
    server = ResidentServer(path, Path("/home/of/test"), warm, idle_s=600)  # type: ignore[arg-type]

    def run() -> None:
        try:
            server.serve_forever(poll_interval=0.05)
        finally:
            path.unlink(missing_ok=True)
            server.server_close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return server, thread


def test_a_long_search_is_waited_for_through_its_heartbeats(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = folder / "s.sock"
    warm = HeldSearch(held=True)
    server, thread = serving(path, warm)
    threading.Timer(3 * resident_socket.SILENCE_S, warm.release.set).start()  # three times the silence a caller takes
    started = time.monotonic()
    answer = resident_socket.ask(path, REQUEST)
    assert answer is not None and answer.index == "sample"
    assert time.monotonic() - started >= 3 * resident_socket.SILENCE_S * 0.9
    server.stop("test")
    thread.join(10)


def test_a_silent_resident_costs_about_a_second(folder: Path) -> None:
    """A process that accepts (or whose backlog takes the connection) and never answers: the caller gives up after
    SILENCE_S and searches itself."""
    path = folder / "hung.sock"
    with socket.socket(socket.AF_UNIX) as hung:
        hung.bind(os.fspath(path))
        hung.listen(8)  # never accepted, never answered
        started = time.monotonic()
        assert resident_socket.ask(path, REQUEST) is None
        waited = time.monotonic() - started
    assert resident_socket.SILENCE_S * 0.9 <= waited <= 1.5, waited


def test_a_stop_finishes_the_search_in_flight_then_removes_the_socket(folder: Path) -> None:
    path = folder / "s.sock"
    warm = HeldSearch(held=True)
    server, thread = serving(path, warm)
    answers: list[SearchAnswer | None] = []
    asking = threading.Thread(target=lambda: answers.append(resident_socket.ask(path, REQUEST)))
    asking.start()
    assert warm.started.wait(10)
    said = resident_socket.exchange(path, {"control": "stop"}, limit_s=5)
    assert said == {"stopping": os.getpid()}
    time.sleep(0.3)
    assert not path.exists()  # no new caller is taken (it searches itself)...
    assert thread.is_alive() and asking.is_alive()  # ...and the search in flight is still being answered
    warm.release.set()
    asking.join(10)
    thread.join(10)
    assert answers and answers[0] is not None and answers[0].index == "sample"
    assert not thread.is_alive() and not path.exists()


def test_the_status_says_what_it_holds_and_does_not_count_as_a_search(folder: Path) -> None:
    path = folder / "s.sock"
    server, thread = serving(path, HeldSearch())
    assert resident_socket.ask(path, REQUEST) is not None
    time.sleep(0.3)
    status = resident_socket.exchange(path, {"control": "status"}, limit_s=5)
    assert status is not None and status["pid"] == os.getpid() and status["home"] == "/home/of/test"
    assert status["indexes"] == [{"name": "sample", "version": "v1"}] and status["rss_bytes"] > 10_000_000
    assert status["idle_seconds"] >= 0.2 and status["idle_limit_seconds"] == 600
    again = resident_socket.exchange(path, {"control": "status"}, limit_s=5)
    assert again is not None and again["idle_seconds"] >= status["idle_seconds"]  # a status is no search
    server.stop("test")
    thread.join(10)


def test_at_most_max_open_indexes_stay_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxrag

    opened: list[str] = []

    class Opened:
        def __init__(self, name: str) -> None:
            opened.append(name)

    warm = WarmIndexes(tmp_path, max_open=2)
    monkeypatch.setattr(warm, "_key", lambda name: ("v1", None))
    monkeypatch.setattr(ctxrag, "open", lambda name, long_lived: Opened(name))
    for name in ("a", "b", "a", "c", "a", "b"):
        warm._current(name)
    assert [entry["name"] for entry in warm.open_indexes()] == ["a", "b"]  # the most recently searched last
    assert opened == ["a", "b", "c", "b"]  # c closed b (a was searched later); b closed c
    warm._thread.shutdown()
