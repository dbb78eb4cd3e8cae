"""A new query's ``ctxrag search`` as a whole process, this checkout against an earlier one, side by side.

    .venv/bin/python benchmarks/search_process.py --base-code DIR --base-home HOME --home HOME --name INDEX
        [--runs 9] [--case later|first|alone] [--base-resident] [--base-python PY] [-k 5] [--queries JSONL [--first N]]
        [--out FILE]

Each round runs ``ctxrag search QUERY --name INDEX -k K`` (5 unless ``-k``) twice, with a query neither side has
seen (a made-up question with a new word each round; with ``--queries``, the next question of an evaluation set's
JSONL, e.g. the cookbook's: real questions, whose hits' matched lines are often chosen by meaning): once with
``--base-code`` first on ``PYTHONPATH`` against ``--base-home`` (``--base-python``: run by that interpreter, the base's
own virtualenv's, else by this one), once with this checkout against ``--home`` (the same index, in the files each
version of the code writes), in turn, which goes first alternating (``first``: the base first). Per process: wall
seconds, peak RSS and CPU seconds (``os.wait4``'s rusage), and the CPU seconds the side's resident search spent
meanwhile (``later``: where its search is done; from ``/proc``). Prints and writes the medians, the ratio this/base per
round, and the load average.

``--case`` is which search of this checkout is timed (the base side runs as it always has):
``later``: a search after an earlier one (or an index run) left a resident search process, started and answering
before the rounds; ``first``: the first search, with no resident search (each round stops it, after the timed search
started it and it answered, so it never runs during the other side's search); ``alone``: resident search off
(``CTXRAG_SEARCH_IDLE_MINUTES=0``, on both sides), the search in its own process, as before it existed. The resident searches live
in a private folder of the benchmark's own (``XDG_RUNTIME_DIR``), removed at the end. ``--base-resident`` (with
``later``): the base side asks a resident search of its own too, started before the rounds (two code trees, two
sockets): a later search of each tree, side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import CTXRAG, REPO, machine_meta  # benchmarks/common.py


def one_search(
    code: Path, home: Path, name: str, query: str, k: int = 5, python: Path | None = None, **extra: str
) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, CPU seconds: user + system) of one ``ctxrag search`` process (``python``: run by
    that interpreter, else as this checkout runs ``ctxrag``)."""
    env = {**os.environ, "PYTHONPATH": str(code), "CTXRAG_HOME": str(home), **extra}
    command = [str(python), "-c", "from ctxrag.cli import main; main()"] if python else CTXRAG
    started = time.perf_counter()
    process = subprocess.Popen(
        [*command, "search", query, "--name", name, "-k", str(k)],
        env=env,
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"ctxrag search failed ({code}): {process.stderr.read().decode() if process.stderr else ''}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def resident_sockets(runtime: Path) -> list[Path]:
    return sorted((runtime / "ctxrag").glob("*.sock"))


def stop_residents(runtime: Path) -> None:
    """SIGTERM every resident search started under ``runtime`` (pids in their lock files), and wait until gone."""
    for lock in (runtime / "ctxrag").glob("*.lock"):
        try:
            pid = int(lock.read_text())
            os.kill(pid, signal.SIGTERM)
        except (ValueError, OSError):
            continue
        while Path(f"/proc/{pid}").exists():
            time.sleep(0.05)
    for leftover in resident_sockets(runtime):
        leftover.unlink()


def resident_cpu(runtime: Path, home: Path) -> float:
    """CPU seconds (user + system) spent so far by the resident searches under ``runtime`` serving ``home`` (0 if
    none): a later search's work is done there, not in the ``ctxrag search`` process."""
    spent = 0.0
    for lock in (runtime / "ctxrag").glob("*.lock"):
        try:
            pid = int(lock.read_text())
            if str(home).encode() not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (ValueError, OSError):
            continue
        spent += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15
    return spent


def wait_for_resident(runtime: Path, seconds: float = 300, count: int = 1) -> None:
    """Until ``count`` resident searches listen (each binds its socket once warm)."""
    deadline = time.monotonic() + seconds
    while len(resident_sockets(runtime)) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"no resident search answered in {seconds:.0f} s")
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-code", type=Path, required=True)
    parser.add_argument("--base-home", type=Path, required=True)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--label", default="")
    parser.add_argument("--case", choices=("later", "first", "alone"), default="later")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--base-resident", action="store_true", help="later: the base asks a resident search too")
    parser.add_argument(
        "--base-python", type=Path, help="the base's interpreter (its own virtualenv); default: this one"
    )
    parser.add_argument("-k", type=int, default=5, help="hits a search asks for")
    parser.add_argument("--queries", type=Path, help="JSONL of {query}: round N asks the Nth (default: made up)")
    parser.add_argument("--first", type=int, default=0, help="--queries: round N asks the (FIRST + N)th")
    args = parser.parse_args()
    asked = [json.loads(line)["query"] for line in args.queries.read_text().splitlines()] if args.queries else []
    asked = asked[args.first :]
    base = {"k": args.k, "python": args.base_python}
    runtime = Path(tempfile.mkdtemp(prefix="ctxrag-bench-", dir="/tmp"))
    resident = {"XDG_RUNTIME_DIR": str(runtime), "CTXRAG_SEARCH_IDLE_MINUTES": "0" if args.case == "alone" else "30"}
    on_base = resident if args.base_resident and args.case == "later" else {}
    if args.case == "alone":  # resident search off on the base side too (else it leaves one for its next rounds)
        on_base = dict(resident)
    rounds = []
    try:
        if args.case == "later":
            one_search(REPO, args.home, args.name, "a first search, to leave a resident one", args.k, **resident)
            if on_base:
                one_search(args.base_code.resolve(), args.base_home, args.name, "a first search", **base, **on_base)
            wait_for_resident(runtime, count=2 if on_base else 1)
        load_before = os.getloadavg()
        for number in range(args.runs):
            query = asked[number] if asked else f"where is a request retried after a timeout {uuid.uuid4().hex[:8]}"

            def this_side() -> tuple[float, ...]:
                before = resident_cpu(runtime, args.home)
                found = one_search(REPO, args.home, args.name, query, args.k, **resident)
                return (*found, resident_cpu(runtime, args.home) - before)

            def base_side() -> tuple[float, ...]:
                before = resident_cpu(runtime, args.base_home)
                found = one_search(args.base_code.resolve(), args.base_home, args.name, query, **base, **on_base)
                return (*found, resident_cpu(runtime, args.base_home) - before)

            if number % 2 and args.case != "first":  # which side goes first alternates (first: the base, always)
                this, theirs = this_side(), base_side()
            else:
                theirs, this = base_side(), this_side()
            if args.case == "first":
                wait_for_resident(runtime)
                stop_residents(runtime)
            rounds.append(
                {
                    "base_s": theirs[0],
                    "base_mb": theirs[1],
                    "base_cpu": theirs[2],
                    "this_s": this[0],
                    "this_mb": this[1],
                }
                | {"this_cpu": this[2], "base_resident_cpu": theirs[3], "this_resident_cpu": this[3]}
            )
    finally:
        stop_residents(runtime)
        shutil.rmtree(runtime, ignore_errors=True)
    result = {
        "label": args.label,
        "case": args.case,
        "base resident": bool(on_base) and args.case == "later",
        "base python": "its own virtualenv" if args.base_python else "this virtualenv",
        "k": args.k,
        "queries": f"{args.queries.name} from question {args.first}" if args.queries else "made up",
        "index": args.name,
        "runs": args.runs,
        "base median s": statistics.median(r["base_s"] for r in rounds),
        "this median s": statistics.median(r["this_s"] for r in rounds),
        "ratio median": statistics.median(r["this_s"] / r["base_s"] for r in rounds),
        "CPU ratio median (process + resident)": statistics.median(
            (r["this_cpu"] + r["this_resident_cpu"]) / (r["base_cpu"] + r["base_resident_cpu"]) for r in rounds
        ),
        "base CPU median s": statistics.median(r["base_cpu"] for r in rounds),
        "this CPU median s": statistics.median(r["this_cpu"] for r in rounds),
        "base resident CPU median s": statistics.median(r["base_resident_cpu"] for r in rounds),
        "this resident CPU median s": statistics.median(r["this_resident_cpu"] for r in rounds),
        "base peak MB (max)": max(r["base_mb"] for r in rounds),
        "this peak MB (max)": max(r["this_mb"] for r in rounds),
        "load average before / after": [list(load_before), list(os.getloadavg())],
        "rounds": rounds,
        **machine_meta(),
    }
    print(json.dumps({key: value for key, value in result.items() if key != "rounds"}, indent=1))
    if args.out:
        found = json.loads(args.out.read_text()) if args.out.exists() else []
        args.out.write_text(json.dumps([*found, result], indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
