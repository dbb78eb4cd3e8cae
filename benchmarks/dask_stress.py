"""Paid contextualization on a local 2-worker Dask cluster, repeated: does any run hang, and how many calls are in flight?

    .venv/bin/python benchmarks/dask_stress.py [--runs 10] [--documents 30] [--chunks 8] [--burst 100] [--out benchmarks/results]

Each run: `ctxrag index CORPUS --contextualizer claude --task-runner dask --concurrency 4 --embedder voyage` against the
Anthropic SIMULATOR (test equipment: ``--latency`` s an answer, the first ``--burst`` 429) and the Voyage one; no new
answer for ``--stall`` s, or not done by ``--deadline``, is a hang (stacks to ``--dumps``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import CTXRAG, REPO, RESULTS, git, private_env, stop_server, write_report  # benchmarks/common.py
from scale_size import label, tree

from tests.equipment.anthropic_simulator import AnthropicSimulator  # test equipment
from tests.equipment.voyage_simulator import VoyageSimulator

FAKE_KEY = "sk-ant-simulator-only-0000000000"
FAKE_VOYAGE_KEY = "pa-simulator-only-0123456789abcdefghij"


@dataclass
class Outcome:
    outcome: str  # done, hang (no answer for the stall time, or past the deadline) or failed (an exit code)
    answers: int
    seconds: float
    peak_in_flight: int
    rate_limited: int
    longest_gap: float  # the longest time without a new answer, once requests began (a stall ridden out shows here)


def write_generated_corpus(path: Path, documents: int, chunks: int, words: int = 60) -> int:
    """A cookbook-format corpus of ``documents`` x ``chunks`` short chunks (below the cache minimum: no cache
    bookkeeping needed); returns the number of chunks."""
    records = []
    for d in range(documents):
        texts = [" ".join(f"d{d}c{c}w{w}" for w in range(words)) for c in range(chunks)]
        records.append(
            {
                "doc_id": f"doc{d}",
                "original_uuid": f"uuid-{d}",
                "content": "\n".join(texts),
                "chunks": [
                    {"chunk_id": f"doc{d}_chunk{c}", "original_index": c, "content": t} for c, t in enumerate(texts)
                ],
            }
        )
    path.write_text(json.dumps(records))
    return documents * chunks


def answers(simulator: AnthropicSimulator) -> int:
    return sum(1 for request in list(simulator.requests) if request.path == "/v1/messages" and request.status == 200)


def dump_stacks(leader: int, path: Path, simulator: AnthropicSimulator, native: bool = False) -> None:
    """Each process of the hung run (the command and its Dask nanny and workers): its command line and, with py-spy,
    its threads' Python stacks and locals (``native``: their C frames too); and what the simulator is answering."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    lines = [f"simulator: {simulator.in_flight} requests being answered, {len(simulator.requests)} received"]
    for process in tree(leader):
        lines.append(f"=== pid {process.pid}: {label(process)}")
        if Path(spy).is_file():
            flags = ["--native"] if native else []
            result = subprocess.run(
                [spy, "dump", *flags, "--locals", "--pid", str(process.pid)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            lines.append(result.stdout + result.stderr)
    path.write_text("\n".join(lines))


def one_run(corpus: Path, chunks: int, args: argparse.Namespace, number: int, prefect_home: Path) -> Outcome:
    with (
        AnthropicSimulator(latency_seconds=args.latency) as simulator,
        VoyageSimulator() as voyage,
        tempfile.TemporaryDirectory() as folder,
    ):
        if args.burst:
            simulator.fail_next(429, count=args.burst, retry_after=args.retry_after)
        # The stress run's one local Prefect server (with a temporary one each Dask worker would start its own).
        env = private_env(
            Path(folder),
            prefect_home,
            ANTHROPIC_BASE_URL=simulator.url,
            ANTHROPIC_API_KEY=FAKE_KEY,
            VOYAGE_BASE_URL=voyage.url,
            VOYAGE_API_KEY=FAKE_VOYAGE_KEY,
            CTXRAG_PREFECT_SERVER="background",
            CTXRAG_TASK_RUNNER="dask",
        )
        command = [
            *CTXRAG,
            "index",
            str(corpus),
            "--name",
            "stress",
            "--contextualizer",
            "claude",
            "--task-runner",
            "dask",
            "--concurrency",
            str(args.concurrency),
            "--embedder",
            "voyage",
        ]
        log = open(Path(folder) / "stderr.log", "w+")
        started = last_change = time.monotonic()
        process = subprocess.Popen(
            command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
        )
        seen, outcome, longest_gap = 0, "", 0.0
        try:
            while process.poll() is None:
                time.sleep(0.5)
                now, count = time.monotonic(), answers(simulator)
                if count != seen or not simulator.requests:  # the stall clock starts with the first request
                    seen, last_change = count, now
                elif count < chunks:
                    longest_gap = max(longest_gap, now - last_change)
                if (count < chunks and now - last_change > args.stall) or now - started > args.deadline:
                    outcome = "hang"
                    args.dumps.mkdir(parents=True, exist_ok=True)
                    dump_stacks(process.pid, args.dumps / f"hang-{number}.txt", simulator, args.native)
                    break
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the run's whole process group: nothing it started outlives it
            except ProcessLookupError:
                pass
            process.wait()
        if not outcome:
            outcome = "done" if process.returncode == 0 else f"failed ({process.returncode})"
            if process.returncode != 0:
                log.seek(0)
                print(log.read()[-2000:])
        log.close()
        statuses = [r.status for r in list(simulator.requests) if r.path == "/v1/messages"]
        return Outcome(
            outcome,
            statuses.count(200),
            round(time.monotonic() - started, 1),
            simulator.peak_in_flight,
            statuses.count(429),
            round(longest_gap, 1),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--corpus", type=Path, help="a cookbook-format corpus (default: a generated one)")
    parser.add_argument("--documents", type=int, default=30)
    parser.add_argument("--chunks", type=int, default=8, help="chunks per generated document")
    parser.add_argument("--latency", type=float, default=0.1, help="the simulator's seconds per answer")
    parser.add_argument("--burst", type=int, default=100, help="the first requests answered 429")
    parser.add_argument("--retry-after", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--stall", type=float, default=90.0, help="seconds without a new answer that make a hang")
    parser.add_argument("--deadline", type=float, default=600.0)
    parser.add_argument("--dumps", type=Path, default=Path(tempfile.gettempdir()) / "ctxrag-dask-stress")
    parser.add_argument("--native", action="store_true", help="py-spy dumps with native (C) frames")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--label", default="", help="what code ran (default: the commit)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.corpus:
            corpus = args.corpus
            chunks = sum(len(document["chunks"]) for document in json.loads(corpus.read_text()))
            described = f"{corpus.name} ({chunks} chunks)"
        else:
            corpus = Path(folder) / "corpus.json"
            chunks = write_generated_corpus(corpus, args.documents, args.chunks)
            described = f"a generated corpus ({args.documents} documents x {args.chunks} chunks = {chunks})"
        rows = []
        prefect_home = Path(folder) / "prefect"
        try:
            for number in range(1, args.runs + 1):
                rows.append(result := one_run(corpus, chunks, args, number, prefect_home))
                print(
                    f"run {number}: {result.outcome}, {result.answers} answers, {result.rate_limited} 429s, {result.seconds} s, "
                    f"at most {result.peak_in_flight} in flight, longest wait for an answer {result.longest_gap} s",
                    flush=True,
                )
        finally:
            stop_server(private_env(Path(folder) / "home", prefect_home))
    hangs = sum(1 for row in rows if row.outcome == "hang")
    lines = [
        "# Paid contextualization on a 2-worker Dask cluster, repeated (SIMULATED: the Anthropic simulator, test equipment)",
        "",
        f"Code: {args.label or git('rev-parse', '--short', 'HEAD')}. {described}; `ctxrag index --contextualizer claude "
        f"--task-runner dask --concurrency {args.concurrency} --embedder voyage` (LocalCluster: 2 worker processes x 2 threads) as a subprocess;",
        f"the Anthropic simulator answers after {args.latency} s, the first {args.burst} requests with 429 (`retry-after: {args.retry_after:g}`); the Voyage simulator embeds.",
        f"A hang: no new answer for {args.stall:g} s before every chunk is answered, or not done after {args.deadline:g} s. 2-core machine.",
        "",
        f'**{hangs} of {len(rows)} runs hung.** "in flight": the most requests open at once, both workers together (at most '
        '`--concurrency`: one budget per run). "longest wait": the longest time without a new answer before the last chunk\'s.',
        "",
        "| run | outcome | answers | 429s | seconds | max in flight | longest wait (s) |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {n} | {r.outcome} | {r.answers} | {r.rate_limited} | {r.seconds} | {r.peak_in_flight} | {r.longest_gap} |"
            for n, r in enumerate(rows, 1)
        ),
    ]
    write_report(args.out / "dask_stress.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
