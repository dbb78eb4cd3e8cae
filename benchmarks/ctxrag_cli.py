"""The ``ctxrag`` command as the benchmarks run it: a private CTXRAG_HOME with its own PREFECT_HOME, the local Prefect
server those commands start stopped at the end (nothing a benchmark starts outlives it), and that server's CPU time,
read from its pid, so a command's cost includes the server's work for it. Public tools only (subprocess, psutil)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
CTXRAG = [sys.executable, "-c", "from ctxrag.cli import main; main()"]


def private_env(home: Path, **extra: str) -> dict[str, str]:
    """os.environ with CTXRAG_HOME = ``home`` and PREFECT_HOME = ``home/prefect``; no other Prefect setting."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_") and name != "CI"}
    (home / "prefect").mkdir(parents=True, exist_ok=True)
    env.update({"CTXRAG_HOME": str(home), "PREFECT_HOME": str(home / "prefect"), **extra})
    return env


def stop_server(home: Path) -> None:
    """``ctxrag server stop`` for the server the commands in ``home`` started (if any)."""
    subprocess.run(CTXRAG + ["server", "stop"], env=private_env(home), capture_output=True, timeout=120, cwd=REPO)


@contextmanager
def servers_stopped(*homes: Path) -> Iterator[None]:
    """Stop the local servers of ``homes`` when the block ends, however it ends."""
    try:
        yield
    finally:
        for home in homes:
            stop_server(home)


def server_cpu_seconds(prefect_home: Path) -> float:
    """User + system CPU seconds of the local server recorded in ``prefect_home`` and its children (0 if none)."""
    try:
        pid = json.loads((prefect_home / "ctxrag-server.json").read_text())["pid"]
        process = psutil.Process(pid)
        times = process.cpu_times()
        return times.user + times.system + times.children_user + times.children_system
    except (OSError, ValueError, KeyError, psutil.Error):
        return 0.0
