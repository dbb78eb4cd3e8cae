"""Paid runs at the API's limits, on the codebase corpus, against the Anthropic SIMULATOR (test equipment).

    .venv/bin/python benchmarks/paid_limits.py [--shared-data PATH] [--concurrency 4] [--out benchmarks/results]

Runs `ctxrag index ... --contextualizer claude` as a user does (a subprocess; the SDK pointed at a simulator on
127.0.0.1) three times and prints what the simulator measured: calls, requests open at once at most, 429s ridden
out, and the calls repeated after a SIGKILL followed by `ctxrag gc` and the same command. Every figure is the
simulator's (its token counts are not real ones; its latency is a setting), none is from the API.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from common import CTXRAG, RESULTS, SHARED_DATA, failed, private_env, start_ctxrag, write_report  # benchmarks/common.py
from tests.equipment.anthropic_simulator import AnthropicSimulator  # noqa: E402  (test equipment)

LATENCY_S = 0.1
FAKE_KEY = "sk-ant-simulator-only-0000000000"


def call_identity(request) -> str:  # type: ignore[no-untyped-def]
    """Which chunk of which document a request asked about (the whole prompt), so repeats can be counted."""
    blocks = request.json["messages"][0]["content"]
    return hashlib.sha256(json.dumps(blocks, sort_keys=True).encode()).hexdigest()


def answered(simulator: AnthropicSimulator) -> list[str]:
    return [call_identity(r) for r in list(simulator.requests) if r.path == "/v1/messages" and r.status == 200]


def ctxrag(home: Path, simulator: AnthropicSimulator, *args: str) -> subprocess.Popen:
    env = private_env(home, ANTHROPIC_BASE_URL=simulator.url, ANTHROPIC_API_KEY=FAKE_KEY,
                      CTXRAG_PREFECT_SERVER="temporary")  # nothing outlives the command
    return start_ctxrag(list(args), env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def index(home: Path, simulator: AnthropicSimulator, corpus: Path, concurrency: int) -> subprocess.Popen:
    return ctxrag(home, simulator, "index", str(corpus), "--name", "paid", "--contextualizer", "claude", "--concurrency", str(concurrency))


def finish(process: subprocess.Popen) -> None:
    _, stderr = process.communicate()
    if process.returncode != 0:
        raise failed(process.args[len(CTXRAG) :], process.returncode, stderr)


def plain_run(corpus: Path, concurrency: int) -> dict[str, object]:
    with AnthropicSimulator(latency_seconds=LATENCY_S) as simulator, tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        finish(index(Path(folder), simulator, corpus, concurrency))
        return {"calls": len(answered(simulator)), "peak_in_flight": simulator.peak_in_flight, "seconds": round(time.perf_counter() - started, 1)}


def storm_run(corpus: Path, concurrency: int, storm: int = 150) -> dict[str, object]:
    with AnthropicSimulator(latency_seconds=LATENCY_S) as simulator, tempfile.TemporaryDirectory() as folder:
        simulator.fail_next(429, count=storm, retry_after=1)
        started = time.perf_counter()
        finish(index(Path(folder), simulator, corpus, concurrency))
        statuses = [r.status for r in simulator.requests if r.path == "/v1/messages"]
        return {"429s": statuses.count(429), "calls": statuses.count(200), "requests": len(statuses),
                "peak_in_flight": simulator.peak_in_flight, "seconds": round(time.perf_counter() - started, 1)}


def kill_run(corpus: Path, concurrency: int, chunks: int) -> dict[str, object]:
    with AnthropicSimulator(latency_seconds=LATENCY_S) as simulator, tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        process = index(home, simulator, corpus, concurrency)
        deadline = time.monotonic() + 600
        while len(answered(simulator)) < chunks // 3 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        first = answered(simulator)
        finish(ctxrag(home, simulator, "gc"))
        since = len(simulator.requests)
        finish(index(home, simulator, corpus, concurrency))
        second = [call_identity(r) for r in simulator.requests[since:] if r.path == "/v1/messages" and r.status == 200]
        return {"answered_before_kill": len(first), "calls_after_resume": len(second), "repeated_calls": len(set(first) & set(second)),
                "all_chunks_answered": len(set(first) | set(second)) == chunks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    corpus = args.shared_data / "codebase" / "codebase_chunks.json"
    chunks = sum(len(document["chunks"]) for document in json.loads(corpus.read_text()))
    plain = plain_run(corpus, args.concurrency)
    storm = storm_run(corpus, args.concurrency)
    killed = kill_run(corpus, args.concurrency, chunks)
    lines = [
        "# Paid runs at the API's limits (SIMULATED: the Anthropic simulator, test equipment; not the API)",
        "",
        f"Codebase corpus ({chunks} chunks), `ctxrag index --contextualizer claude --concurrency {args.concurrency}` as a subprocess;",
        f"the simulator answers each request after {LATENCY_S} s. One run on a 2-core machine.",
        "",
        "| run | what the simulator measured |",
        "|---|---|",
        f"| plain | {plain['calls']} calls, at most {plain['peak_in_flight']} requests open at once, {plain['seconds']} s |",
        f"| 429 storm (first 150 requests refused, `retry-after: 1`) | {storm['429s']} 429s ridden out, {storm['calls']} calls answered, "
        f"{storm['requests']} requests = calls + 429s: {storm['requests'] == storm['calls'] + storm['429s']}, at most {storm['peak_in_flight']} open, {storm['seconds']} s |",
        f"| SIGKILL at a third, `ctxrag gc`, same command | {killed['answered_before_kill']} answered before the kill, "
        f"{killed['calls_after_resume']} calls after, {killed['repeated_calls']} repeated (bound: {args.concurrency}), "
        f"every chunk answered: {killed['all_chunks_answered']} |",
    ]
    write_report(args.out / "paid_limits_simulated.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
