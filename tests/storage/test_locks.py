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

HOLD = """
import sys, time
from pathlib import Path
from ctxrag.storage.locks import one_process_at_a_time
lock, log, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
with one_process_at_a_time(lock):
    with log.open("a") as out:
        out.write(f"{name} in {time.monotonic()}\\n")
    time.sleep(0.5)
    with log.open("a") as out:
        out.write(f"{name} out {time.monotonic()}\\n")
"""


def test_two_processes_and_two_threads_take_turns(tmp_path: Path) -> None:
    lock, log = tmp_path / "made" / ".making.lock", tmp_path / "log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    processes = [subprocess.Popen([sys.executable, "-c", HOLD, str(lock), str(log), f"p{n}"], env=env) for n in range(2)]

    def thread_turn() -> None:
        with one_process_at_a_time(lock):
            with log.open("a") as out:
                out.write(f"t in {time.monotonic()}\n")
            time.sleep(0.2)
            with log.open("a") as out:
                out.write(f"t out {time.monotonic()}\n")

    threads = [threading.Thread(target=thread_turn) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(process.wait(timeout=60) == 0 for process in processes)
    events = sorted((float(at), what) for _, what, at in (line.split() for line in log.read_text().splitlines()))
    assert [what for _, what in events] == ["in", "out"] * 4  # never two inside at once


def test_a_folder_that_cannot_be_written_means_no_lock(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    ran = []
    with one_process_at_a_time(tmp_path / "a-file" / "x.lock"):
        ran.append(True)
    assert ran == [True]
