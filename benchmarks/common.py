"""What the benchmark scripts share: the project first on ``sys.path``, the machine, portable paths, query latency,
and ``ctxrag`` run as a benchmark runs it (a private CTXRAG_HOME and PREFECT_HOME, its local server stopped after)."""

from __future__ import annotations

import math
import os
import platform
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the scripts import ctxrag (and its layers, ctxrag.tasks, ...) from this checkout
SHARED_DATA = REPO.parent / "shared" / "data"  # the cookbook's data sets, beside the project
RESULTS = REPO / "benchmarks" / "results"
_SCRIPT = Path(sys.executable).with_name("ctxrag")  # the console script of the interpreter's environment
CTXRAG = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-c", "from ctxrag.cli import main; main()"]


def portable_path(path: str | Path, generated: bool = False) -> str:
    """``path`` as a result file names it, free of the machine's own folders: ``generated: synthetic-2000.json``,
    ``site-packages/torch/_inductor``, relative to the project (``data/sample/corpus``, ``../shared/data/...``), to the
    temporary folder (``$TMPDIR/ctxrag-head``) or to the user's home (``~/corpus``); else only its name."""
    path = Path(os.path.abspath(path))
    if generated:
        return f"generated: {path.name}"
    parts = path.parts
    for index in range(len(parts) - 1, 0, -1):
        if parts[index] in ("site-packages", "dist-packages"):
            return "/".join(("site-packages", *parts[index + 1 :]))
    if path.is_relative_to(REPO):
        return path.relative_to(REPO).as_posix() or "."
    temporary = Path(tempfile.gettempdir())
    if path.is_relative_to(temporary):
        return f"$TMPDIR/{path.relative_to(temporary).as_posix()}"
    shared = Path(os.path.commonpath([path, REPO]))
    if shared != Path(shared.anchor):  # a folder beside the project's, as ../shared/data is
        return Path(os.path.relpath(path, REPO)).as_posix()
    if path.is_relative_to(Path.home()):
        return f"~/{path.relative_to(Path.home()).as_posix()}"
    return f".../{path.name}"


_ABSOLUTE = re.compile(r"(?<![\w.~$/-])/[^\s\"'`,;:()\[\]{}<>]+")


def portable_text(text: str) -> str:
    """``text`` (a command line, a traceback) with every absolute path in it named by ``portable_path``."""
    return _ABSOLUTE.sub(lambda match: portable_path(match.group()), text)


def cpu_model() -> str:
    """The CPU's model name with its family and model numbers: a virtual machine may name only "Intel Xeon Processor"."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "?"
    fields: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            break  # the first processor's block is enough
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or "?"
    if "cpu family" in fields and "model" in fields:
        return f"{name}, family {fields['cpu family']} model {fields['model']}"
    return name


def machine_meta() -> dict:
    """Cores, CPU, Python and the day: the opening facts of a report."""
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }


def write_report(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)


def git(*args: str) -> str:
    """``git ARGS`` in the project: its output, stripped ("?" if git fails)."""
    result = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else "?"


def site_packages() -> Path:
    """This interpreter's site-packages: installed packages' sources, the benchmarks' real code trees."""
    return Path(sysconfig.get_paths()["purelib"])


def search_latency(searcher, strategy, queries: list[str]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """p50 and p95 milliseconds of ``searcher.search`` (a ``ctxrag.tasks.retrieval.search.Searcher``) over ``queries``, top 10."""
    times = []
    for query in queries:
        begun = time.perf_counter()
        searcher.search(query, strategy, 10)
        times.append((time.perf_counter() - begun) * 1000)
    times.sort()
    return round(statistics.median(times), 2), round(times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)], 2)


def private_env(home: Path, prefect_home: Path | None = None, **extra: str) -> dict[str, str]:
    """os.environ with CTXRAG_HOME = ``home`` and PREFECT_HOME = ``prefect_home`` (default ``home/prefect``), no other
    Prefect setting, and this project first on PYTHONPATH (its code is what runs, whatever the environment installed);
    ``extra`` last."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_") and name != "CI"}
    prefect_home = prefect_home or home / "prefect"
    prefect_home.mkdir(parents=True, exist_ok=True)  # Prefect creates PREFECT_HOME itself, but not its parents
    python_path = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update({"CTXRAG_HOME": str(home), "PREFECT_HOME": str(prefect_home), "PYTHONPATH": python_path, **extra})
    return env


def run_ctxrag(args: list[str], env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``ctxrag ARGS`` as a subprocess with ``env`` (see ``private_env``), its output captured as text; the benchmark
    stops with the end of its stderr if it fails."""
    result = subprocess.run(CTXRAG + args, env=env, capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        raise SystemExit(f"ctxrag {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


def stop_server(env: dict[str, str], cwd: Path = REPO) -> None:
    """``ctxrag server stop`` for the server the commands with ``env`` started (if any)."""
    subprocess.run(CTXRAG + ["server", "stop"], env=env, capture_output=True, timeout=120, cwd=cwd)
