"""The index's chunking and structural-context step on the standard library folder, for copies of the code side by
side: how long ``load_directory`` and ``StructuralContextualizer.contextualize`` take (no embedding, no Prefect).

    .venv/bin/python benchmarks/syntax_time.py LABEL=CODE_COPY [LABEL=CODE_COPY ...] [--rounds 5] [--out benchmarks/results]

The folder is ``sysconfig``'s stdlib less ``site-packages`` and the test folders, as the stdlib index benchmark reads
it. Each round runs every copy once, in a fresh process with the copy first on PYTHONPATH (a ``git archive`` of a
commit), the order turned round every other round so a neighbour's load falls on both; the figures are each copy's
median and range over the rounds. Writes ``syntax_time.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
from pathlib import Path

from common import RESULTS, machine_meta, write_report

EXCLUDE = ["site-packages", "test/", "tests/", "idle_test/"]
ONE_RUN = """
import json, sys, time
from ctxrag.tasks.load.directory import load_directory
from ctxrag.tasks.context.offline import StructuralContextualizer
started = time.perf_counter()
corpus = load_directory(sys.argv[1], exclude=json.loads(sys.argv[2]))
loaded = time.perf_counter()
chunks = {}
for chunk in corpus.chunks:
    chunks.setdefault(chunk.doc_id, []).append(chunk)
worker = StructuralContextualizer()
for document in corpus.documents:
    worker.contextualize(document, chunks.get(document.doc_id, []))
done = time.perf_counter()
print(json.dumps({"load": loaded - started, "contextualize": done - loaded, "documents": len(corpus.documents),
                  "chunks": len(corpus.chunks), "regex": len(corpus.chunked_by_regex) if hasattr(corpus, "chunked_by_regex") else None}))
"""


def one_run(code: Path, folder: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    result = subprocess.run([sys.executable, "-c", ONE_RUN, folder, json.dumps(EXCLUDE)], env=env, cwd=code,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def report(runs: dict[str, list[dict]], load: list[tuple[float, ...]]) -> str:
    meta = machine_meta()
    lines = [
        "# Chunking and structural contexts of the stdlib folder, copies of the code side by side", "",
        f"{len(next(iter(runs.values())))} rounds, {meta['cpus']}-core machine ({meta['cpu']}), Python {meta['python']}, "
        f"{meta['date']}; produced by `benchmarks/syntax_time.py` (method in its docstring). Seconds: median [min, max] "
        f"over the rounds. Load average (1, 5, 15 min) before and after: {load[0]} / {load[-1]}.", "",
        "| code | documents | chunks | regex-chunked files | load s | contextualize s | both s |", "|---|---:|---:|---:|---:|---:|---:|",
    ]
    medians = {}
    for label, found in runs.items():
        cells = []
        for part in ("load", "contextualize", "both"):
            values = [run["load"] + run["contextualize"] if part == "both" else run[part] for run in found]
            medians[label, part] = statistics.median(values)
            cells.append(f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]")
        regex = "-" if found[0]["regex"] is None else f"{found[0]['regex']:,}"  # code before the syntax trees: no such count
        lines.append(f"| {label} | {found[0]['documents']:,} | {found[0]['chunks']:,} | {regex} | " + " | ".join(cells) + " |")
    labels = list(runs)
    for label in labels[1:]:
        ratios = ", ".join(f"{part} {medians[label, part] / medians[labels[0], part]:.2f}x" for part in ("load", "contextualize", "both"))
        lines += ["", f"{label} / {labels[0]} (medians): {ratios}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("copies", nargs="+", help="LABEL=CODE_COPY")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    copies = dict(pair.split("=", 1) for pair in args.copies)
    folder = sysconfig.get_paths()["stdlib"]
    runs: dict[str, list[dict]] = {label: [] for label in copies}
    load = [tuple(round(value, 2) for value in os.getloadavg())]
    for number in range(args.rounds):
        order = list(copies) if number % 2 == 0 else list(reversed(copies))
        for label in order:
            runs[label].append(one_run(Path(copies[label]).resolve(), folder))
            print(f"round {number + 1} {label}: {runs[label][-1]}", file=sys.stderr, flush=True)
    load.append(tuple(round(value, 2) for value in os.getloadavg()))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "syntax_time.json").write_text(json.dumps({"runs": runs, "load": load, **machine_meta()}, indent=1) + "\n")
    write_report(args.out / "syntax_time.md", report(runs, load))


if __name__ == "__main__":
    main()
