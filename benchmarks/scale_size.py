"""One size of `benchmarks/scale.py`: `ctxrag index` in a fresh CTXRAG_HOME, its process tree sampled
(scale_sampler.py), its task runs counted, then `ctxrag search` timed as a process and, in a helper process of its
own (scale.py's `_latency` mode), the loaded index's query latency; the size's local Prefect server stopped at the end."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import CTXRAG, REPO, portable_path, portable_text, private_env, stop_server  # benchmarks/common.py
from scale_corpus import QUERIES, import_measured_code
from scale_sampler import process_stats, run_measured

SCRIPT = Path(__file__).resolve().with_name("scale.py")  # the driver, whose helper modes run seeding and latency
SEARCH_QUERY = "how are failed tasks retried with a delay"
CODE: Path | None = None  # --code: the ctxrag source the runs import (None: this project's); scale.py sets it


def run_env(home: Path) -> dict[str, str]:
    """The size's private CTXRAG_HOME and PREFECT_HOME; --code's copy first on PYTHONPATH if given."""
    return private_env(home, **({"PYTHONPATH": str(CODE), "CTXRAG_SCALE_CODE": str(CODE)} if CODE is not None else {}))

FINISHED = re.compile(r"Task run '([^']+)' - Finished in state (\w+)")


def _by_task(names: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        base = re.sub(r"-[0-9a-f]+$", "", name)  # Prefect's run name: "load_corpus-1a2"
        counts[base] = counts.get(base, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def count_task_runs(home: Path) -> dict[str, object]:
    """Task runs that finished, from the run's own log (Prefect logs "Task run 'NAME' - Finished in state S" to
    stderr: exact, and available for a killed run too), and the task runs the run's Prefect database recorded
    (the server writes them from events; some may be missing when the process ends)."""
    runs: dict[str, object] = {}
    try:
        found = FINISHED.findall((home / "index.err").read_text(errors="replace"))
        states: dict[str, int] = {}
        for _, state in found:
            states[state] = states.get(state, 0) + 1
        runs.update({"total": len(found), "states": states, "by_task": _by_task([name for name, _ in found])})
    except OSError as error:
        runs.update({"total": None, "note": f"no run log: {error}"})
    database = home / "prefect" / "prefect.db"
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as connection:
            runs["database_total"] = connection.execute("SELECT count(*) FROM task_run").fetchone()[0]
            runs["flow_runs"] = connection.execute("SELECT count(*) FROM flow_run").fetchone()[0]
    except sqlite3.Error as error:
        runs["database_note"] = f"could not read {database}: {error}"
    return runs


def time_search(home: Path, name: str, runs: int = 3) -> dict[str, object]:
    """`ctxrag search QUERY --json` as a process: median wall seconds over ``runs``, peak RSS of the first."""
    walls, first = [], None
    for attempt in range(runs):
        result = run_measured(
            CTXRAG + ["search", SEARCH_QUERY, "--name", name, "--json"], run_env(home), 600,
            home / f"search-{attempt}.out", home / f"search-{attempt}.err", CODE or REPO,
        )
        if result["exit_code"] != 0:
            return {"error": (home / f"search-{attempt}.err").read_text()[-2000:]}
        walls.append(result["wall_seconds"])
        first = first or result
    return {"wall_seconds": round(statistics.median(walls), 2), "walls": walls, "peak_rss_mb": first["peak_rss_sum_mb"]}


def time_queries(home: Path, name: str) -> dict[str, object]:
    """In-process query latency, measured in a helper process (this script's `_latency` mode)."""
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "_latency", str(home), name],
        env=run_env(home), capture_output=True, text=True, cwd=CODE or REPO, timeout=1800,
    )
    if result.returncode:
        return {"error": result.stderr[-2000:]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def bench_size(label: str, family: str, source: Path, options: list[str], timeout: float, keep: bool,
               seed: bool = False, note: str = "", seed_contexts: bool = False, generated: bool = False) -> dict[str, object]:
    home = Path(tempfile.mkdtemp(prefix=f"ctxrag-scale-{label}-"))
    name = label.replace("_", "-")
    record: dict[str, object] = {
        "size": label, "family": family, "source": portable_path(source, generated), "options": options, "note": note,
        "home": portable_path(home), "load_average_before": [round(value, 2) for value in os.getloadavg()],
    }
    print(f"\n== {label}: {source} {' '.join(options)} (home {home})", flush=True)
    try:
        if seed:
            print("   pre-seeding the embeddings cache (fast path) ...", flush=True)
            seeded = subprocess.run(
                [sys.executable, str(SCRIPT), "_seed", str(home), str(source), *(["contexts"] if seed_contexts else [])],
                env=run_env(home), capture_output=True, text=True, cwd=CODE or REPO,
            )
            if seeded.returncode:
                raise RuntimeError(f"seeding failed:\n{seeded.stderr[-3000:]}")
            record["seeded"] = json.loads(seeded.stdout.strip().splitlines()[-1])
            print(f"   seeded {record['seeded']['rows']} vectors in {record['seeded']['seconds']} s", flush=True)
        command = CTXRAG + ["index", str(source), "--name", name, *options, "--json"]
        print(f"   ctxrag index (timeout {timeout / 60:.0f} min) ...", flush=True)
        measured = run_measured(command, run_env(home), timeout, home / "index.out", home / "index.err", CODE or REPO)
        record["index"] = measured
        record["load_average_after"] = [round(value, 2) for value in os.getloadavg()]
        record["task_runs"] = count_task_runs(home)
        if measured["timed_out"]:
            record["status"] = "timeout"
            record["stderr_tail"] = portable_text(_tail(home / "index.err"))
            print(f"   TIMEOUT after {measured['wall_seconds']} s", flush=True)
            return record
        if measured["exit_code"] != 0:
            record["status"] = "failed"
            record["stderr_tail"] = portable_text(_tail(home / "index.err"))
            print(f"   FAILED (exit {measured['exit_code']}):\n{record['stderr_tail']}", flush=True)
            return record
        report = json.loads((home / "index.out").read_text().strip().splitlines()[-1])
        record["report"] = {key: value for key, value in report.items() if key != "warnings"}
        record["warnings"] = len(report["warnings"])
        record["status"] = "ok"
        print(f"   indexed {report['chunks']} chunks in {measured['wall_seconds']} s; stages {report['seconds']}; "
              f"embedded {report['chunks_embedded']}; peak RSS {measured['peak_rss_sum_mb']} MB; "
              f"threads {measured['peak_threads']}; task runs {record['task_runs'].get('total')}", flush=True)
        record["search"] = time_search(home, name)
        record["queries"] = time_queries(home, name)
        print(f"   search process {record['search'].get('wall_seconds')} s; "
              f"hybrid p50 {record['queries'].get('hybrid_p50_ms')} ms", flush=True)
        return record
    finally:
        stop_server(run_env(home))  # the local Prefect server the size's first command started in its fresh home
        if not keep:
            shutil.rmtree(home, ignore_errors=True)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def measure_latency(home: Path, name: str) -> None:
    """Load the index and time QUERIES (hybrid, the default strategy, then vector and BM25 alone; each query embedded
    once per strategy, as a fresh query is); the model is loaded and warmed first. Then hybrid and the default again
    with the query vectors already made (``*_ranking``): the part of a query that depends on the index's size."""
    import_measured_code()
    os.environ["CTXRAG_HOME"] = str(home)
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY, Searcher, Strategy

    started = time.perf_counter()
    index = IndexStore(home).open(name)
    open_seconds = time.perf_counter() - started
    searcher = Searcher(index)
    searcher.search("warm up the model", Strategy.HYBRID, 10)
    result: dict[str, object] = {"open_seconds": round(open_seconds, 3), "queries": len(QUERIES), "default": DEFAULT_STRATEGY,
                                 "rss_mb": round((process_stats(os.getpid()) or (0, 0, 0.0))[0] / 2**20, 1)}
    fused = list(dict.fromkeys([Strategy.HYBRID, Strategy(DEFAULT_STRATEGY)]))
    for number, strategy in enumerate([*fused, Strategy.VECTOR, Strategy.BM25]):
        if number:
            searcher._query_vectors.clear()  # each strategy pays the query embedding, as a fresh query does
        key = strategy.value.replace("-", "_")
        result[f"{key}_p50_ms"], result[f"{key}_p95_ms"] = _timed(searcher, strategy)
    searcher.prefetch(QUERIES)
    for strategy in fused:
        result[f"{strategy.value.replace('-', '_')}_ranking_p50_ms"] = _timed(searcher, strategy)[0]
    result.update(ann_recall(index.ranker, [searcher.query_vector(query) for query in QUERIES]))
    print(json.dumps(result))


def ann_recall(ranker, vectors: list) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """A large version's approximate vector ranking (FUSION_DEPTH deep, as the fusions read it) against exact cosine
    over the same stored rows: recall@10 and @FUSION_DEPTH over ``vectors`` (none: the version searches exactly)."""
    from ctxrag.storage.ann import AnnVectorIndex
    from ctxrag.storage.fusion import FUSION_DEPTH
    from ctxrag.storage.vectors import normalize_rows, top_rows

    if not isinstance(getattr(ranker, "vectors", None), AnnVectorIndex):
        return {"ann": None}
    recalls: dict[int, list[float]] = {10: [], FUSION_DEPTH: []}
    for vector in vectors:
        found = [row for row, _ in ranker.rank_vector(vector, FUSION_DEPTH)]
        exact = top_rows(ranker.vectors.matrix @ normalize_rows(vector.reshape(1, -1))[0], FUSION_DEPTH)
        for depth, values in recalls.items():
            values.append(len(set(found[:depth]) & set(exact[:depth])) / depth)
    return {"ann": ranker.vectors.label, "ann_recall_queries": len(vectors),
            **{f"ann_recall_at_{depth}": round(statistics.mean(values), 4) for depth, values in recalls.items()}}


def _timed(searcher, strategy) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """p50 and p95 milliseconds of ``searcher.search`` over QUERIES, top 10."""
    times = []
    for query in QUERIES:
        begun = time.perf_counter()
        searcher.search(query, strategy, 10)
        times.append((time.perf_counter() - begun) * 1000)
    times.sort()
    return round(statistics.median(times), 2), round(times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)], 2)
