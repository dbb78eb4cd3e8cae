"""What each `ctxrag` command costs as a user runs it, without a running Prefect server and with one (speed issue).

    .venv/bin/python benchmarks/commands.py [--shared-data PATH] [--out benchmarks/results] [--repeats 3]

Two modes, each from nothing (fresh CTXRAG_HOME, PREFECT_HOME, model and cache folders), run one after the other:
- ``temporary``: ``CTXRAG_PREFECT_SERVER=temporary``, Prefect's temporary server inside every command (the old way);
- ``reused``: the default, the local server the first command starts and later ones reuse.
In each: a bad input, the cookbook corpus indexed cold, re-indexed with nothing changed, evaluated (first time: its
queries are embedded; again: stored), searched with a query seen before and with new queries, and the README's
sample indexed and evaluated; last, the cookbook indexed and evaluated in a second CTXRAG_HOME of the same user (the
query export exists; the local server is reused). Each command is a subprocess; wall time and its CPU time (user + sys
of the command and its children, from ``resource.getrusage``, plus the local server's CPU while the command ran, from
its pid with psutil) are recorded; repeated commands report the median. Writes commands.json and commands.md. Public
tools only (subprocess, resource, statistics, psutil).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from common import REPO, RESULTS, SHARED_DATA, cpu_model, failed, git, private_env, run_ctxrag, server_cpu_seconds, stop_server  # benchmarks/common.py

MODES = {"temporary": {"CTXRAG_PREFECT_SERVER": "temporary"}, "reused": {"CTXRAG_PREFECT_SERVER": "background"}}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(args: list[str], env: dict[str, str], expect_ok: bool = True) -> dict[str, float]:
    """One command: wall seconds, CPU seconds (of it and its children, reaped, plus what the local server it talks to
    spent meanwhile, read from the server's pid), its exit code."""
    prefect_home = Path(env["PREFECT_HOME"])
    server_before = server_cpu_seconds(prefect_home)
    cpu_before, start = _children_cpu(), time.perf_counter()
    result = run_ctxrag(args, env, check=False, timeout=1800)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu_before
    server = server_cpu_seconds(prefect_home) - server_before
    if expect_ok and result.returncode != 0:
        raise failed(args, result.returncode, result.stderr)
    return {"wall": wall, "cpu": cpu + server, "server_cpu": server, "code": result.returncode}


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in ("wall", "cpu", "server_cpu")} | {"runs": len(runs)}


def bench_mode(mode: str, shared: Path, scratch: Path, repeats: int) -> dict[str, dict[str, float]]:
    base = scratch / mode
    env = private_env(base / "home", base / "prefect", CTXRAG_MODELS_DIR=str(base / "models"), CTXRAG_CACHE_DIR=str(base / "cache"),
                      COLUMNS="200", **MODES[mode])
    # a second CTXRAG_HOME of the same user: the machine-wide files (the query export) and the local server exist
    again = {**env, "CTXRAG_HOME": str(base / "home-2")}
    corpus, evalset = shared / "codebase" / "codebase_chunks.json", shared / "codebase" / "evaluation_set.jsonl"
    seen_query = json.loads(evalset.read_text().splitlines()[0])["query"]
    rows: dict[str, dict[str, float]] = {}
    try:
        rows["bad input (missing folder)"] = timed(["index", str(base / "missing")], env, expect_ok=False)
        rows["index cookbook, cold"] = timed(["index", str(corpus), "--name", "codebase"], env)
        rows["index cookbook, nothing changed"] = median_of([timed(["index", str(corpus), "--name", "codebase"], env) for _ in range(repeats)])
        rows["evaluate 248 questions, first"] = timed(["evaluate", str(evalset), "--name", "codebase"], env)
        rows["evaluate 248 questions, again"] = median_of([timed(["evaluate", str(evalset), "--name", "codebase"], env) for _ in range(repeats)])
        rows["search, a query seen before"] = median_of([timed(["search", seen_query, "--name", "codebase"], env) for _ in range(repeats)])
        rows["search, first new query"] = timed(["search", "first new query: how are ids hashed", "--name", "codebase"], env)
        rows["search, later new queries"] = median_of(
            [timed(["search", f"new query {i}: where is the config parsed", "--name", "codebase"], env) for i in range(repeats)]
        )
        sample, questions = REPO / "data" / "sample" / "corpus", REPO / "data" / "sample" / "questions.jsonl"
        rows["README: index the sample"] = timed(["index", str(sample)], env)
        rows["README: evaluate the sample"] = timed(["evaluate", str(questions)], env)
        rows["index cookbook, cold, a second CTXRAG_HOME"] = timed(["index", str(corpus), "--name", "codebase"], again)
        rows["evaluate 248 questions, first, a second CTXRAG_HOME"] = timed(["evaluate", str(evalset), "--name", "codebase"], again)
    finally:
        stop_server(env)
    return rows


def write(out: Path, results: dict[str, dict[str, dict[str, float]]], meta: dict[str, object]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "commands.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    lines = [
        "# What each command costs: without a running Prefect server, and with the reused local one",
        "",
        f"`benchmarks/commands.py`, {meta['date']}, commit {meta['commit']}, {meta['cpus']} CPUs ({meta['cpu']}), load average before: "
        f"{meta['load_before']}. One run of each mode, the two modes one after the other, each from nothing. Wall s / "
        "CPU s (user + sys of the command and its children, plus the local server's CPU while it ran, read from its pid). "
        "Repeated rows: median of "
        f"{meta['repeats']}. Embedder precision: {meta['precision']}.",
        "",
        "| command | temporary server (per command) | reused local server | wall ratio |",
        "|---|---:|---:|---:|",
    ]
    for command, temporary in results["temporary"].items():
        reused = results["reused"][command]
        ratio = temporary["wall"] / reused["wall"] if reused["wall"] else float("nan")
        lines.append(f"| {command} | {temporary['wall']:.2f} / {temporary['cpu']:.2f} | {reused['wall']:.2f} / {reused['cpu']:.2f} | {ratio:.2f}x |")
    lines += ["", "In the reused mode the first command (the cold index) also starts the server (its new database is "
              "seeded from the migrated, empty template, made first in a private scratch home); the rows after it reuse it, "
              "the second CTXRAG_HOME too (one server per user and PREFECT_HOME)."]
    (out / "commands.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    from ctxrag.tasks.embedding.precision import choose_precision

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(), "cpu": cpu_model(), "load_before": os.getloadavg()[0],
        "commit": git("rev-parse", "--short", "HEAD"),
        "repeats": options.repeats, "precision": "%s (%s)" % choose_precision(), "python": platform.python_version(),
    }
    scratch = Path(tempfile.mkdtemp(prefix="ctxrag-commands-"))
    try:
        results = {mode: bench_mode(mode, options.shared_data, scratch, options.repeats) for mode in MODES}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    write(options.out, results, meta)
    print((options.out / "commands.md").read_text())


if __name__ == "__main__":
    main()
