"""The warm search doors on an index already built (the generated 1M-chunk one, or any): ``ctxrag mcp``,
``ctxrag serve-search`` and the resident search ``ctxrag search`` asks, each warmed by one query, then N questions of
the cookbook's evaluation set, one at a time, each new to it (latency from the client's call to its parsed answer),
and each service's RSS after (psutil: anonymous and file-backed, the index's mapped pages being the latter).

    .venv/bin/python benchmarks/services_at_scale.py --home HOME --name INDEX [--queries 200] [--out services_1m]

The services read the home and write nothing to it (a service keeps local query vectors in memory), so it is used as
it is, not copied. Writes benchmarks/results/OUT.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import httpx
from common import RESULTS, git, machine_meta, portable_path, private_env
from services import QUESTIONS, WARM_QUERY, http_latency, mcp_latency, percentiles, save_results, start_http

TARGET_P50_MS = 60.0


def memory_mb(pid: int) -> dict[str, float]:
    """A process's resident memory, anonymous and file-backed (/proc/PID/status), in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {name: round(int(fields[name].split()[0]) / 1024, 1) for name in ("VmRSS", "RssAnon", "RssFile")}


def resident_latency(home: Path, name: str, queries: list[str]) -> dict:
    """The resident search ``ctxrag search`` asks: started for ``home`` (private socket folder of its own), warmed,
    then the queries over its socket; latency and its memory after."""
    from ctxrag.services import resident_socket as resident

    runtime = Path(tempfile.mkdtemp(prefix="ctxrag-bench-", dir="/tmp"))
    saved = dict(os.environ)
    os.environ.update(private_env(home, XDG_RUNTIME_DIR=str(runtime), CTXRAG_SEARCH_IDLE_MINUTES="30"))
    try:
        path = resident.socket_path(home)
        assert path is not None
        resident.start(path, home, name)
        deadline = time.monotonic() + 600
        request = {"index": name, "k": 10, "strategy": None, "rerank": "", "rerank_model": ""}
        while resident.ask(path, {**request, "query": WARM_QUERY}) is None:
            if time.monotonic() > deadline:
                raise SystemExit("the resident search did not answer in 600 s")
            time.sleep(0.2)
        times, errors = [], 0
        for query in queries:
            begun = time.perf_counter()
            answer = resident.ask(path, {**request, "query": query})
            times.append((time.perf_counter() - begun) * 1000)
            errors += answer is None or len(answer["hits"]) != 10
        pid = int(resident.lock_path(path).read_text())
        memory = memory_mb(pid)
        resident.stop(path)
        return {**percentiles(times), "errors": errors, "memory_mb": memory}
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(runtime, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", default="services_1m")
    args = parser.parse_args()
    queries = [json.loads(line)["query"] for line in QUESTIONS.read_text().splitlines() if line.strip()][: args.queries]
    report: dict = {
        **machine_meta(),
        "commit": git("rev-parse", "--short", "HEAD"),
        "index": args.name,
        "home": portable_path(args.home, generated=True),
        "load_average_start": os.getloadavg(),
    }
    report["resident"] = resident_latency(args.home, args.name, queries)
    report["mcp"] = mcp_latency(args.home, queries, args.name)
    process, url = start_http(args.home, args.name)
    try:
        with httpx.Client(timeout=120) as client:
            report["http"] = http_latency(client, url, queries)
        report["http"]["memory_mb"] = memory_mb(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)
    save_results(report, args.out, lambda: render(report, args))
    print((RESULTS / f"{args.out}.md").read_text())


def render(report: dict, args: argparse.Namespace) -> str:
    rows = "".join(
        f"| {door} | {row['count']} | {row['p50_ms']} | {row['p99_ms']} | {row['max_ms']} | {row['errors']} | "
        f"{row['memory_mb']['VmRSS'] if 'memory_mb' in row else '-'} | "
        f"{'met' if row['p50_ms'] <= TARGET_P50_MS and not row['errors'] else 'NOT met'} |\n"
        for door, row in (
            ("resident search (`ctxrag search`)", report["resident"]),
            ("MCP (stdio)", report["mcp"]),
            ("HTTP", report["http"]),
        )
    )
    return (
        f"# The warm search doors on index {report['index']!r}\n\n{report['cpus']} cores ({report['cpu']}), Python {report['python']}, "
        f"{report['date']}, commit {report['commit']}; load average {', '.join(f'{v:.1f}' for v in report['load_average_start'])} at the "
        f"start, {', '.join(f'{v:.1f}' for v in report['load_average_end'])} at the end. `benchmarks/services_at_scale.py`: each door "
        f"warmed by one query, then {args.queries} questions of the cookbook's evaluation set, one at a time, each new to it, k=10; "
        f"milliseconds from the client's call to its parsed answer. RSS of the serving process after the questions (MB; the "
        f"json has anonymous and file-backed apart).\n\n"
        f"| door | queries | p50 ms | p99 ms | max ms | errors | RSS MB | target (p50 <= {TARGET_P50_MS:g} ms) |\n"
        f"|---|---|---|---|---|---|---|---|\n{rows}"
    )


if __name__ == "__main__":
    main()
