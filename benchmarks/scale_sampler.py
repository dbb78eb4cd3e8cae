"""What `benchmarks/scale.py` measures of a running command: its process tree (the command and its children, such
as Prefect's server subprocess) sampled every SAMPLE_PERIOD seconds with psutil (or /proc without it), for resident
memory, threads and each process's CPU seconds; a run past its timeout killed, each process of its tree by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

try:
    import psutil  # comes with the [test] and [dask] extras (via distributed), not with Prefect itself
except ImportError:  # read /proc instead (Linux)
    psutil = None

SAMPLE_PERIOD = 0.2
TIMELINE_PERIOD = 5.0  # seconds between two points of the memory/thread timeline kept in scale.json


def tree_pids(root: int) -> list[int]:
    """``root`` and its descendants (empty once ``root`` is gone)."""
    if psutil is not None:
        try:
            return [root] + [child.pid for child in psutil.Process(root).children(recursive=True)]
        except psutil.Error:
            return []
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    if not Path(f"/proc/{root}").exists():
        return []
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def process_stats(pid: int) -> tuple[int, int, float] | None:
    """(resident bytes, threads, user + system CPU seconds) of a live process, else None."""
    if psutil is not None:
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                cpu = process.cpu_times()
                return process.memory_info().rss, process.num_threads(), cpu.user + cpu.system
        except psutil.Error:
            return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(values.get("VmRSS", "0 kB").split()[0]) * 1024
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, int(values.get("Threads", "0")), (int(fields[11]) + int(fields[12])) / ticks


def process_command(pid: int) -> list[str]:
    try:
        if psutil is not None:
            return psutil.Process(pid).cmdline()
        return [part for part in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if part]
    except (OSError, Exception):  # noqa: BLE001 - a process that ended meanwhile
        return []


class TreeSampler:
    """Samples a process and its descendants every SAMPLE_PERIOD seconds, on a thread (psutil, else /proc)."""

    def __init__(self, pid: int) -> None:
        self.root = pid
        self.peak_rss_sum = 0
        self.peak_threads = 0
        self.peak_processes = 0
        self.peak_by_pid: dict[int, int] = {}
        self.threads_by_pid: dict[int, int] = {}
        self.label_by_pid: dict[int, str] = {}
        self.cpu_by_pid: dict[int, float] = {}
        self.timeline: list[dict[str, float]] = []
        self.samples = 0
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def pids(self) -> list[int]:
        return tree_pids(self.root)

    def _loop(self) -> None:
        next_point = 0.0
        while not self._stop.is_set():
            self.sample()
            elapsed = time.perf_counter() - self._started
            if elapsed >= next_point:
                self.timeline.append({"t": round(elapsed, 1), "rss_mb": round(self._last_rss / 2**20, 1), "threads": self._last_threads})
                next_point += TIMELINE_PERIOD
            self._stop.wait(SAMPLE_PERIOD)

    _last_rss = 0
    _last_threads = 0

    def sample(self) -> None:
        pids = tree_pids(self.root)
        if not pids:
            return
        rss_sum = threads = alive = 0
        for pid in pids:
            stats = process_stats(pid)
            if stats is None:
                continue
            rss, count, cpu = stats
            if pid not in self.label_by_pid:
                self.label_by_pid[pid] = _label(pid)
            alive += 1
            rss_sum += rss
            threads += count
            self.peak_by_pid[pid] = max(self.peak_by_pid.get(pid, 0), rss)
            self.threads_by_pid[pid] = max(self.threads_by_pid.get(pid, 0), count)
            self.cpu_by_pid[pid] = cpu
        self.samples += 1
        self._last_rss, self._last_threads = rss_sum, threads
        self.peak_rss_sum = max(self.peak_rss_sum, rss_sum)
        self.peak_threads = max(self.peak_threads, threads)
        self.peak_processes = max(self.peak_processes, alive)

    def summary(self) -> dict[str, object]:
        largest_pid = max(self.peak_by_pid, key=self.peak_by_pid.get) if self.peak_by_pid else None
        processes = sorted(
            ({"pid": pid, "what": self.label_by_pid.get(pid, "?"), "peak_rss_mb": round(rss / 2**20, 1),
              "peak_threads": self.threads_by_pid.get(pid, 0),
              "cpu_seconds": round(self.cpu_by_pid.get(pid, 0.0), 1)} for pid, rss in self.peak_by_pid.items()),
            key=lambda row: -row["peak_rss_mb"],
        )
        return {
            "peak_rss_sum_mb": round(self.peak_rss_sum / 2**20, 1),
            "peak_rss_largest_mb": round(self.peak_by_pid[largest_pid] / 2**20, 1) if largest_pid else None,
            "largest_process": self.label_by_pid.get(largest_pid, "?") if largest_pid else None,
            "peak_threads": self.peak_threads,
            "peak_threads_largest": self.threads_by_pid.get(largest_pid, 0) if largest_pid else None,
            "peak_processes": self.peak_processes,
            "cpu_seconds": round(sum(self.cpu_by_pid.values()), 1),
            "samples": self.samples,
            "processes": processes,
            "timeline": self.timeline,
        }


def _label(pid: int) -> str:
    command = process_command(pid)
    if not command:
        return "?"
    text = " ".join(Path(part).name if index == 0 or part.startswith("/") else part for index, part in enumerate(command))
    if "uvicorn" in text or ("prefect" in text and "server" in text):
        return "prefect server: " + text[:80]
    return text[:100]


def kill_tree(sampler: TreeSampler) -> None:
    """Kill the run's processes (the ones this benchmark started, found by pid), children first."""
    for pid in reversed(sampler.pids()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_measured(command: list[str], env: dict[str, str], timeout: float, stdout_path: Path, stderr_path: Path, cwd: Path) -> dict[str, object]:
    """Run ``command`` in ``cwd``, sampling its process tree; returns wall seconds, exit code, timeout flag and the samples."""
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, cwd=cwd)
        sampler = TreeSampler(process.pid).start()
        timed_out = False
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            sampler.sample()
            kill_tree(sampler)
            code = process.wait()
        wall = time.perf_counter() - started
        sampler.stop()
    return {"wall_seconds": round(wall, 2), "exit_code": code, "timed_out": timed_out, **sampler.summary()}
