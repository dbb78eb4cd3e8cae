"""Every resident search of this user, found and stopped: what ``ctxrag server status`` lists and ``ctxrag server
stop`` ends, beside the Prefect server.

A resident search is found by its process (this user's processes running ``ctxrag.services.resident`` whose socket
is in this user's socket folder, ``resident_socket.runtime_dir``: one per user, unless ``XDG_RUNTIME_DIR`` or
``TMPDIR`` differ between commands), then asked over its socket what it holds (``{"control": "status"}``). A stop asks it first
(``{"control": "stop"}``: it finishes the requests in flight and removes its socket), then sends SIGTERM (the same, by
its handler) to one that did not go within ``POLITE_S``, and SIGKILL to one still there ``FORCE_S`` later.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ctxrag.services.resident_socket import FAILED_WARMUP_S, exchange, failed_path, runtime_dir

MODULE = "ctxrag.services.resident"
POLITE_S = 1.0  # how long a stopped resident search may take to finish its requests and go, before SIGTERM
FORCE_S = 0.5  # after SIGTERM, before SIGKILL


@dataclass
class Resident:
    """One resident search: its process, socket and home, and what it said of itself (None: it did not answer, as
    while it warms up)."""

    pid: int
    socket: Path
    home: str
    rss_bytes: int
    status: dict[str, Any] | None = field(default=None)

    @property
    def state(self) -> str:
        return "serving" if self.status is not None else "starting (warming up) or not answering"


def residents() -> list[Resident]:
    """This user's resident searches (of its socket folder)."""
    folder = runtime_dir()
    found = []
    for process in psutil.process_iter(["pid", "uids", "cmdline", "memory_info"]):
        command = process.info.get("cmdline") or []
        uids = process.info.get("uids")
        if MODULE not in command or uids is None or uids.real != os.getuid():
            continue
        at = command.index(MODULE)
        if len(command) < at + 3:
            continue
        socket, home = Path(command[at + 1]), command[at + 2]
        if folder is None or socket.parent.resolve() != folder.resolve():
            continue
        memory = process.info.get("memory_info")
        resident = Resident(process.info["pid"], socket, home, int(memory.rss) if memory else 0)
        if socket.exists():
            said = exchange(socket, {"control": "status"}, limit_s=2.0)
            resident.status = said if said and said.get("pid") == resident.pid else None
        found.append(resident)
    return sorted(found, key=lambda resident: resident.pid)


def failed_warmups() -> list[dict[str, Any]]:
    """The recent warm-up failures noted in this user's socket folder (no resident search is started for them)."""
    import json

    folder = runtime_dir()
    notes = []
    for note in sorted(folder.glob("search-*.failed")) if folder else []:
        try:
            found = json.loads(note.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(found, dict) and time.time() - float(found.get("at", 0)) < FAILED_WARMUP_S:
            notes.append({**found, "socket": str(note.with_suffix(".sock"))})
    return notes


def stop_all() -> list[tuple[Resident, str]]:
    """Stop every resident search of this user: each with how it went (``asked``, ``SIGTERM``, ``SIGKILL``, or
    ``gone`` if it ended on its own meanwhile). A failed warm-up's note is removed too."""
    found = residents()
    asked = {resident.pid for resident in found if exchange(resident.socket, {"control": "stop"}, limit_s=2.0)}
    how = {resident.pid: "asked" if resident.pid in asked else "gone" for resident in found}
    _wait(found, POLITE_S)
    for signal_number in (signal.SIGTERM, signal.SIGKILL):
        alive = [resident for resident in found if _alive(resident.pid)]
        for resident in alive:
            try:
                os.kill(resident.pid, signal_number)
                how[resident.pid] = signal_number.name
            except ProcessLookupError:
                pass
        _wait(alive, FORCE_S)
    for note in failed_warmups():
        failed_path(Path(str(note["socket"]))).unlink(missing_ok=True)
    return [(resident, how[resident.pid]) for resident in found]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait(processes: list[Resident], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while any(_alive(resident.pid) for resident in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
