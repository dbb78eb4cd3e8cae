"""What each `ctxrag` command costs as a user runs it: this checkout against an earlier commit, side by side.

    .venv/bin/python benchmarks/commands.py --base REV [--rounds 3] [--shared-data PATH] [--out benchmarks/results]

Both code trees run in this environment (REV in a temporary git worktree; each command's PYTHONPATH names its tree).
Each round runs both trees, alternating which goes first, each from a new CTXRAG_HOME and PREFECT_HOME with no server
running (the first command starts it); the machine's caches (ONNX query export, migrated Prefect database, embedding
precision) are made before the first round. On the cookbook corpus (737 chunks, 248 queries): a bad input, `--help`,
the cold index, the same texts embedded alone in a plain process (the cold index less this is its overhead, split by
the run's own stage clock), a no-op re-index, `server status`, evaluate (first, again), search (a query seen before,
a new one). Wall seconds, the median over rounds; ratio: this checkout's over the base's. Writes commands.json and
commands.md.

    .venv/bin/python benchmarks/commands.py --base REV --paired evaluate,help [--runs 7] [--base-python PY]

``--paired``: only the commands named, many times, from one home per tree: the cookbook corpus indexed and evaluated
once by each tree (its own index files; the local server running), then each command run ``--runs`` times per tree,
the trees alternating and which goes first alternating too. Per run: wall seconds and the command process's CPU
seconds (user + system, ``os.wait4``); the medians, each tree's range, and the median of the per-round ratios.
``--base-python``: the base runs with this interpreter (the base's own virtualenv) instead of this one. Writes
REPORT.json and REPORT.md (``--report``, default commands_paired). Every command runs with resident search off
(``CTXRAG_SEARCH_IDLE_MINUTES=0``): each is timed as its own process, and no resident search outlives the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import CTXRAG, REPO, RESULTS, SHARED_DATA, cpu_model, git, portable_text, stop_server, write_report

EMBED_ALONE = """
import sys, time
import pyarrow.parquet as pq
from ctxrag.tasks.embedding.embed import LocalEmbedder
from ctxrag.tasks.embedding.embedder_spec import DEFAULT_MAX_SEQ_LENGTH, LOCAL_CONTEXT_TOKENS, LOCAL_WINDOW_TOKENS, EmbedderSpec
table = pq.ParquetFile(sys.argv[1]).read(columns=["context", "content"])
spec = EmbedderSpec.choose("local", None, DEFAULT_MAX_SEQ_LENGTH, None, LOCAL_WINDOW_TOKENS, LOCAL_CONTEXT_TOKENS)  # the default
texts = spec.embedded_texts(table["context"].to_pylist(), table["content"].to_pylist())
LocalEmbedder(spec).embed(texts)
"""

TARGETS = {  # the targets, wall seconds
    "bad input (missing folder)": 0.5,
    "--help": 0.4,
    "cold index overhead (cold index less embedded alone)": 8.0,
    "no-op re-index": 2.5,
    "evaluate 248 questions, every strategy, again": 4.0,
    "search, a query seen before": 0.6,
    "server status": 0.6,
}


def run(
    args: list[str], env: dict[str, str], cwd: Path, expect: int | None = 0, command: list[str] | None = None
) -> tuple[float, str]:
    """Wall seconds and stdout of ``ctxrag ARGS`` (or ``command``); the benchmark stops if it exits otherwise than ``expect``."""
    started = time.perf_counter()
    result = subprocess.run(command or CTXRAG + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if expect is not None and result.returncode != expect:
        raise SystemExit(f"{' '.join(command or args)} ({cwd}) exited {result.returncode}:\n{result.stderr[-3000:]}")
    return seconds, result.stdout


def timed(
    args: list[str], env: dict[str, str], cwd: Path, expect: int | None = 0, command: list[str] | None = None
) -> float:
    return run(args, env, cwd, expect, command)[0]


def environment(code: Path, scratch: Path, machine: Path) -> dict[str, str]:
    """A new user's environment running ``code``: no Prefect setting, new homes, the machine's caches; Python writes
    bytecode as a user's does (under PYTHONDONTWRITEBYTECODE each command would compile every module it imports)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PREFECT_", "CTXRAG_"))
        and name not in ("CI", "PYTHONDONTWRITEBYTECODE")
        or name == "CTXRAG_EMBED_PRECISION"
    }
    env.update(
        {
            "PYTHONPATH": str(code),
            "CTXRAG_HOME": str(scratch / "home"),
            "PREFECT_HOME": str(scratch / "prefect"),
            "CTXRAG_MODELS_DIR": str(machine / "models"),
            "CTXRAG_CACHE_DIR": str(machine / "cache"),
            "COLUMNS": "200",
            "CTXRAG_SEARCH_IDLE_MINUTES": "0",
            "PREFECT_SERVER_API_PORT": "0",  # a free port: no race for Prefect's 4200 with other servers on the machine
        }
    )
    return env


def one_round(code: Path, scratch: Path, machine: Path, shared: Path) -> dict[str, float]:
    env = environment(code, scratch, machine)
    corpus, evalset = shared / "codebase" / "codebase_chunks.json", shared / "codebase" / "evaluation_set.jsonl"
    seen = json.loads(evalset.read_text().splitlines()[0])["query"]
    rows: dict[str, float] = {}
    try:
        rows["bad input (missing folder)"] = timed(["index", str(scratch / "missing")], env, code, expect=2)
        rows["--help"] = timed(["--help"], env, code)
        rows["server status"] = timed(["server", "status"], env, code, expect=None)
        cold, report = run(["index", str(corpus), "--name", "codebase", "--json"], env, code)
        rows["cold index (starts the server)"] = cold
        chunks = next((scratch / "home" / "indexes" / "codebase" / "versions").glob("*/chunks.parquet"))
        rows["the same texts embedded alone"] = timed(
            [], env, code, command=[sys.executable, "-c", EMBED_ALONE, str(chunks)]
        )
        rows["cold index overhead (cold index less embedded alone)"] = cold - rows["the same texts embedded alone"]
        stages = json.loads(report)["seconds"]  # the flow's own stage clock
        rows["  split: outside the flow's stages (start-up, server, Prefect, shut-down)"] = cold - sum(stages.values())
        rows["  split: load + contextualize + publish stages"] = (
            stages["load"] + stages["contextualize"] + stages["publish"]
        )
        rows["  split: embed stage less embedded alone (model load, task runs, stores)"] = (
            stages["embed"] - rows["the same texts embedded alone"]
        )
        rows["no-op re-index"] = timed(["index", str(corpus), "--name", "codebase"], env, code)
        rows["evaluate 248 questions, every strategy, first"] = timed(
            ["evaluate", str(evalset), "--name", "codebase"], env, code
        )
        rows["evaluate 248 questions, every strategy, again"] = timed(
            ["evaluate", str(evalset), "--name", "codebase"], env, code
        )
        rows["search, a query seen before"] = timed(["search", seen, "--name", "codebase"], env, code)
        rows["search, a new query"] = timed(
            ["search", f"where is the config parsed {time.time_ns()}", "--name", "codebase"], env, code
        )
        rows["server status (running)"] = timed(["server", "status"], env, code)
    finally:
        stop_server(env, code)
    return rows


def warm_machine(code: Path, machine: Path, ctxrag: list[str] | None = None) -> None:
    """What a machine keeps once (query export, migrated database, precision decision): one index of a small corpus
    (``ctxrag``: the command, default this environment's)."""
    args = ["index", str(REPO / "data" / "sample" / "corpus"), "--name", "warm"]
    with tempfile.TemporaryDirectory(prefix="ctxrag-warm-") as scratch:
        env = environment(code, Path(scratch), machine)
        try:
            timed(args, env, code, command=ctxrag + args if ctxrag else None)
        finally:
            stop_server(env, code)


def write(out: Path, results: dict[str, list[dict[str, float]]], meta: dict[str, object]) -> None:
    medians = {
        tree: {row: statistics.median(run[row] for run in runs) for row in runs[0]} for tree, runs in results.items()
    }
    lines = [
        "# What each command costs, this checkout against the commit before",
        "",
        f"`benchmarks/commands.py`, {meta['date']}, {meta['cpus']} CPUs ({meta['cpu']}), load average before {meta['load_before']:.2f}, "
        f"after {meta['load_after']:.2f}. Base {meta['base']}, new {meta['new']}. {meta['rounds']} rounds, the two trees alternating; "
        "wall seconds, the median over rounds; each round from new homes with no server running (the cold index starts it), "
        "the machine's caches made before. Ratio: new / base.",
        "",
        "| command | base | new | ratio | target |",
        "|---|---:|---:|---:|---:|",
    ]
    for row, base in medians["base"].items():
        new = medians["new"][row]
        target = TARGETS.get(row)
        lines.append(
            f"| {row} | {base:.2f} | {new:.2f} | {new / base if base else float('nan'):.2f} | "
            f"{'' if target is None else f'{target:g}'} |"
        )
    write_report(out / "commands.md", "\n".join(lines) + "\n")
    (out / "commands.json").write_text(json.dumps({"meta": meta, "rounds": results, "medians": medians}, indent=2))


PAIRED: dict[str, tuple[str, list[str]]] = {  # --paired's commands: name -> (row, arguments after the evaluation set)
    "evaluate": ("evaluate 248 questions, every strategy, again", ["evaluate", "{evalset}", "--name", "codebase"]),
    "help": ("--help", ["--help"]),
    "search": ("search, a query seen before", ["search", "{seen}", "--name", "codebase"]),
    "status": ("server status (running)", ["server", "status"]),
}


COMMAND = "from ctxrag.cli import main; main()"  # --paired runs `python -c COMMAND` with each tree's interpreter


def measured(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one process; the benchmark stops if it fails."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if status != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} ({cwd}) failed:\n{errors.read().decode()[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def paired(
    trees: dict[str, tuple[Path, str]], scratch: Path, shared: Path, names: list[str], runs: int
) -> dict[str, dict[str, list[list[float]]]]:
    """``runs`` (wall, CPU) pairs per tree and command of ``names``, the trees alternating (``--paired``)."""
    corpus, evalset = shared / "codebase" / "codebase_chunks.json", shared / "codebase" / "evaluation_set.jsonl"
    seen = json.loads(evalset.read_text().splitlines()[0])["query"]
    envs = {
        name: environment(code, scratch / f"{name}-paired", scratch / f"machine-{name}")
        for name, (code, _) in trees.items()
    }
    command = {name: [python, "-c", COMMAND] for name, (_, python) in trees.items()}
    timed_runs: dict[str, dict[str, list[list[float]]]] = {name: {row: [] for row in names} for name in trees}
    try:
        for name, (code, _) in trees.items():
            run(
                ["index", str(corpus), "--name", "codebase"],
                envs[name],
                code,
                command=command[name] + ["index", str(corpus), "--name", "codebase"],
            )
            run([], envs[name], code, command=command[name] + ["evaluate", str(evalset), "--name", "codebase"])
        made = {name: _precision(scratch / f"{name}-paired" / "home") for name in trees}
        if len(set(made.values())) != 1:  # the machine's auto choice, made by each tree: compare like with like
            raise SystemExit(f"the trees' indexes differ in precision ({made}); set CTXRAG_EMBED_PRECISION")
        for number in range(runs):
            order = list(trees) if number % 2 == 0 else list(reversed(trees))
            for row in names:
                for name in order:
                    args = [part.format(evalset=evalset, seen=seen) for part in PAIRED[row][1]]
                    timed_runs[name][row].append(list(measured(command[name] + args, envs[name], trees[name][0])))
            print(
                number,
                {
                    name: {row: [round(x, 2) for x in values[-1]] for row, values in rows.items()}
                    for name, rows in timed_runs.items()
                },
                flush=True,
            )
    finally:
        for name, (code, _) in trees.items():
            stop_server(envs[name], code)
    return timed_runs


def _precision(home: Path) -> str:
    """The embedding precision the cookbook index of ``home`` was built in (its live version's manifest)."""
    manifest = next((home / "indexes" / "codebase" / "versions").glob("*/manifest.json"))
    return str(json.loads(manifest.read_text())["config"]["embedder"].get("precision"))


def write_paired(
    out: Path, timed_runs: dict[str, dict[str, list[list[float]]]], meta: dict[str, object], report: str
) -> None:
    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"

    lines = [
        "# Commands paired, this checkout against an earlier commit",
        "",
        f"`{meta['command']}`, {meta['date']}, {meta['cpus']} CPUs ({meta['cpu']}), load average before "
        f"{meta['load_before']:.2f}, after {meta['load_after']:.2f}. Base {meta['base']} ({meta['base_python']}), new "
        f"{meta['new']}. One home per tree (the cookbook corpus indexed and evaluated once by that tree, the local "
        f"server running), {meta['runs']} runs per command, the trees alternating; median [min-max] seconds; ratio: "
        "new / base of the medians, and the median of each round's ratio.",
        "",
        "| command | base wall | new wall | ratio | per-round ratio | base CPU | new CPU | CPU ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row, (label, _) in PAIRED.items():
        if row not in timed_runs["new"]:
            continue
        base, new = timed_runs["base"][row], timed_runs["new"][row]
        wall = [statistics.median(x[0] for x in side) for side in (base, new)]
        cpu = [statistics.median(x[1] for x in side) for side in (base, new)]
        rounds = statistics.median(b[0] and n[0] / b[0] for b, n in zip(base, new))
        lines.append(
            f"| {label} | {spread([x[0] for x in base])} | {spread([x[0] for x in new])} | {wall[1] / wall[0]:.2f} | "
            f"{rounds:.2f} | {spread([x[1] for x in base])} | {spread([x[1] for x in new])} | {cpu[1] / cpu[0]:.2f} |"
        )
    write_report(out / f"{report}.md", "\n".join(lines) + "\n")
    (out / f"{report}.json").write_text(json.dumps({"meta": meta, "runs": timed_runs}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the commit to compare with (e.g. the one before the change)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--paired", help=f"only these commands, paired runs: comma-separated, of {', '.join(PAIRED)}")
    parser.add_argument("--runs", type=int, default=7, help="--paired: runs per tree and command")
    parser.add_argument("--report", default="commands_paired", help="--paired: the results' file name, without suffix")
    parser.add_argument(
        "--base-python", type=Path, help="the base's interpreter (its own virtualenv); default: this one"
    )
    options = parser.parse_args()
    names = [name.strip() for name in (options.paired or "").split(",") if name.strip()]
    if unknown := [name for name in names if name not in PAIRED]:
        parser.error(f"--paired: unknown {', '.join(unknown)}; choose among {', '.join(PAIRED)}")
    scratch = Path(tempfile.mkdtemp(prefix="ctxrag-commands-"))
    base = scratch / "base-tree"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(base), options.base], cwd=REPO, check=True, capture_output=True
    )
    meta: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "load_before": os.getloadavg()[0],
        "base": git("rev-parse", "--short", options.base),
        "new": git("rev-parse", "--short", "HEAD") + ("+changes" if git("status", "--porcelain") else ""),
        "rounds": options.rounds,
        "command": portable_text(
            " ".join(["benchmarks/commands.py", *sys.argv[1:]]).replace(str(options.base_python or "\0"), "PY")
        ),
        "base_python": "its own virtualenv" if options.base_python else "this virtualenv",
    }
    trees = {"base": base, "new": REPO}
    results: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    python = {"base": str(options.base_python or sys.executable), "new": sys.executable}
    try:
        for name, code in trees.items():
            warm_machine(code, scratch / f"machine-{name}", [python[name], "-c", COMMAND])
        if names:
            meta["runs"] = options.runs
            timed = paired(
                {name: (code, python[name]) for name, code in trees.items()},
                scratch,
                options.shared_data,
                names,
                options.runs,
            )
            meta["load_after"] = os.getloadavg()[0]
            write_paired(options.out, timed, meta, options.report)
            return
        for number in range(options.rounds):
            order = list(trees) if number % 2 == 0 else list(reversed(trees))
            for name in order:
                round_dir = scratch / f"{name}-{number}"
                results[name].append(
                    one_round(trees[name], round_dir, scratch / f"machine-{name}", options.shared_data)
                )
                shutil.rmtree(round_dir, ignore_errors=True)
                print(name, number, {row: round(value, 2) for row, value in results[name][-1].items()}, flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    meta["load_after"] = os.getloadavg()[0]
    write(options.out, results, meta)


if __name__ == "__main__":
    main()
