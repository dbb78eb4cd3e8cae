"""Locks: one process of the machine at a time for what is made once (ctxrag.storage.locks)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ctxrag.storage.locks import one_process_at_a_time
from tests.helpers import REPO


def take_turn(lock: Path, log: Path, seconds: float) -> None:
    """Inside the lock for ``seconds``, its entry and exit written to ``log``."""
    with one_process_at_a_time(lock):
        for event in ("in", "out"):
            with log.open("a") as out:
                out.write(f"{event} {time.monotonic()}\n")
            if event == "in":
                time.sleep(seconds)


def test_two_processes_and_two_threads_take_turns(tmp_path: Path) -> None:
    lock, log = tmp_path / "made" / ".making.lock", tmp_path / "log"
    code = "import sys; from pathlib import Path; from tests.storage.test_locks import take_turn; take_turn(Path(sys.argv[1]), Path(sys.argv[2]), 0.5)"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    processes = [subprocess.Popen([sys.executable, "-c", code, str(lock), str(log)], env=env) for _ in range(2)]
    threads = [threading.Thread(target=take_turn, args=(lock, log, 0.2)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(process.wait(timeout=60) == 0 for process in processes)
    events = sorted((float(at), event) for event, at in (line.split() for line in log.read_text().splitlines()))
    assert [event for _, event in events] == ["in", "out"] * 4  # never two inside at once


def test_a_folder_that_cannot_be_written_means_no_lock(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    ran = []
    with one_process_at_a_time(tmp_path / "a-file" / "x.lock"):
        ran.append(True)
    assert ran == [True]
