"""A cold ``ctxrag index`` of the standard library folder (about 10,000 chunks) under GNU ``time -v``: wall, CPU,
peak RSS and the run's own stage seconds, for one or more copies of the code, one after the other.

    .venv/bin/python benchmarks/stdlib_index.py --work SCRATCH LABEL=CODE_COPY [LABEL=CODE_COPY ...] [--out benchmarks/results]
    .venv/bin/python benchmarks/stdlib_index.py --work SCRATCH --report-only LABEL [LABEL ...]

The folder is ``sysconfig``'s stdlib less ``site-packages`` and the test folders (``--exclude site-packages --exclude
test/ --exclude tests/ --exclude idle_test/``). Each run: ``SCRATCH/LABEL/`` with a fresh CTXRAG_HOME and PREFECT_HOME
(the command starts its local Prefect server there; it is stopped after the run, and its CPU time is not counted),
the code copy first on PYTHONPATH (a ``git archive`` of a commit, so the tree can be edited meanwhile), this
environment's packages. ``time.txt`` (``time -v``), ``stdout.json`` (the run's report), ``uptime.txt``
(load before and after) are kept there; ``--report-only`` renders existing run folders.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from common import RESULTS, machine_meta, provenance, write_report

EXCLUDE = ["site-packages", "test/", "tests/", "idle_test/"]
FIELDS = {"wall": "Elapsed (wall clock) time", "user": "User time (seconds)", "system": "System time (seconds)",
          "rss_kb": "Maximum resident set size (kbytes)"}


def run(work: Path, label: str, code: Path) -> None:
    out = work / label
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = {**os.environ, "CTXRAG_HOME": str(out / "home"), "PREFECT_HOME": str(out / "prefect"), "PYTHONPATH": str(code)}
    env.pop("PREFECT_API_URL", None)
    command = [sys.executable, "-c", "from ctxrag.cli import main; main()"]
    excludes = [part for pattern in EXCLUDE for part in ("--exclude", pattern)]
    load = [os.getloadavg()]
    with open(out / "stdout.json", "w") as stdout, open(out / "stderr.txt", "w") as stderr:
        result = subprocess.run(["/usr/bin/time", "-v", "-o", str(out / "time.txt"), *command, "index", sysconfig.get_paths()["stdlib"],
                                 "--name", "stdlib", *excludes, "--json"], cwd=code, env=env, stdout=stdout, stderr=stderr)
    load.append(os.getloadavg())
    subprocess.run([*command, "server", "stop"], cwd=code, env=env, capture_output=True)
    (out / "uptime.txt").write_text("".join("load average: {:.2f}, {:.2f}, {:.2f}\n".format(*value) for value in load))
    if result.returncode:
        raise SystemExit(f"{label}: ctxrag index failed, see {out / 'stderr.txt'}")


def measured(work: Path, label: str) -> dict:
    out = work / label
    text = (out / "time.txt").read_text()
    found = {name: re.search(re.escape(field) + r".*?: (.+)", text).group(1).strip() for name, field in FIELDS.items()}  # type: ignore[union-attr]
    clock = [float(part) for part in found["wall"].split(":")]
    wall = sum(value * 60 ** power for power, value in enumerate(reversed(clock)))
    report = json.loads((out / "stdout.json").read_text())
    return {"label": label, "wall": wall, "cpu": float(found["user"]) + float(found["system"]), "peak_rss_mb": int(found["rss_kb"]) / 1024,
            "chunks": report["chunks"], "embedded": report["chunks_embedded"], "stages": report["seconds"],
            "load": " / ".join(", ".join(found) for found in re.findall(r"load average: ([\d.]+), ([\d.]+), ([\d.]+)", (out / "uptime.txt").read_text()))}


def render(rows: list[dict], meta: dict, note: str = "") -> str:
    stages = list(rows[0]["stages"])
    lines = [
        "# A cold `ctxrag index` of the standard library folder",
        "",
        f"{provenance(meta)}; produced by `benchmarks/stdlib_index.py` (method in its docstring); runs one after the "
        "other. *wall*, *CPU* (user + system) and *peak RSS* (the largest process: the command; Prefect's server is a "
        "process of its own) from GNU `time -v`; stage seconds from the run's own report; *load*: the load "
        "average (1, 5, 15 min) before and after." + (f" {note}" if note else ""),
        "",
        "| run | chunks | embedded | wall s | CPU s | peak RSS MB | " + " | ".join(f"{stage} s" for stage in stages) + " | load before / after |",
        "|---|---:|---:|---:|---:|---:|" + "---:|" * len(stages) + "---|",
    ]
    for row in rows:
        lines.append(f"| {row['label']} | {row['chunks']:,} | {row['embedded']:,} | {row['wall']:.0f} | {row['cpu']:.0f} | {row['peak_rss_mb']:,.0f} | "
                     + " | ".join(f"{row['stages'].get(stage, 0):.1f}" for stage in stages) + f" | {row['load']} |")
    if len(rows) > 1:
        first = rows[0]
        for row in rows[1:]:
            lines += ["", f"{row['label']} / {first['label']}: wall {row['wall'] / first['wall']:.2f}x, CPU {row['cpu'] / first['cpu']:.2f}x, "
                      f"embed stage {row['stages'].get('embed', 0) / first['stages'].get('embed', 1):.2f}x, peak RSS {row['peak_rss_mb'] / first['peak_rss_mb']:.2f}x."]
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="scratch folder for the runs")
    parser.add_argument("runs", nargs="+", help="LABEL=CODE_COPY (or LABEL with --report-only)")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--note", default="", help="what each run's code was (shown under the title)")
    args = parser.parse_args()
    labels = []
    for item in args.runs:
        label, _, code = item.partition("=")
        if not args.report_only:
            run(args.work, label, Path(code).resolve())
        labels.append(label)
    rows = [measured(args.work, label) for label in labels]
    meta = machine_meta()
    (args.out / "stdlib_index.json").write_text(json.dumps({"runs": rows, "meta": meta, "note": args.note}, indent=1) + "\n")
    write_report(args.out / "stdlib_index.md", render(rows, meta, args.note))


if __name__ == "__main__":
    main()
