"""One size of `benchmarks/scale.py`: `ctxrag index` in a fresh CTXRAG_HOME with its process tree sampled (psutil:
RSS, threads, CPU; killed by pid past its timeout), its task runs counted, `ctxrag search` timed, and in a helper
process the loaded index's query latency; the size's local Prefect server stopped at the end."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil
from common import (  # benchmarks/common.py
    CTXRAG,
    REPO,
    portable_path,
    portable_text,
    private_env,
    search_latency,
    stop_server,
)
from scale_corpus import QUERIES, import_measured_code

SAMPLE_PERIOD = 0.2
TIMELINE_PERIOD = 5.0  # seconds between two points of the memory/thread timeline kept in scale.json
MB = 2**20


def tree(root: int) -> list[psutil.Process]:
    """``root`` and its descendants (empty once ``root`` is gone)."""
    try:
        process = psutil.Process(root)
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return []


def label(process: psutil.Process) -> str:
    try:
        command = process.cmdline()
    except psutil.Error:
        return "?"
    text = " ".join(
        Path(part).name if index == 0 or part.startswith("/") else part for index, part in enumerate(command)
    )
    if "uvicorn" in text or ("prefect" in text and "server" in text):
        return "prefect server: " + text[:80]
    return text[:100] or "?"


class TreeSampler:
    """Peaks of a process tree over its samples: resident memory and threads, summed and per process; CPU seconds."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak_rss_sum = self.peak_threads = self.peak_processes = self.samples = 0
        self.peak_by_pid: dict[int, int] = {}
        self.threads_by_pid: dict[int, int] = {}
        self.label_by_pid: dict[int, str] = {}
        self.cpu_by_pid: dict[int, float] = {}
        self.timeline: list[dict[str, float]] = []

    def sample(self, elapsed: float) -> None:
        rss_sum = threads = alive = 0
        for process in tree(self.root):
            try:
                with process.oneshot():
                    rss, count, cpu = process.memory_info().rss, process.num_threads(), sum(process.cpu_times()[:2])
            except psutil.Error:
                continue
            pid = process.pid
            self.label_by_pid.setdefault(pid, label(process))
            alive, rss_sum, threads = alive + 1, rss_sum + rss, threads + count
            self.peak_by_pid[pid] = max(self.peak_by_pid.get(pid, 0), rss)
            self.threads_by_pid[pid] = max(self.threads_by_pid.get(pid, 0), count)
            self.cpu_by_pid[pid] = cpu
        if alive:
            self.samples += 1
            self.peak_rss_sum, self.peak_threads = max(self.peak_rss_sum, rss_sum), max(self.peak_threads, threads)
            self.peak_processes = max(self.peak_processes, alive)
            if elapsed >= TIMELINE_PERIOD * len(self.timeline):
                self.timeline.append({"t": round(elapsed, 1), "rss_mb": round(rss_sum / MB, 1), "threads": threads})

    def summary(self) -> dict[str, object]:
        largest = max(self.peak_by_pid, key=self.peak_by_pid.__getitem__) if self.peak_by_pid else None
        processes = sorted(
            (
                {
                    "pid": pid,
                    "what": self.label_by_pid.get(pid, "?"),
                    "peak_rss_mb": round(rss / MB, 1),
                    "peak_threads": self.threads_by_pid.get(pid, 0),
                    "cpu_seconds": round(self.cpu_by_pid.get(pid, 0.0), 1),
                }
                for pid, rss in self.peak_by_pid.items()
            ),
            key=lambda row: -row["peak_rss_mb"],
        )
        return {
            "peak_rss_sum_mb": round(self.peak_rss_sum / MB, 1),
            "peak_rss_largest_mb": round(self.peak_by_pid[largest] / MB, 1) if largest else None,
            "largest_process": self.label_by_pid.get(largest, "?") if largest else None,
            "peak_threads": self.peak_threads,
            "peak_threads_largest": self.threads_by_pid.get(largest, 0) if largest else None,
            "peak_processes": self.peak_processes,
            "cpu_seconds": round(sum(self.cpu_by_pid.values()), 1),
            "samples": self.samples,
            "processes": processes,
            "timeline": self.timeline,
        }


def run_measured(
    command: list[str], env: dict[str, str], timeout: float, stdout_path: Path, stderr_path: Path, cwd: Path
) -> dict[str, object]:
    """Run ``command`` in ``cwd``, sampling its process tree; returns wall seconds, exit code, timeout flag and the
    samples. Past the timeout, the processes of its tree (the ones this benchmark started, by pid) are killed."""
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, cwd=cwd)
        sampler, code, timed_out = TreeSampler(process.pid), None, False
        while code is None:
            sampler.sample(time.perf_counter() - started)
            try:
                code = process.wait(timeout=SAMPLE_PERIOD)
            except subprocess.TimeoutExpired:
                if time.perf_counter() - started > timeout:
                    timed_out = True
                    for child in reversed(tree(process.pid)):  # children first
                        try:
                            child.kill()
                        except psutil.Error:
                            pass
                    code = process.wait()
        wall = time.perf_counter() - started
    return {"wall_seconds": round(wall, 2), "exit_code": code, "timed_out": timed_out, **sampler.summary()}


SCRIPT = Path(__file__).resolve().with_name("scale.py")  # the driver, whose helper modes run seeding and latency
SEARCH_QUERY = "how are failed tasks retried with a delay"
CODE: Path | None = None  # --code: the ctxrag source the runs import (None: this project's); scale.py sets it


def run_env(home: Path) -> dict[str, str]:
    """The size's private CTXRAG_HOME and PREFECT_HOME; --code's copy first on PYTHONPATH if given."""
    return private_env(home, **({"PYTHONPATH": str(CODE), "CTXRAG_SCALE_CODE": str(CODE)} if CODE is not None else {}))


FINISHED = re.compile(r"Task run '([^']+)' - Finished in state (\w+)")


def count_task_runs(home: Path) -> dict[str, object]:
    """Task runs that finished, from the run's own log (Prefect logs "Task run 'NAME' - Finished in state S" to
    stderr: exact, and available for a killed run too), and the task runs the run's Prefect database recorded
    (the server writes them from events; some may be missing when the process ends)."""
    runs: dict[str, object] = {}
    try:
        found = FINISHED.findall((home / "index.err").read_text(errors="replace"))
        by_task = Counter(
            re.sub(r"-[0-9a-f]+$", "", name) for name, _ in found
        )  # Prefect's run name: "load_corpus-1a2"
        runs.update(
            {
                "total": len(found),
                "states": dict(Counter(state for _, state in found)),
                "by_task": dict(by_task.most_common()),
            }
        )
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
            CTXRAG + ["search", SEARCH_QUERY, "--name", name, "--json"],
            run_env(home),
            600,
            home / f"search-{attempt}.out",
            home / f"search-{attempt}.err",
            CODE or REPO,
        )
        if result["exit_code"] != 0:
            return {"error": (home / f"search-{attempt}.err").read_text()[-2000:]}
        walls.append(result["wall_seconds"])
        first = first or result
    return {"wall_seconds": round(statistics.median(walls), 2), "walls": walls, "peak_rss_mb": first["peak_rss_sum_mb"]}


def helper(mode: str, *args: str) -> subprocess.CompletedProcess:
    """scale.py's helper ``mode`` (``_seed``, ``_latency``) in a process of its own, importing the measured source."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), mode, *args],
        env=run_env(Path(args[0])),
        capture_output=True,
        text=True,
        cwd=CODE or REPO,
        timeout=3600,
    )


def last_json(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def bench_size(
    label: str,
    family: str,
    source: Path,
    options: list[str],
    timeout: float,
    keep: bool,
    seed: bool = False,
    note: str = "",
    seed_contexts: bool = False,
    generated: bool = False,
) -> dict[str, object]:
    home = Path(tempfile.mkdtemp(prefix=f"ctxrag-scale-{label}-"))
    name = label.replace("_", "-")
    record: dict[str, object] = {
        "size": label,
        "family": family,
        "source": portable_path(source, generated),
        "options": options,
        "note": note,
        "home": portable_path(home),
        "load_average_before": [round(value, 2) for value in os.getloadavg()],
    }
    print(f"\n== {label}: {source} {' '.join(options)} (home {home})", flush=True)
    try:
        if seed:
            print("   pre-seeding the embeddings cache (fast path) ...", flush=True)
            seeded = helper("_seed", str(home), str(source), *(["contexts"] if seed_contexts else []))
            if seeded.returncode:
                raise RuntimeError(f"seeding failed:\n{seeded.stderr[-3000:]}")
            record["seeded"] = last_json(seeded)
            print(f"   seeded {record['seeded']['rows']} vectors in {record['seeded']['seconds']} s", flush=True)
        command = CTXRAG + ["index", str(source), "--name", name, *options, "--json"]
        print(f"   ctxrag index (timeout {timeout / 60:.0f} min) ...", flush=True)
        measured = run_measured(command, run_env(home), timeout, home / "index.out", home / "index.err", CODE or REPO)
        record["index"] = measured
        record["load_average_after"] = [round(value, 2) for value in os.getloadavg()]
        record["task_runs"] = count_task_runs(home)
        if measured["timed_out"] or measured["exit_code"] != 0:
            record["status"] = "timeout" if measured["timed_out"] else "failed"
            record["stderr_tail"] = portable_text(
                "\n".join((home / "index.err").read_text(errors="replace").splitlines()[-30:])
            )
            print(
                f"   {record['status'].upper()} after {measured['wall_seconds']} s (exit {measured['exit_code']}):\n{record['stderr_tail']}",
                flush=True,
            )
            return record
        report = json.loads((home / "index.out").read_text().strip().splitlines()[-1])
        record["report"] = {key: value for key, value in report.items() if key != "warnings"}
        record["warnings"] = len(report["warnings"])
        record["status"] = "ok"
        print(
            f"   indexed {report['chunks']} chunks in {measured['wall_seconds']} s; stages {report['seconds']}; "
            f"embedded {report['chunks_embedded']}; peak RSS {measured['peak_rss_sum_mb']} MB; "
            f"threads {measured['peak_threads']}; task runs {record['task_runs'].get('total')}",
            flush=True,
        )
        record["search"] = time_search(home, name)
        latency = helper("_latency", str(home), name)
        record["queries"] = {"error": latency.stderr[-2000:]} if latency.returncode else last_json(latency)
        print(
            f"   search process {record['search'].get('wall_seconds')} s; "
            f"hybrid p50 {record['queries'].get('hybrid_p50_ms')} ms",
            flush=True,
        )
        return record
    finally:
        stop_server(run_env(home))  # the local Prefect server the size's first command started in its fresh home
        if not keep:
            shutil.rmtree(home, ignore_errors=True)


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
    result: dict[str, object] = {
        "open_seconds": round(open_seconds, 3),
        "queries": len(QUERIES),
        "default": DEFAULT_STRATEGY,
        "rss_mb": round(psutil.Process().memory_info().rss / 2**20, 1),
    }
    fused = list(dict.fromkeys([Strategy.HYBRID, Strategy(DEFAULT_STRATEGY)]))
    for number, strategy in enumerate([*fused, Strategy.VECTOR, Strategy.BM25]):
        if number:
            searcher._query_vectors.clear()  # each strategy pays the query embedding, as a fresh query does
        key = strategy.value.replace("-", "_")
        result[f"{key}_p50_ms"], result[f"{key}_p95_ms"] = search_latency(searcher, strategy, QUERIES)
    searcher.prefetch(QUERIES)
    for strategy in fused:
        result[f"{strategy.value.replace('-', '_')}_ranking_p50_ms"] = search_latency(searcher, strategy, QUERIES)[0]
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
    return {
        "ann": ranker.vectors.label,
        "ann_recall_queries": len(vectors),
        **{f"ann_recall_at_{depth}": round(statistics.mean(values), 4) for depth, values in recalls.items()},
    }
