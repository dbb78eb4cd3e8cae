"""``ctxrag index SOURCE --watch`` on a real repository's folder: how soon a saved change is searchable, side by side
with today's way (the base commit's ``ctxrag index`` run right after the save); and what a change pays with the
Claude contextualizer (the Anthropic *simulator*, test equipment: calls counted, no dollars quoted).

    .venv/bin/python benchmarks/watch.py --base-code DIR [--rounds 5] [--out watch]
    .venv/bin/python benchmarks/watch.py --report-only [--out watch]   # OUT.md again from OUT.json

The folder: ``gson/src/main`` of google/gson at 9835b6f (88 files, 604 chunks: the suite's gson-behaviour set),
extracted from the fetched GitHub snapshot (``fetch github:google/gson``) into a temporary folder, one copy per side;
never into the project. ``--base-code``: a checkout of the base commit (``git archive REV | tar -x -C DIR``), run with
it first on PYTHONPATH. Both sides share one home (stored vectors), each with its own index and copy.

A round, on each side in turn (base, then this): a file (a different one each round) gets a comment line at its end
holding a word no file holds; the clock starts when the file is closed (the save). Base: ``ctxrag index COPY`` (a new
process, as a user re-runs it today), then ``ctxrag search WORD`` processes back to back until one's hits hold the word.
This: the watching process (``ctxrag index COPY --watch --json``, started before the rounds) indexes the change while
``ctxrag search WORD`` processes run back to back from the save until one's hits hold it. Both with the resident
search on (the default; each code its own, in a private XDG_RUNTIME_DIR). Meanwhile a running ``ctxrag serve-search``
(this checkout, one for the home) is asked every 0.1 s: the seconds until its hits hold the word. Medians per side, the
ratio this/base per round, the load average. Every probe searches with ``--strategy bm25``: what is timed is when the
new version answers, and a word that only one chunk holds is a BM25 ranking of one, which ``hybrid-score``
standardizes to 0 (its top 3 are then the vector side's).

Then the Claude contextualizer: a third copy indexed with ``--contextualizer claude --watch --json`` against the
simulator (its first run pays every chunk), then ``--rounds`` changes: the simulator's requests per change, the changed
document's chunks, and how many requests held the changed file's new word (a request is one chunk, with its document).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from common import CTXRAG, REPO, RESULTS, machine_meta, private_env, stop_server  # benchmarks/common.py
from suite_corpora import git_tree

REPOSITORY, COMMIT, FOLDER = "google/gson", "9835b6f90192f79cdf5300c528fc6212455fb6c1", "gson/src/main"
POLL_HTTP_S = 0.1
DEADLINE_S = 120.0


def fresh_word() -> str:
    """A word no file holds (letters only: BM25's tokenizer keeps it whole)."""
    return "zq" + "".join(chr(97 + int(digit, 16) % 26) for digit in uuid.uuid4().hex[:10])


def save(file: Path, word: str) -> float:
    """Append a comment holding ``word`` to ``file``; the clock (perf_counter) when the file is closed."""
    with open(file, "a") as handle:
        handle.write(f"// watched change: {word}\n")
    return time.perf_counter()


def search_finds(env: dict[str, str], name: str, word: str) -> bool:
    found = subprocess.run(
        [*CTXRAG, "search", word, "--name", name, "--json", "-k", "3", "--strategy", "bm25"],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
    )
    return found.returncode == 0 and any(word in hit["content"] for hit in json.loads(found.stdout or "[]"))


def searches_until_found(env: dict[str, str], name: str, word: str, saved: float) -> float:
    """Seconds from the save to the end of the first ``ctxrag search`` process whose hits hold ``word``."""
    while not search_finds(env, name, word):
        if time.perf_counter() - saved > DEADLINE_S:
            raise SystemExit(f"{word!r} not searchable in index {name!r} after {DEADLINE_S:.0f} s")
    return time.perf_counter() - saved


class HttpPoller:
    """Asks a running ``serve-search`` for ``word`` every 0.1 s from ``start`` until its hits hold it."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    def ask(self, name: str, word: str) -> bool:
        body = json.dumps({"query": word, "index": name, "k": 3, "strategy": "bm25"}).encode()
        request = urllib.request.Request(
            f"{self.url}/search",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return any(word in hit["text"] for hit in json.loads(answer.read())["hits"])
        except OSError:
            return False

    def start(self, name: str, word: str) -> tuple[threading.Thread, list[float]]:
        found: list[float] = []
        begun = time.perf_counter()

        def poll() -> None:
            while time.perf_counter() - begun < DEADLINE_S:
                if self.ask(name, word):
                    found.append(time.perf_counter())
                    return
                time.sleep(POLL_HTTP_S)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        return thread, found


class Watching:
    """A ``ctxrag index COPY --watch --json`` process: its JSON lines (one per run) read on a thread."""

    def __init__(self, env: dict[str, str], copy: Path, name: str, *extra: str) -> None:
        self.process = subprocess.Popen(
            [*CTXRAG, "index", str(copy), "--name", name, "--watch", "--json", *extra],
            env=env,
            cwd="/",  # the code on PYTHONPATH runs, not a checkout in the working folder
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.reports: queue.SimpleQueue[dict] = queue.SimpleQueue()
        self.log: list[str] = []
        threading.Thread(target=self._read, args=(self.process.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stderr, False), daemon=True).start()

    def _read(self, stream, reports: bool) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            (self.reports.put(json.loads(line)) if reports else self.log.append(line.rstrip()))

    def next_report(self) -> dict:
        try:
            return self.reports.get(timeout=900)
        except queue.Empty:
            raise SystemExit("the watch reported nothing:\n" + "\n".join(self.log[-20:])) from None

    def watching(self) -> None:
        deadline = time.monotonic() + 900
        while not any(line.startswith("watching ") for line in self.log):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the watch did not start:\n" + "\n".join(self.log[-20:]))
            time.sleep(0.1)

    def stop(self) -> int:
        """SIGTERM, which the watch takes as Ctrl-C (a benchmark started in the background ignores SIGINT)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def changed_files(copy: Path, rounds: int) -> list[str]:
    """``rounds`` files spread over the folder's sorted Java files."""
    files = sorted(path.relative_to(copy).as_posix() for path in copy.rglob("*.java"))
    return [files[(2 * number + 1) * len(files) // (2 * rounds)] for number in range(rounds)]


def serve(env: dict[str, str], port: int, token_file: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*CTXRAG, "serve-search", "--name", "this", "--port", str(port), "--token-file", str(token_file)],
        env=env,
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def answering(server: subprocess.Popen, url: str, token_file: Path) -> HttpPoller:
    """The service's poller, once it answers a search of index "this"."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and server.poll() is None:
        if token_file.exists() and (http := HttpPoller(url, token_file.read_text().strip())).ask("this", "gson"):
            return http
        time.sleep(0.2)
    raise SystemExit("ctxrag serve-search did not answer")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def claude_rounds(env: dict[str, str], copy: Path, rounds: int) -> dict:
    """The Claude contextualizer's watch against the simulator: requests per change."""
    sys.path.insert(0, str(REPO))
    from tests.equipment.anthropic_simulator import AnthropicSimulator
    from tests.helpers import ANTHROPIC_TEST_KEY

    with AnthropicSimulator() as simulator:
        paid = {**env, "ANTHROPIC_BASE_URL": simulator.url, "ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY}
        watch = Watching(paid, copy, "claude", "--contextualizer", "claude")
        first = watch.next_report()
        watch.watching()
        changes = []
        for file in changed_files(copy, rounds):
            before = len(simulator.requests)
            word = fresh_word()
            save(copy / file, word)
            report = watch.next_report()
            asked = [request for request in simulator.requests[before:] if request.path == "/v1/messages"]
            changes.append(
                {
                    "file": file,
                    "requests": len(asked),
                    "requests_holding_the_change": sum(word in json.dumps(request.json) for request in asked),
                    "chunks_contextualized": report["chunks_contextualized"],
                    "documents_contextualized": report["documents_contextualized"],
                    "paid_calls_reported": report["contextualizer_calls"]["calls"],
                    "seconds": report["watch"]["seconds"],
                }
            )
        code = watch.stop()
    return {
        "first_run_calls": first["contextualizer_calls"]["calls"],
        "chunks": first["chunks"],
        "exit": code,
        "changes": changes,
    }


def markdown(result: dict) -> str:
    """The results as a page: the medians, each round, the Claude simulator's requests per change."""
    medians, claude = result["median_s"], result["claude_simulator"]
    lines = [
        "# `ctxrag index --watch`: a saved change, searchable",
        "",
        f"`benchmarks/watch.py` on {result['folder']} ({result['documents']} files, {result['chunks']} chunks), "
        f"{result['rounds']} rounds, {result['date']}, {result['cpus']} cores ({result['cpu']}); load average "
        f"{result['load_average_before_after'][0][0]:.1f} before the rounds, {result['load_average_before_after'][1][0]:.1f} "
        "after (other sessions' jobs on the same 2 cores). The clock starts when the changed file is closed.",
        "",
        "| seconds from the save, median | base: `ctxrag index` then search | this: `--watch` |",
        "|---|---|---|",
        f"| a new `ctxrag search` process returns the change | {medians['base_search_s']:.2f} | "
        f"{medians['this_search_s']:.2f} |",
        f"| a running `serve-search` returns it | {medians['base_http_s']:.2f} | {medians['this_http_s']:.2f} |",
        f"| the watch's run (its batch to the live version) | | {medians['this_run_s']:.2f} |",
        "",
        f"Ratio this/base per round, median: {result['ratio_median']:.2f}. Target: at most 5 s (median of 5).",
        "",
        "| round | file | base search | this search | base HTTP | this HTTP | this run | its stages | load |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["per_round"]:
        stages = ", ".join(f"{stage} {value:.2f}" for stage, value in row["this_stages_s"].items())
        lines.append(
            f"| {result['per_round'].index(row) + 1} | {row['file']} | {row['base_search_s']:.2f} | "
            f"{row['this_search_s']:.2f} | {row['base_http_s']} | {row['this_http_s']} | {row['this_run_s']:.2f} | "
            f"{stages} | {row['load']} |"
        )
    lines += [
        "",
        "## With the Claude contextualizer (the Anthropic simulator: test equipment, no dollars)",
        "",
        f"First run: {claude['first_run_calls']} calls for {claude['chunks']} chunks. Then a change per round:",
        "",
        "| file | requests | holding the change | chunks contextualized | documents | calls reported | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for change in claude["changes"]:
        lines.append(
            f"| {change['file']} | {change['requests']} | {change['requests_holding_the_change']} | "
            f"{change['chunks_contextualized']} | {change['documents_contextualized']} | "
            f"{change['paid_calls_reported']} | {change['seconds']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-code", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="watch")
    parser.add_argument("--report-only", action="store_true", help="Write OUT.md from OUT.json, measure nothing.")
    args = parser.parse_args()
    if args.report_only:
        (RESULTS / f"{args.out}.md").write_text(markdown(json.loads((RESULTS / f"{args.out}.json").read_text())))
        return
    if args.base_code is None:
        parser.error("--base-code is required")
    work = Path(tempfile.mkdtemp(prefix="ctxrag-watch-"))
    runtime = work / "runtime"
    runtime.mkdir(mode=0o700)
    home = work / "home"
    this_env = private_env(home, work / "prefect", XDG_RUNTIME_DIR=str(runtime))
    base_env = {**this_env, "PYTHONPATH": str(args.base_code.resolve())}
    server = None
    watch = None
    try:
        source = git_tree(REPOSITORY, COMMIT, FOLDER).prepare(work)
        copies = {side: work / side for side in ("base", "this", "claude")}
        for copy in copies.values():
            shutil.copytree(source, copy)
        subprocess.run(
            [*CTXRAG, "index", str(copies["base"]), "--name", "base"],
            env=base_env,
            cwd="/",
            check=True,
            capture_output=True,
        )
        watch = Watching(this_env, copies["this"], "this")
        first = watch.next_report()
        watch.watching()
        port, token_file = free_port(), work / "token"
        server = serve(this_env, port, token_file)
        http = answering(server, f"http://127.0.0.1:{port}", token_file)
        load_before = os.getloadavg()
        rounds = []
        for file in changed_files(copies["this"], args.rounds):
            row: dict[str, object] = {"file": file}
            for side, env in (("base", base_env), ("this", this_env)):
                word = fresh_word()
                poller, found = http.start(side, word)
                saved = save(copies[side] / file, word)
                if side == "base":
                    subprocess.run(
                        [*CTXRAG, "index", str(copies["base"]), "--name", "base"],
                        env=env,
                        cwd="/",
                        check=True,
                        capture_output=True,
                    )
                row[f"{side}_search_s"] = round(searches_until_found(env, side, word, saved), 3)
                poller.join(DEADLINE_S)
                row[f"{side}_http_s"] = round(found[0] - saved, 3) if found else None
                if side == "this":
                    report = watch.next_report()
                    row["this_run_s"] = report["watch"]["seconds"]
                    row["this_stages_s"] = report["seconds"]
            row["load"] = round(os.getloadavg()[0], 2)
            rounds.append(row)
            print(json.dumps(row), flush=True)
        load_after = os.getloadavg()
        claude = claude_rounds(this_env, copies["claude"], args.rounds)
    finally:
        for process in (watch.process if watch is not None else None, server):
            if process is not None and process.poll() is None:
                process.terminate()  # the watch takes SIGTERM as Ctrl-C; uvicorn stops on it
                try:
                    process.wait(120)
                except subprocess.TimeoutExpired:
                    process.kill()
        for lock in runtime.glob("ctxrag/*.lock"):  # resident searches: their pids are in their lock files
            try:
                os.kill(int(lock.read_text()), signal.SIGTERM)
            except (ValueError, OSError):
                pass
        stop_server(this_env)
        shutil.rmtree(work, ignore_errors=True)

    def median(key: str) -> float:
        return statistics.median(float(row[key]) for row in rounds if row[key] is not None)

    result = {
        "folder": f"github:{REPOSITORY}@{COMMIT[:12]} {FOLDER}/",
        "documents": first["documents"],
        "chunks": first["chunks"],
        "rounds": len(rounds),
        "median_s": {
            key: median(key) for key in ("base_search_s", "this_search_s", "base_http_s", "this_http_s", "this_run_s")
        },
        "ratio_median": statistics.median(float(r["this_search_s"]) / float(r["base_search_s"]) for r in rounds),
        "load_average_before_after": [list(load_before), list(load_after)],
        "per_round": rounds,
        "claude_simulator": claude,
        **machine_meta(),
    }
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / f"{args.out}.md").write_text(markdown(result))
    print(json.dumps({key: value for key, value in result.items() if key != "per_round"}, indent=1))


if __name__ == "__main__":
    main()
