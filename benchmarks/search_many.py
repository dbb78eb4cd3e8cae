"""``Index.search_many`` against single ``Index.search`` calls, side by side in one run: the cookbook's 248 codebase
questions over its codebase corpus (indexed once by ``ctxrag index`` in SCRATCH), offline defaults, k=10. Each round
times both on fresh copies of the index's home (no query vector stored yet), opened and warmed by one other query, in
alternating order; their hits must be equal. Writes benchmarks/results/search_many.md (and .json)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

from common import RESULTS, SHARED_DATA, machine_meta, portable_path, private_env, run_ctxrag, write_report

CORPUS, QUESTIONS = SHARED_DATA / "codebase" / "codebase_chunks.json", SHARED_DATA / "codebase" / "evaluation_set.jsonl"


def timed(built: Path, copy: Path, method: str, queries: list[str]) -> tuple[float, float, list]:
    """(wall s, this process's CPU s, hits) of ``method`` for ``queries`` on a fresh copy of the ``built`` home."""
    import ctxrag

    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(built, copy)
    os.environ["CTXRAG_HOME"] = str(copy)
    index = ctxrag.open("codebase")
    index.search("where is the configuration read?", k=10)  # the query encoder loaded, as in a long-lived program
    start, cpu = time.perf_counter(), time.process_time()
    hits = (
        index.search_many(queries, k=10)
        if method == "search_many"
        else [index.search(query, k=10) for query in queries]
    )
    return time.perf_counter() - start, time.process_time() - cpu, hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, required=True, help="scratch folder: the index is built here once")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    built = args.home / "built"
    if not (built / "indexes" / "codebase").is_dir():
        run_ctxrag(["index", str(CORPUS), "--name", "codebase"], private_env(built, CTXRAG_PREFECT_SERVER="temporary"))
    queries = [json.loads(line)["query"] for line in QUESTIONS.read_text().splitlines() if line.strip()]
    runs: dict[str, list[tuple[float, float]]] = {"search": [], "search_many": []}  # (wall s, CPU s) per round
    for number in range(args.rounds):
        found = {
            method: timed(built, args.home / method, method, queries)
            for method in sorted(runs, reverse=number % 2 == 1)
        }
        assert found["search"][2] == found["search_many"][2], "search_many's hits differ from single searches'"
        for method, (seconds, used, _) in found.items():
            runs[method].append((seconds, used))
    median = {method: statistics.median(seconds for seconds, _ in values) for method, values in runs.items()}
    report = {
        **machine_meta(),
        "load_average": os.getloadavg(),
        "queries": len(queries),
        "corpus": portable_path(CORPUS),
        "wall_and_cpu_seconds": runs,
        "median": median,
        "speedup": median["search"] / median["search_many"],
    }
    (RESULTS / "search_many.json").write_text(json.dumps(report, indent=1) + "\n")
    rows = "".join(
        f"| {m} | {median[m]:.2f} | {', '.join(f'{w:.2f}' for w, _ in v)} | {', '.join(f'{c:.2f}' for _, c in v)} |\n"
        for m, v in runs.items()
    )
    write_report(
        RESULTS / "search_many.md",
        f"# search_many against single searches\n\n{report['cpus']} cores ({report['cpu']}), Python "
        f"{report['python']}, {report['date']}; load average {', '.join(f'{v:.1f}' for v in report['load_average'])} at the end "
        f"(a shared machine). `benchmarks/search_many.py`: {len(queries)} questions over `{report['corpus']}`, k=10, offline "
        f"defaults, {args.rounds} rounds side by side, hits equal in each.\n\n| method | median s | wall s | CPU s |\n|---|---|---|---|\n"
        f"{rows}\nsearch_many: {report['speedup']:.1f}x the speed of {len(queries)} single calls.\n",
    )


if __name__ == "__main__":
    main()
