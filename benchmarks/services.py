"""The warm search services on the cookbook's codebase index: ``ctxrag mcp`` and ``ctxrag serve-search`` as their
clients see them. Each service runs as a subprocess on a fresh copy of the index's home (no query vector stored),
is warmed by one query outside the set, then answers the first N evaluation questions one after another (new
queries: latency p50/p99 from the client, with the MCP SDK's client and httpx). Then C concurrent HTTP clients ask
for S seconds (the questions in turn, each client from its own offset; ``--fresh-queries``: every request a query
never asked), counting errors and sampling the server's RSS every second, whole and anonymous (``RssAnon`` of
/proc/PID/status: the heap, not the pages of mapped files and libraries, which the kernel may drop and read again). Writes
benchmarks/results/services.md (and .json; ``--out`` names another)."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import threading
import time
from pathlib import Path

import anyio
import httpx
from common import CTXRAG, RESULTS, SHARED_DATA, git, machine_meta, portable_path, private_env, run_ctxrag, write_report

CORPUS, QUESTIONS = SHARED_DATA / "codebase" / "codebase_chunks.json", SHARED_DATA / "codebase" / "evaluation_set.jsonl"
WARM_QUERY = "where is the configuration read?"
TARGETS = {"p50_ms": 30.0, "p99_ms": 100.0}


def percentiles(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    at = lambda share: ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]  # noqa: E731
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(at(0.99), 2),
        "max_ms": round(ordered[-1], 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
        "count": len(ordered),
    }


def fresh_home(built: Path, copy: Path) -> Path:
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(built, copy)
    return copy


def mcp_latency(
    home: Path,
    queries: list[str],
    name: str = "codebase",
    server: list[str] = CTXRAG,
    env: dict[str, str] | None = None,
) -> dict:
    """p50/p99 of ``search`` tool calls to ``ctxrag mcp`` over stdio, one at a time, each a new query, with the MCP
    SDK's Python client (which checks each answer against the tool's output schema); ``server``: the command that
    runs ctxrag, ``env``: its environment (default: ``private_env(home)``)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    times: list[float] = []
    errors: list[str] = []

    async def run() -> None:
        params = StdioServerParameters(
            command=server[0], args=[*server[1:], "mcp", "--name", name], env=env or private_env(home)
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("search", {"query": WARM_QUERY, "k": 10})
            for query in queries:
                begun = time.perf_counter()
                result = await session.call_tool("search", {"query": query, "k": 10})
                times.append((time.perf_counter() - begun) * 1000)
                if result.is_error or len(result.structured_content["hits"]) != 10:  # type: ignore[index]
                    errors.append(query)

    anyio.run(run)
    return {**percentiles(times), "errors": len(errors)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_http(
    home: Path,
    name: str = "codebase",
    token: bool = False,
    server: list[str] = CTXRAG,
    env: dict[str, str] | None = None,
    no_token: list[str] | None = None,
) -> tuple[subprocess.Popen, str]:
    """``ctxrag serve-search --name NAME`` on a free loopback port, answering /health (with ``token``: the service's
    default, its token in ``home/search-token``, so /health answers 401 until asked with it); (process, base URL).
    ``server`` and ``env`` as ``mcp_latency``'s; ``no_token``: the flags that turn the token off (an older checkout
    had none)."""
    port = free_port()
    # --no-token by default: the figures here were measured before a token was the default (the check is one comparison)
    off = ["--no-token"] if no_token is None else no_token
    process = subprocess.Popen(
        server + ["serve-search", "--name", name, "--port", str(port), *([] if token else off)],
        env=env or private_env(home),
        stdout=subprocess.DEVNULL,
        stderr=open(home / "serve-search.log", "w"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        if process.poll() is not None:
            raise SystemExit(f"serve-search ended: {(home / 'serve-search.log').read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == (401 if token else 200):
                return process, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("serve-search did not answer in 300 s")
        time.sleep(0.2)


def http_latency(client: httpx.Client, url: str, queries: list[str]) -> dict:
    client.post(f"{url}/search", json={"query": WARM_QUERY, "k": 10}).raise_for_status()
    times, errors = [], 0
    for query in queries:
        begun = time.perf_counter()
        answer = client.post(f"{url}/search", json={"query": query, "k": 10})
        times.append((time.perf_counter() - begun) * 1000)
        errors += answer.status_code != 200 or len(answer.json()["hits"]) != 10
    return {**percentiles(times), "errors": errors}


def http_load(url: str, pid: int, queries: list[str], clients: int, seconds: float, fresh: bool) -> dict:
    """``clients`` threads asking in a loop for ``seconds``; errors, latency, and the server's RSS each second."""
    stop = threading.Event()
    lock = threading.Lock()
    times: list[float] = []
    failures: list[str] = []
    rss: list[tuple[float, float, float, float]] = []  # (s, RSS, anonymous, file-backed) in MB
    begun = time.perf_counter()

    def ask(number: int) -> None:
        with httpx.Client(timeout=60) as client:
            turn = number * 7
            while not stop.is_set():
                query = queries[turn % len(queries)] + (f" (request {number}-{turn})" if fresh else "")
                turn += 1
                start = time.perf_counter()
                try:
                    answer = client.post(f"{url}/search", json={"query": query, "k": 10})
                    ok = answer.status_code == 200 and len(answer.json()["hits"]) == 10
                    problem = "" if ok else f"{answer.status_code}: {answer.text[:200]}"
                except httpx.HTTPError as error:
                    problem = f"{type(error).__name__}: {error}"
                with lock:
                    times.append((time.perf_counter() - start) * 1000)
                    if problem:
                        failures.append(problem)

    def sample() -> None:
        while not stop.wait(1.0):
            rss.append((round(time.perf_counter() - begun, 1), *resident_mb(pid)))

    threads = [threading.Thread(target=ask, args=(number,)) for number in range(clients)] + [
        threading.Thread(target=sample)
    ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    after = [mb for at, mb, _, _ in rss if at >= 10]
    anon = [mb for at, _, mb, _ in rss if at >= 10]
    slope = _slope([(at, mb) for at, mb, _, _ in rss if at >= 10])
    return {
        "clients": clients,
        "seconds": seconds,
        "fresh_queries": fresh,
        "requests": len(times),
        "errors": len(failures),
        "first_errors": failures[:5],
        "requests_per_s": round(len(times) / seconds, 1),
        **{f"under_load_{k}": v for k, v in percentiles(times).items()},
        "rss_mb_at_10s": after[0] if after else None,
        "rss_mb_end": after[-1] if after else None,
        "rss_mb_max_after_10s": max(after) if after else None,
        "rss_mb_min_after_10s": min(after) if after else None,
        "rss_growth_mb_per_min_after_10s": slope,
        "anon_mb_at_10s": anon[0] if anon else None,
        "anon_mb_end": anon[-1] if anon else None,
        "anon_mb_min_after_10s": min(anon) if anon else None,
        "anon_mb_max_after_10s": max(anon) if anon else None,
        "anon_growth_mb_per_min_after_10s": _slope([(at, mb) for at, _, mb, _ in rss if at >= 10]),
        "rss_samples_columns": ["s", "rss_mb", "anon_mb", "file_mb"],
        "rss_samples": rss,
    }


def resident_mb(pid: int) -> tuple[float, float, float]:
    """MB of ``pid`` in memory: all (VmRSS), anonymous (RssAnon) and file-backed (RssFile), from /proc/PID/status."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return tuple(round(int(fields[name].split()[0]) / 1024, 1) for name in ("VmRSS", "RssAnon", "RssFile"))  # type: ignore[return-value]


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares MB per minute over ``points`` (seconds, MB)."""
    if len(points) < 3:
        return None
    mean_t, mean_m = statistics.fmean(t for t, _ in points), statistics.fmean(m for _, m in points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    return round(60 * sum((t - mean_t) * (m - mean_m) for t, m in points) / spread, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, required=True, help="scratch folder: the index is built here once")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--fresh-queries", action="store_true", help="also load with a never-asked query per request")
    parser.add_argument("--out", default="services", help="the results' name: benchmarks/results/OUT.md and .json")
    parser.add_argument(
        "--fresh-seconds", type=float, default=150, help="how long: past the 10,000 query vectors a service keeps"
    )
    args = parser.parse_args()
    built = args.home / "built"
    if not (built / "indexes" / "codebase").is_dir():
        run_ctxrag(["index", str(CORPUS), "--name", "codebase"], private_env(built, CTXRAG_PREFECT_SERVER="temporary"))
    questions = [json.loads(line)["query"] for line in QUESTIONS.read_text().splitlines() if line.strip()]
    queries = questions[: args.queries]
    report: dict = {
        **machine_meta(),
        "commit": git("rev-parse", "--short", "HEAD"),
        "load_average_start": os.getloadavg(),
        "corpus": portable_path(CORPUS),
        "questions": portable_path(QUESTIONS),
        "targets": TARGETS,
    }
    report["mcp"] = mcp_latency(fresh_home(built, args.home / "mcp"), queries)
    process, url = start_http(fresh_home(built, args.home / "http"))
    try:
        with httpx.Client(timeout=60) as client:
            report["http"] = http_latency(client, url, queries)
        report["load"] = [http_load(url, process.pid, questions, args.clients, args.seconds, fresh=False)]
        if args.fresh_queries:
            report["load"].append(http_load(url, process.pid, questions, args.clients, args.fresh_seconds, fresh=True))
        report["server_alive_after"] = process.poll() is None and httpx.get(f"{url}/health").status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=60)
    save_results(report, args.out, lambda: render(report, args))


def save_results(report: dict, out: str, rendered) -> None:  # type: ignore[no-untyped-def]
    """The end's load average into ``report``, then benchmarks/results/OUT.json and OUT.md (``rendered()``)."""
    report["load_average_end"] = os.getloadavg()
    (RESULTS / f"{out}.json").write_text(json.dumps(report, indent=1) + "\n")
    write_report(RESULTS / f"{out}.md", rendered())


def render(report: dict, args: argparse.Namespace) -> str:
    def met(row: dict) -> str:
        return (
            "met"
            if row["p50_ms"] <= TARGETS["p50_ms"] and row["p99_ms"] <= TARGETS["p99_ms"] and not row["errors"]
            else "NOT met"
        )

    latency = "".join(
        f"| {door} | {row['count']} | {row['p50_ms']} | {row['p99_ms']} | {row['max_ms']} | {row['mean_ms']} | {row['errors']} | {met(row)} |\n"
        for door, row in (("MCP (stdio)", report["mcp"]), ("HTTP", report["http"]))
    )
    load = "".join(
        f"| {'a new query each' if row['fresh_queries'] else 'the questions in turn'} | {row['seconds']:g} | {row['requests']} ({row['requests_per_s']}/s) | {row['errors']} | "
        f"{row['under_load_p50_ms']} / {row['under_load_p99_ms']} | {row['rss_mb_at_10s']} | {row['rss_mb_min_after_10s']}-{row['rss_mb_max_after_10s']} | "
        f"{row['rss_mb_end']} | {row['rss_growth_mb_per_min_after_10s']} | {row['anon_mb_at_10s']} | {row['anon_mb_min_after_10s']}-{row['anon_mb_max_after_10s']} | "
        f"{row['anon_growth_mb_per_min_after_10s']} |\n"
        for row in report["load"]
    )
    return (
        f"# The warm search services\n\n{report['cpus']} cores ({report['cpu']}), Python {report['python']}, {report['date']}, commit "
        f"{report['commit']}. **A shared machine**: other sessions ran builds and tests at the same time (load average "
        f"{', '.join(f'{v:.1f}' for v in report['load_average_start'])} at the start, "
        f"{', '.join(f'{v:.1f}' for v in report['load_average_end'])} at the end). `benchmarks/services.py`: the index of "
        f"`{report['corpus']}` (offline defaults), questions from `{report['questions']}`, k=10. Each service is a subprocess on a fresh "
        f"copy of the index's home (no query vector stored), warmed by one query outside the set; then {args.queries} questions, "
        f"one at a time, each new to it; milliseconds from the client's call to its parsed answer.\n\n"
        f"| door | queries | p50 ms | p99 ms | max ms | mean ms | errors | target (p50 <= 30, p99 <= 100, no error) |\n|---|---|---|---|---|---|---|---|\n{latency}\n"
        f"{args.clients} concurrent HTTP clients on the same server (after the latency run), the server's RSS sampled each second "
        f"(growth: least squares over the samples after the first 10 s; every sample in {args.out}.json), whole and anonymous "
        f"(`RssAnon`: the heap; the rest is pages of mapped files and libraries, bounded by their size). A new query each: the "
        f"service keeps the 10,000 latest query vectors in memory (`Index(long_lived=True)`), so its RSS grows until then:\n\n"
        f"| queries | s | requests | errors | p50 / p99 ms under load | RSS MB at 10 s | RSS MB after 10 s (min-max) | RSS MB at end | growth MB/min "
        f"| anon MB at 10 s | anon MB after 10 s (min-max) | anon growth MB/min |\n"
        f"|---|---|---|---|---|---|---|---|---|---|---|---|\n{load}\nServer still answering after the load: {report['server_alive_after']}.\n"
    )


if __name__ == "__main__":
    main()
