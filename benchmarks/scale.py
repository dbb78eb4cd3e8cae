"""How each cost of `ctxrag index` and of a query grows with corpus size.

    .venv/bin/python benchmarks/scale.py [--sizes sample,cookbook,tree,synthetic] [--tree PATH]
                                         [--synthetic-chunks 100000] [--synthetic-steps 20000] [--synthetic-check 2000]
                                         [--timeout-minutes 40] [--out benchmarks/results] [--keep] [--code DIR]
                                         [--seed-contexts] [--merge]

For each size, `ctxrag index SOURCE --name N --json` runs as a subprocess in a fresh CTXRAG_HOME (PREFECT_HOME inside
it, so the run starts the local Prefect server, as a user's first run does; `ctxrag server stop` ends it after the
size). Every ~0.2 s the benchmark
samples the process tree (the ctxrag process and its children: Prefect's server subprocess) with psutil (or /proc without it): resident
memory (the sum over the tree and the largest single process) and threads (the sum of num_threads over the tree),
and each process's CPU seconds. The run's own report gives per-stage seconds ("seconds") and counts. Task runs are
counted from the run's log (Prefect's "Task run 'NAME' - Finished in state S" lines on stderr), and as recorded in the
run's Prefect database (sqlite, `$PREFECT_HOME/prefect.db`, table task_run), which can miss some. Then
`ctxrag search QUERY --json` is timed as a process (3 runs, median), and a helper process loads the index
(`IndexStore(...).open`, `Searcher`) and times 50 hybrid queries (p50, p95), plus vector and BM25 alone.

Sizes, in this order:
  sample     data/sample/corpus (README sample), structural contexts, local MiniLM embeddings
  cookbook   ../shared/data/codebase/codebase_chunks.json (737 chunks), same settings
  tree       a real code tree (default: torch/_inductor from this venv, ~8,500 chunks), same settings
  synthetic  generated cookbook-format JSON, 20 chunks per document, `--contextualizer none`, with a FAST PATH:
             the embeddings cache is pre-seeded with random unit vectors for exactly the keys the run asks for, so
             the embed stage reads stored vectors and never loads or runs the model. A small check size runs first
             and must report chunks_embedded == 0, else the larger synthetic sizes are skipped.

`--seed-contexts` (synthetic sizes) also pre-seeds the empty contexts, so the contextualize stage runs no
per-document task: the other stages at the same size, without it. `--merge` adds the sizes to --out's scale.json.

`--code DIR` runs ctxrag from another copy of the source (e.g. `git archive HEAD | tar -x -C DIR`), put first on
PYTHONPATH, ahead of the editable install: a fixed version to measure while the working tree is being edited.

A run that exceeds its timeout is killed (each process of its tree, by pid) and recorded as a timeout, with what
was measured until then. Writes scale.json and scale.md under --out. Figures from a 2-core machine shared with
other work are noisy: wall seconds especially; CPU seconds less so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import (  # benchmarks/common.py
    CTXRAG, REPO, RESULTS, SHARED_DATA, cpu_model, git, portable_path, portable_text, private_env, site_packages, stop_server,
)  # benchmarks/common.py

try:
    import psutil  # comes with the [test] and [dask] extras (via distributed), not with Prefect itself
except ImportError:  # read /proc instead (Linux)
    psutil = None

SAMPLE_PERIOD = 0.2
TIMELINE_PERIOD = 5.0  # seconds between two points of the memory/thread timeline kept in scale.json
STAGES = ("load", "contextualize", "embed", "publish")
CHUNKS_PER_DOCUMENT = 20
SEED_PART_ROWS = 10_000
DIMENSION = 384
SEARCH_QUERY = "how are failed tasks retried with a delay"
CODE: Path | None = None  # --code: the ctxrag source the runs import (None: the installed, editable one)

QUERIES = [
    "how are failed tasks retried with a delay", "where is the configuration file parsed", "open a database connection",
    "read the cache from disk", "compute the hash of a buffer", "register a callback for an event",
    "split a string into tokens", "check that the input shape is valid", "convert the tensor to a list",
    "lock shared state between threads", "write the result to a file", "raise an error when the key is missing",
    "iterate over the graph nodes", "schedule a job for later", "serialize the object to json",
    "decode the response from the server", "merge two sorted lists", "normalize the vector length",
    "build the index from documents", "load the model weights", "log a warning message", "timeout waiting for a reply",
    "parse command line arguments", "compile the kernel for the device", "free the allocated buffer",
    "find the shortest path", "default value of the option", "update the counter atomically", "flush the queue",
    "validate the schema of a record", "estimate the memory size", "cancel the running task", "retry with backoff",
    "fuse the loops into one", "replace the node in the graph", "guard against recursion", "emit the generated code",
    "match a pattern in the text", "cache the compiled function", "group rows by key", "sort items by priority",
    "reduce over an axis", "broadcast the shapes", "close the file handle", "resolve the import path",
    "count tokens in the text", "encode the batch", "track the elapsed time", "convert dtype to float", "dump the state",
]

# A seeded vocabulary for the synthetic corpus: code keywords, common programming words (so that QUERIES find
# BM25 matches in it as in real code), and generated identifiers drawn with Zipf-like weights.
PROGRAMMING_WORDS = sorted(set(" ".join(QUERIES).split()) | set(
    "value result index item node graph buffer cache config state error option token queue task worker request "
    "response handle stream batch shape tensor kernel device record schema key path file data count size limit "
    "offset length time retry delay backoff lock event callback parser reader writer loader builder manager".split()
))
SYLLABLES = "ka ri to mo na se lu vi de po zu ga be fi ho ja ke li mu no pa qu ra si tu ve wo xa yo ze".split()


# ----------------------------------------------------------------------------------------------- process sampling


def tree_pids(root: int) -> list[int]:
    """``root`` and its descendants (empty once ``root`` is gone)."""
    if psutil is not None:
        try:
            return [root] + [child.pid for child in psutil.Process(root).children(recursive=True)]
        except psutil.Error:
            return []
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    if not Path(f"/proc/{root}").exists():
        return []
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def process_stats(pid: int) -> tuple[int, int, float] | None:
    """(resident bytes, threads, user + system CPU seconds) of a live process, else None."""
    if psutil is not None:
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                cpu = process.cpu_times()
                return process.memory_info().rss, process.num_threads(), cpu.user + cpu.system
        except psutil.Error:
            return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(values.get("VmRSS", "0 kB").split()[0]) * 1024
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, int(values.get("Threads", "0")), (int(fields[11]) + int(fields[12])) / ticks


def process_command(pid: int) -> list[str]:
    try:
        if psutil is not None:
            return psutil.Process(pid).cmdline()
        return [part for part in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if part]
    except (OSError, Exception):  # noqa: BLE001 - a process that ended meanwhile
        return []


class TreeSampler:
    """Samples a process and its descendants every SAMPLE_PERIOD seconds, on a thread (psutil, else /proc)."""

    def __init__(self, pid: int) -> None:
        self.root = pid
        self.peak_rss_sum = 0
        self.peak_threads = 0
        self.peak_processes = 0
        self.peak_by_pid: dict[int, int] = {}
        self.threads_by_pid: dict[int, int] = {}
        self.label_by_pid: dict[int, str] = {}
        self.cpu_by_pid: dict[int, float] = {}
        self.timeline: list[dict[str, float]] = []
        self.samples = 0
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def pids(self) -> list[int]:
        return tree_pids(self.root)

    def _loop(self) -> None:
        next_point = 0.0
        while not self._stop.is_set():
            self.sample()
            elapsed = time.perf_counter() - self._started
            if elapsed >= next_point:
                self.timeline.append({"t": round(elapsed, 1), "rss_mb": round(self._last_rss / 2**20, 1), "threads": self._last_threads})
                next_point += TIMELINE_PERIOD
            self._stop.wait(SAMPLE_PERIOD)

    _last_rss = 0
    _last_threads = 0

    def sample(self) -> None:
        pids = tree_pids(self.root)
        if not pids:
            return
        rss_sum = threads = alive = 0
        for pid in pids:
            stats = process_stats(pid)
            if stats is None:
                continue
            rss, count, cpu = stats
            if pid not in self.label_by_pid:
                self.label_by_pid[pid] = _label(pid)
            alive += 1
            rss_sum += rss
            threads += count
            self.peak_by_pid[pid] = max(self.peak_by_pid.get(pid, 0), rss)
            self.threads_by_pid[pid] = max(self.threads_by_pid.get(pid, 0), count)
            self.cpu_by_pid[pid] = cpu
        self.samples += 1
        self._last_rss, self._last_threads = rss_sum, threads
        self.peak_rss_sum = max(self.peak_rss_sum, rss_sum)
        self.peak_threads = max(self.peak_threads, threads)
        self.peak_processes = max(self.peak_processes, alive)

    def summary(self) -> dict[str, object]:
        largest_pid = max(self.peak_by_pid, key=self.peak_by_pid.get) if self.peak_by_pid else None
        processes = sorted(
            ({"pid": pid, "what": self.label_by_pid.get(pid, "?"), "peak_rss_mb": round(rss / 2**20, 1),
              "peak_threads": self.threads_by_pid.get(pid, 0),
              "cpu_seconds": round(self.cpu_by_pid.get(pid, 0.0), 1)} for pid, rss in self.peak_by_pid.items()),
            key=lambda row: -row["peak_rss_mb"],
        )
        return {
            "peak_rss_sum_mb": round(self.peak_rss_sum / 2**20, 1),
            "peak_rss_largest_mb": round(self.peak_by_pid[largest_pid] / 2**20, 1) if largest_pid else None,
            "largest_process": self.label_by_pid.get(largest_pid, "?") if largest_pid else None,
            "peak_threads": self.peak_threads,
            "peak_threads_largest": self.threads_by_pid.get(largest_pid, 0) if largest_pid else None,
            "peak_processes": self.peak_processes,
            "cpu_seconds": round(sum(self.cpu_by_pid.values()), 1),
            "samples": self.samples,
            "processes": processes,
            "timeline": self.timeline,
        }


def _label(pid: int) -> str:
    command = process_command(pid)
    if not command:
        return "?"
    text = " ".join(Path(part).name if index == 0 or part.startswith("/") else part for index, part in enumerate(command))
    if "uvicorn" in text or ("prefect" in text and "server" in text):
        return "prefect server: " + text[:80]
    return text[:100]


def kill_tree(sampler: TreeSampler) -> None:
    """Kill the run's processes (the ones this benchmark started, found by pid), children first."""
    for pid in reversed(sampler.pids()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_measured(command: list[str], env: dict[str, str], timeout: float, stdout_path: Path, stderr_path: Path) -> dict[str, object]:
    """Run ``command``, sampling its process tree; returns wall seconds, exit code, timeout flag and the samples."""
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, cwd=CODE or REPO)
        sampler = TreeSampler(process.pid).start()
        timed_out = False
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            sampler.sample()
            kill_tree(sampler)
            code = process.wait()
        wall = time.perf_counter() - started
        sampler.stop()
    return {"wall_seconds": round(wall, 2), "exit_code": code, "timed_out": timed_out, **sampler.summary()}


# ----------------------------------------------------------------------------------------------------- one size


def run_env(home: Path) -> dict[str, str]:
    """The size's private CTXRAG_HOME and PREFECT_HOME; --code's copy first on PYTHONPATH if given."""
    return private_env(home, **({"PYTHONPATH": str(CODE), "CTXRAG_SCALE_CODE": str(CODE)} if CODE is not None else {}))


def _import_path() -> None:
    """Helper modes import the measured source: --code's copy, else this repository."""
    sys.path.insert(0, os.environ.get("CTXRAG_SCALE_CODE") or str(REPO))


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
            home / f"search-{attempt}.out", home / f"search-{attempt}.err",
        )
        if result["exit_code"] != 0:
            return {"error": (home / f"search-{attempt}.err").read_text()[-2000:]}
        walls.append(result["wall_seconds"])
        first = first or result
    return {"wall_seconds": round(statistics.median(walls), 2), "walls": walls, "peak_rss_mb": first["peak_rss_sum_mb"]}


def time_queries(home: Path, name: str) -> dict[str, object]:
    """In-process query latency, measured in a helper process (this script's `_latency` mode)."""
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "_latency", str(home), name],
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
                [sys.executable, str(Path(__file__).resolve()), "_seed", str(home), str(source), *(["contexts"] if seed_contexts else [])],
                env=run_env(home), capture_output=True, text=True, cwd=CODE or REPO,
            )
            if seeded.returncode:
                raise RuntimeError(f"seeding failed:\n{seeded.stderr[-3000:]}")
            record["seeded"] = json.loads(seeded.stdout.strip().splitlines()[-1])
            print(f"   seeded {record['seeded']['rows']} vectors in {record['seeded']['seconds']} s", flush=True)
        command = CTXRAG + ["index", str(source), "--name", name, *options, "--json"]
        print(f"   ctxrag index (timeout {timeout / 60:.0f} min) ...", flush=True)
        measured = run_measured(command, run_env(home), timeout, home / "index.out", home / "index.err")
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


# ------------------------------------------------------------------------------------------------ synthetic data


def write_synthetic(path: Path, chunks: int, seed: int = 20261130) -> dict[str, object]:
    """A cookbook-format corpus of ``chunks`` chunks (20 per document) of code-like text from a seeded vocabulary."""
    rng = random.Random(seed)
    identifiers = sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(30_000)})
    vocabulary = PROGRAMMING_WORDS + identifiers
    rng.shuffle(vocabulary)
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]  # Zipf-like
    cumulative = list(_accumulate(weights))

    def words(count: int) -> list[str]:
        return rng.choices(vocabulary, cum_weights=cumulative, k=count)

    def chunk_text(doc: int, position: int) -> str:
        lines = [f"# module m{doc} part {position}"]  # makes every chunk's text (and so its embedding key) unique
        name, *params = words(4)
        lines.append(f"def {name}_{position}({', '.join(params)}):")
        while sum(len(line) + 1 for line in lines) < rng.randint(500, 1100):
            kind = rng.random()
            a, b, c, d = words(4)
            if kind < 0.45:
                lines.append(f"    {a} = {b}.{c}({d})")
            elif kind < 0.6:
                lines.append(f"    # {' '.join(words(rng.randint(4, 10)))}")
            elif kind < 0.75:
                lines.append(f"    if {a} is not None and {b} > {c}:")
                lines.append(f"        return {d}")
            elif kind < 0.9:
                lines.append(f"    for {a} in {b}:")
                lines.append(f"        {c}.append({d})")
            else:
                lines.append(f"    raise {a.capitalize()}Error(\"{' '.join(words(5))}\")")
        return "\n".join(lines)

    documents = chunks // CHUNKS_PER_DOCUMENT
    started = time.perf_counter()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("[")
        for doc in range(documents):
            texts = [chunk_text(doc, position) for position in range(CHUNKS_PER_DOCUMENT)]
            record = {
                "doc_id": f"doc_{doc}",
                "original_uuid": f"synthetic-{doc:06d}",
                "content": "\n\n".join(texts),
                "chunks": [{"chunk_id": f"doc_{doc}_chunk_{i}", "original_index": i, "content": text} for i, text in enumerate(texts)],
            }
            handle.write(("," if doc else "") + json.dumps(record))
        handle.write("]")
    return {"documents": documents, "chunks": documents * CHUNKS_PER_DOCUMENT, "bytes": path.stat().st_size,
            "seconds": round(time.perf_counter() - started, 1)}


def _accumulate(values: list[float]):  # type: ignore[no-untyped-def]
    total = 0.0
    for value in values:
        total += value
        yield total


# ------------------------------------------------------------------------------- helper modes (own process each)


def seed_embeddings(home: Path, source: Path, contexts: bool = False) -> None:
    """Store random unit vectors for exactly the embedding keys `ctxrag index SOURCE --contextualizer none` asks
    for: the project's loader, indexed text (empty context) and cache key; parts of SEED_PART_ROWS rows.
    ``contexts``: also store the empty contexts the `none` contextualizer would write (its context keys), so the
    run's contextualize stage finds nothing pending and submits no per-document task."""
    import numpy as np
    import pyarrow as pa

    _import_path()
    from storage.artifacts import embeddings_cache
    from tasks.embed import EmbedderSpec, vector_rows
    from tasks.load import load_source

    started = time.perf_counter()
    corpus = load_source(str(source))
    spec = EmbedderSpec.choose("local", None, 512, None)  # the CLI's default embedder
    keys = list(dict.fromkeys(spec.cache_key(spec.embedded_text("", chunk.content), "document") for chunk in corpus.chunks))
    cache = embeddings_cache(home)
    rng = np.random.default_rng(7)
    parts = 0
    for start in range(0, len(keys), SEED_PART_ROWS):
        part = keys[start : start + SEED_PART_ROWS]
        vectors = rng.standard_normal((len(part), DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        cache.append(vector_rows(part, vectors, paid=False))
        parts += 1
    seeded: dict[str, object] = {"rows": len(keys), "parts": parts, "dimension": DIMENSION}
    if contexts:
        from storage.artifacts import contexts_cache
        from tasks.contextualize import NoContext, context_key
        from tasks.stages.contextualize import context_row

        worker, store = NoContext(), contexts_cache(home)
        documents = {document.doc_id: document for document in corpus.documents}
        rows = [context_row(context_key(chunk, worker, documents[chunk.doc_id]), chunk.doc_id, "", paid=False) for chunk in corpus.chunks]
        for start in range(0, len(rows), SEED_PART_ROWS):
            store.append(pa.Table.from_pylist(rows[start : start + SEED_PART_ROWS]))
        seeded["contexts"] = len(rows)
    seeded["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(seeded))


def measure_latency(home: Path, name: str) -> None:
    """Load the index and time QUERIES (hybrid, then vector and BM25 alone; each query embedded once per strategy, as
    a fresh query is); the model is loaded and warmed first. Then hybrid again with the query vectors already made
    (``hybrid_ranking``): the part of a query that depends on the index's size."""
    _import_path()
    os.environ["CTXRAG_HOME"] = str(home)
    from storage.index_store import IndexStore
    from tasks.search import Searcher, Strategy

    started = time.perf_counter()
    index = IndexStore(home).open(name)
    open_seconds = time.perf_counter() - started
    searcher = Searcher(index)
    searcher.search("warm up the model", Strategy.HYBRID, 10)
    result: dict[str, object] = {"open_seconds": round(open_seconds, 3), "queries": len(QUERIES),
                                 "rss_mb": round((process_stats(os.getpid()) or (0, 0, 0.0))[0] / 2**20, 1)}
    for strategy in (Strategy.HYBRID, Strategy.VECTOR, Strategy.BM25):
        times = []
        if strategy is not Strategy.HYBRID:
            searcher._query_vectors.clear()  # each strategy pays the query embedding, as a fresh query does
        for query in QUERIES:
            begun = time.perf_counter()
            searcher.search(query, strategy, 10)
            times.append((time.perf_counter() - begun) * 1000)
        times.sort()
        key = strategy.value.replace("-", "_")
        result[f"{key}_p50_ms"] = round(statistics.median(times), 2)
        result[f"{key}_p95_ms"] = round(times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)], 2)
    searcher.prefetch(QUERIES)
    times = []
    for query in QUERIES:
        begun = time.perf_counter()
        searcher.search(query, Strategy.HYBRID, 10)
        times.append((time.perf_counter() - begun) * 1000)
    result["hybrid_ranking_p50_ms"] = round(statistics.median(times), 2)
    print(json.dumps(result))


# -------------------------------------------------------------------------------------------------- reporting


def _stage(record: dict, stage: str) -> float | None:
    return (record.get("report") or {}).get("seconds", {}).get(stage)


def table_rows(records: list[dict]) -> list[list[str]]:
    rows = []
    for record in records:
        report = record.get("report") or {}
        index = record.get("index") or {}
        stages = [_stage(record, stage) for stage in STAGES]
        wall = index.get("wall_seconds")
        chunks = report.get("chunks") or record.get("expected_chunks")
        status = record.get("status", "?")
        rows.append([
            record["size"] + ("" if status == "ok" else f" ({status.upper()})"),
            _fmt(chunks, ","), _fmt(report.get("documents") or record.get("expected_documents"), ","),
            _fmt(wall, ".1f"), *[_fmt(value, ".2f") for value in stages],
            _fmt(wall - sum(stages) if wall and all(value is not None for value in stages) else None, ".1f"),
            _fmt(chunks / wall if chunks and wall and status == "ok" else None, ".1f"),
            _fmt(index.get("cpu_seconds"), ".0f"),
            _fmt(index.get("peak_rss_sum_mb"), ",.0f"), _fmt(index.get("peak_rss_largest_mb"), ",.0f"),
            _fmt(index.get("peak_threads"), "d"), _fmt(index.get("peak_threads_largest"), "d"),
            _fmt((record.get("task_runs") or {}).get("total"), ","),
            _fmt((record.get("search") or {}).get("wall_seconds"), ".2f"),
            _fmt((record.get("queries") or {}).get("hybrid_p50_ms"), ".1f"),
            _fmt((record.get("queries") or {}).get("hybrid_ranking_p50_ms"), ".2f"),
        ])
    return rows


HEADER = ["size", "chunks", "docs", "wall s", "load s", "context. s", "embed s", "publish s", "other s", "chunks/s",
          "CPU s", "peak RSS sum MB", "largest proc MB", "peak threads", "largest proc threads", "task runs", "search proc s", "hybrid p50 ms",
          "ranking p50 ms"]


def _fmt(value: object, spec: str) -> str:
    if value is None:
        return "-"
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


def markdown_table(records: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join(["---"] + ["---:"] * (len(HEADER) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(records)]
    return "\n".join(lines)


def plain_table(records: list[dict]) -> str:
    rows = [HEADER] + table_rows(records)
    widths = [max(len(row[column]) for row in rows) for column in range(len(HEADER))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows)


def growth(records: list[dict]) -> list[dict[str, object]]:
    """Between consecutive sizes of the same family: exponent e in cost ~ chunks^e for each stage (1 = linear)."""
    out = []
    by_family: dict[str, list[dict]] = {}
    for record in records:
        if record.get("status") == "ok":
            by_family.setdefault(record["family"], []).append(record)
    for family, members in by_family.items():
        members.sort(key=lambda record: record["report"]["chunks"])
        for small, large in zip(members, members[1:]):
            n1, n2 = small["report"]["chunks"], large["report"]["chunks"]
            if n2 <= n1:
                continue
            entry: dict[str, object] = {"family": family, "from": small["size"], "to": large["size"], "chunks_ratio": round(n2 / n1, 2)}
            values = {stage: (_stage(small, stage), _stage(large, stage)) for stage in STAGES}
            values["wall"] = (small["index"]["wall_seconds"], large["index"]["wall_seconds"])
            values["peak_rss_sum"] = (small["index"]["peak_rss_sum_mb"], large["index"]["peak_rss_sum_mb"])
            values["hybrid_p50"] = (small.get("queries", {}).get("hybrid_p50_ms"), large.get("queries", {}).get("hybrid_p50_ms"))
            values["ranking_p50"] = (small.get("queries", {}).get("hybrid_ranking_p50_ms"), large.get("queries", {}).get("hybrid_ranking_p50_ms"))
            for what, (t1, t2) in values.items():
                if t1 and t2 and t1 > 0.05 and t2 > 0:  # stages under 50 ms are timer noise
                    entry[what] = round(math.log(t2 / t1) / math.log(n2 / n1), 2)
            out.append(entry)
    return out


def write_results(out: Path, records: list[dict], meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    slopes = growth(records)
    (out / "scale.json").write_text(json.dumps({"meta": meta, "growth": slopes, "sizes": records}, indent=2) + "\n")
    merged = "".join(
        f" Sizes added later by `{run['command']}` ({run['date']}, load average {run['load_average_start']} at its start)."
        for run in meta.get("merged_runs", [])
    )
    code = f"git HEAD {meta.get('git_head')}" + (
        f", run from a copy of it (`--code {meta['code']}`) because the working tree had uncommitted changes"
        if meta.get("code") and meta["code"] != portable_path(REPO) else f" plus working-tree changes: {meta.get('working_tree_changes')}"
    )
    lines = [
        "# ctxrag scale benchmark",
        "",
        f"Date: {meta['date']}. Machine: {meta['cpus']} cores ({meta['cpu']}), **2 cores, shared and noisy**: other work "
        f"ran at the same time (load average {meta['load_average_start']} at the start, {meta['load_average_end']} at "
        f"the end), so wall seconds can be off by a factor of 2 or more; CPU seconds (the tree's user + system) are "
        f"steadier. Python {meta['python']}, Prefect {meta['prefect']}. Produced by `{meta['command']}`.{merged} Code measured: {code}.",
        "",
        "Each size: `ctxrag index SOURCE --name N --json` as a subprocess in a fresh CTXRAG_HOME (PREFECT_HOME inside it, "
        "so the run starts its own local Prefect server subprocess, stopped after the size; a new database starts from the machine's migrated copy once one exists). The process tree is sampled every ~0.2 s with "
        "psutil: peak RSS summed over the tree (shared pages counted in each process) and of the largest single "
        "process, peak threads (sum of num_threads). Stage seconds and counts are the run's own report; `other s` is "
        "wall minus the stages (Python and Prefect start-up, the flow run's set-up and shut-down). Task runs are counted "
        "from the run's log (Prefect's `Task run '...' - Finished in state` lines); the run's Prefect database, which "
        "the server fills from events, is read too (per run, below). `search proc s`: `ctxrag search QUERY --json` as a process, median "
        "of 3. `hybrid p50 ms`: a helper process loads the index (`IndexStore.open`, `Searcher`), warms the model, then "
        f"times {len(QUERIES)} distinct queries (each embeds its query once); `ranking p50 ms`: the same hybrid queries "
        "with their vectors already made (BM25 + exact cosine + fusion: the part that depends on the index's size).",
        "",
        markdown_table(records),
        "",
        "Sizes:",
        "",
    ]
    for record in records:
        lines.append(f"- **{record['size']}**: `{record['source']}` {' '.join(record['options'])}. {record.get('note', '')}".rstrip())
    fast = [record for record in records if record.get("seeded")]
    if fast:
        lines += [
            "",
            "**Fast path (synthetic sizes)**: embedding 100k chunks with the local model would take most of an hour on "
            "these cores, so before each synthetic run the embeddings cache was pre-seeded with random unit vectors "
            "(dim 384, float32) for exactly the keys the run asks for (`tasks.models.indexed_text` with the empty "
            "contexts of `--contextualizer none`, `EmbedderSpec.choose(\"local\", ...).cache_key(text, \"document\")`, written "
            "with `tasks.embed.vector_rows` to `storage.artifacts.embeddings_cache(home)` in parts of 10,000 rows). "
            "The embed stage therefore **skipped loading the model and all inference**: it only computed the keys, "
            "read the stored vectors and stacked them (the runs report `chunks_embedded` = "
            + ", ".join(f"{record['size']}: {record.get('report', {}).get('chunks_embedded', '-')}" for record in fast)
            + "). Contexts were not skipped (the `none` contextualizer still runs one task per document and stores "
            "an empty context per chunk). The vectors are random, so the synthetic sizes' search results mean nothing; "
            "their timings do. Seeding time is not in the index wall time.",
        ]
        if any((record.get("seeded") or {}).get("contexts") for record in fast):
            lines[-1] += (
                " The `-seeded-contexts` sizes also had the empty contexts of `--contextualizer none` pre-seeded "
                "(`tasks.contextualize.context_key` with `NoContext`, rows from `tasks.stages.contextualize.context_row`, "
                "in `storage.artifacts.contexts_cache(home)`): their contextualize stage only looked the contexts up and ran "
                "no per-document task, which isolates the other stages at the same size."
            )
    if slopes:
        lines += [
            "",
            "## Growth exponents",
            "",
            "Between consecutive sizes of the same family (same settings), e in cost ~ chunks^e: 1 is linear, 2 "
            "quadratic; below 1 means fixed costs still dominate the smaller size. Stages under 50 ms are left out.",
            "",
            "| family | from -> to | chunks x | " + " | ".join(list(STAGES) + ["wall", "peak RSS", "hybrid p50", "ranking p50"]) + " |",
            "|---|---|---:|" + "---:|" * (len(STAGES) + 4),
        ]
        for entry in slopes:
            cells = [_fmt(entry.get(key), ".2f") for key in (*STAGES, "wall", "peak_rss_sum", "hybrid_p50", "ranking_p50")]
            lines.append(f"| {entry['family']} | {entry['from']} -> {entry['to']} | {entry['chunks_ratio']} | " + " | ".join(cells) + " |")
    lines += ["", "## Per run", ""]
    for record in records:
        index = record.get("index") or {}
        lines.append(f"### {record['size']} ({record.get('status')})")
        lines.append("")
        lines.append(f"- load average before / after: {record.get('load_average_before')} / {record.get('load_average_after')}")
        if record.get("seeded"):
            lines.append(f"- seeded vectors: {record['seeded']}")
        for process in index.get("processes", [])[:4]:
            lines.append(f"- process `{process['what']}`: peak RSS {process['peak_rss_mb']} MB, "
                         f"{process.get('peak_threads', '?')} threads at most, CPU {process['cpu_seconds']} s")
        runs = record.get("task_runs") or {}
        if runs.get("total") is not None:
            lines.append(f"- task runs finished (run log): {runs['total']} ({', '.join(f'{name} {count}' for name, count in runs['by_task'].items())}); "
                         f"states {runs.get('states')}; in the Prefect database: {runs.get('database_total', '-')} task runs, {runs.get('flow_runs', '-')} flow runs")
        elif runs:
            lines.append(f"- task runs: not measured ({runs.get('note')})")
        if record.get("report"):
            report = record["report"]
            lines.append(f"- report: chunks {report['chunks']}, documents {report['documents']}, contextualized "
                         f"{report['chunks_contextualized']}, embedded {report['chunks_embedded']}, reused {report['chunks_embedding_reused']}")
        if record.get("queries") and "error" not in record["queries"]:
            q = record["queries"]
            lines.append(f"- in-process: open {q['open_seconds']} s; p50/p95 ms hybrid {q['hybrid_p50_ms']}/{q['hybrid_p95_ms']}, "
                         f"vector {q['vector_p50_ms']}/{q['vector_p95_ms']}, bm25 {q['bm25_p50_ms']}/{q['bm25_p95_ms']}; hybrid with "
                         f"query vectors made {q.get('hybrid_ranking_p50_ms')}; RSS {q['rss_mb']} MB")
        if record.get("search") and "error" not in record["search"]:
            lines.append(f"- search process: {record['search']['walls']} s, peak RSS {record['search']['peak_rss_mb']} MB")
        if record.get("status") in {"timeout", "failed"}:
            lines += ["- last lines of stderr:", "", "```", record.get("stderr_tail", ""), "```"]
        lines.append("")
    (out / "scale.md").write_text("\n".join(lines).rstrip() + "\n")


# ------------------------------------------------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_seed":
        return seed_embeddings(Path(sys.argv[2]), Path(sys.argv[3]), contexts="contexts" in sys.argv[4:])
    if len(sys.argv) > 1 and sys.argv[1] == "_latency":
        return measure_latency(Path(sys.argv[2]), sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="sample,cookbook,tree,synthetic")
    parser.add_argument("--tree", type=Path, default=site_packages() / "torch" / "_inductor")
    parser.add_argument("--synthetic-chunks", type=int, default=100_000)
    parser.add_argument("--synthetic-steps", default="20000", help="Intermediate synthetic sizes, comma-separated ('' for none).")
    parser.add_argument("--synthetic-check", type=int, default=2_000, help="Fast-path check size, run first.")
    parser.add_argument("--timeout-minutes", type=float, default=40.0, help="For the tree and synthetic runs.")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="Keep each size's CTXRAG_HOME (under the temp folder).")
    parser.add_argument("--code", type=Path, help="Run ctxrag from this copy of the source (first on PYTHONPATH).")
    parser.add_argument("--seed-contexts", action="store_true",
                        help="Synthetic sizes: also pre-seed the empty contexts, so no per-document task runs (isolates the other stages).")
    parser.add_argument("--merge", action="store_true", help="Add to --out's scale.json (same size names replaced) instead of starting anew.")
    args = parser.parse_args()
    global CODE
    CODE = args.code.resolve() if args.code else None
    sizes = [size.strip() for size in args.sizes.split(",") if size.strip()]
    unknown = set(sizes) - {"sample", "cookbook", "tree", "synthetic"}
    if unknown:
        parser.error(f"unknown sizes: {', '.join(sorted(unknown))}")
    import prefect

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "prefect": prefect.__version__,
        "command": "benchmarks/scale.py " + portable_text(" ".join(sys.argv[1:])),
        "load_average_start": [round(value, 2) for value in os.getloadavg()],
        "task_workers": os.environ.get("CTXRAG_TASK_WORKERS", "4 (default)"),
        "code": portable_path(CODE or REPO),
        "git_head": git("rev-parse", "--short", "HEAD"),
        "working_tree_changes": git("status", "--short", "--untracked-files=no") or "none",
    }
    timeout = args.timeout_minutes * 60
    records: list[dict] = []
    if args.merge and (args.out / "scale.json").is_file():
        previous = json.loads((args.out / "scale.json").read_text())
        records = previous["sizes"]
        meta = {**previous["meta"], "merged_runs": previous["meta"].get("merged_runs", []) + [meta]}

    def finish() -> None:
        (meta["merged_runs"][-1] if args.merge and meta.get("merged_runs") else meta)["load_average_end"] = [round(value, 2) for value in os.getloadavg()]
        write_results(args.out, records, meta)

    def add(record: dict) -> None:
        records[:] = [old for old in records if old["size"] != record["size"]] + [record]

    if "sample" in sizes:
        add(bench_size("sample", "real", REPO / "data" / "sample" / "corpus", [], 600, args.keep,
                                  note="The README's sample corpus; structural contexts; local MiniLM embeddings."))
        finish()
    if "cookbook" in sizes:
        add(bench_size("cookbook", "real", SHARED_DATA / "codebase" / "codebase_chunks.json", [], 1200, args.keep,
                                  note="The cookbook's codebase corpus; structural contexts; local MiniLM embeddings."))
        finish()
    if "tree" in sizes:
        add(bench_size("tree", "real", args.tree, [], timeout, args.keep,
                                  note="A real code tree (a folder SOURCE); structural contexts; local MiniLM embeddings."))
        finish()
    if "synthetic" in sizes:
        steps = [args.synthetic_check] + [int(part) for part in args.synthetic_steps.split(",") if part.strip()] + [args.synthetic_chunks]
        steps = sorted(dict.fromkeys(step for step in steps if step > 0))
        workdir = Path(tempfile.mkdtemp(prefix="ctxrag-scale-synthetic-"))
        try:
            for number, chunks in enumerate(steps):
                corpus = workdir / f"synthetic-{chunks}.json"
                made = write_synthetic(corpus, chunks)
                print(f"\nwrote {corpus} ({made['documents']} documents, {made['chunks']} chunks, {made['bytes'] / 2**20:.0f} MiB) in {made['seconds']} s", flush=True)
                label = f"synthetic-{_short(chunks)}" + ("-seeded-contexts" if args.seed_contexts else "")
                check = " The fast-path check (must embed 0 chunks)." if number == 0 and len(steps) > 1 else ""
                if args.seed_contexts:
                    check += " Contexts pre-seeded too: no contextualize task runs (the stage only looks them up)."
                record = bench_size(
                    label, "synthetic-seeded-contexts" if args.seed_contexts else "synthetic", corpus,
                    ["--contextualizer", "none"], timeout, args.keep, seed=True, seed_contexts=args.seed_contexts, generated=True,
                    note=f"Generated ({made['documents']:,} documents x {CHUNKS_PER_DOCUMENT} chunks, "
                         f"{made['bytes'] / 2**20:.0f} MiB of JSON); `--contextualizer none`; embeddings pre-seeded (fast path)." + check,
                )
                record["expected_chunks"], record["expected_documents"] = made["chunks"], made["documents"]
                add(record)
                finish()
                corpus.unlink(missing_ok=True)
                if record.get("status") != "ok":
                    print(f"{label} did not finish ({record.get('status')}): larger synthetic sizes skipped", flush=True)
                    break
                if record["report"]["chunks_embedded"] != 0:
                    print(f"fast path check failed: {record['report']['chunks_embedded']} chunks embedded; larger synthetic sizes skipped", flush=True)
                    break
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    finish()
    print("\n" + plain_table(records))
    print(f"\nwrote {args.out / 'scale.md'} and {args.out / 'scale.json'}")


def _short(chunks: int) -> str:
    return f"{chunks // 1000}k" if chunks % 1000 == 0 else str(chunks)


if __name__ == "__main__":
    main()
