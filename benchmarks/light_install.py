"""The light install against an earlier one, side by side: a cold ``ctxrag index`` of the cookbook's codebase corpus in
int8 and fp32, and a new query's ``ctxrag search`` with the resident search off.

    .venv/bin/python benchmarks/light_install.py --base-python PY --base-code DIR --python PY [--rounds 3]
        [--precisions int8,fp32] [--searches 5] [--out light_install]

``--base-python`` runs ``--base-code`` (first on ``PYTHONPATH``: e.g. ``git archive REV`` into DIR, run by a virtualenv
with that commit's dependencies, torch included); ``--python`` is the virtualenv under test (e.g. one made with
``pip install -e .`` alone: no torch). Each side has its own CTXRAG_HOME per run, its own models and cache folders and
Prefect home for the whole benchmark (the model files made once before timing, as on a machine in use), the resident
search off. In each round the two sides alternate: per precision, a cold index of the corpus (wall seconds, peak RSS
of the ``ctxrag`` process from ``os.wait4``), then ``--searches`` new queries against that index. Prints and writes
medians, per-round ratios this/base, and the 1-minute load at each start.
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
import uuid
from pathlib import Path

from common import REPO, RESULTS, SHARED_DATA, machine_meta  # benchmarks/common.py

CORPUS = SHARED_DATA / "codebase" / "codebase_chunks.json"


def timed(python: str, code: Path | None, env: dict[str, str], *args: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one ``ctxrag`` process, measured by ``os.wait4``."""
    full = {**env, **({"PYTHONPATH": str(code)} if code else {})}
    started = time.perf_counter()
    process = subprocess.Popen(
        [python, "-c", "from ctxrag.cli import main; main()", *args],
        env=full,
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(
            f"ctxrag {' '.join(args[:2])} failed ({python}): {process.stderr.read().decode()[-2000:] if process.stderr else ''}"
        )
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-python", required=True)
    parser.add_argument("--base-code", type=Path, required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precisions", default="int8,fp32")
    parser.add_argument("--searches", type=int, default=5)
    parser.add_argument("--out", default="light_install")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ctxrag-light-"))
    sides = {"base": (args.base_python, args.base_code.resolve()), "this": (args.python, None)}
    envs = {
        side: {
            **{name: value for name, value in os.environ.items() if not name.startswith(("PREFECT_", "CTXRAG_"))},
            "CTXRAG_MODELS_DIR": str(scratch / side / "models"),
            "CTXRAG_CACHE_DIR": str(scratch / side / "cache"),
            "PREFECT_HOME": str(scratch / side / "prefect"),
            "CTXRAG_SEARCH_IDLE_MINUTES": "0",
        }
        for side in sides
    }
    precisions = args.precisions.split(",")
    rows: list[dict[str, object]] = []
    try:
        for side, (python, code) in sides.items():  # the model's files and the local server, before any timing
            for precision in precisions:
                env = {**envs[side], "CTXRAG_HOME": str(scratch / side / "warm"), "CTXRAG_EMBED_PRECISION": precision}
                timed(python, code, env, "index", str(REPO / "data" / "sample" / "corpus"), "--name", precision)
        for round_number in range(args.rounds):
            for precision in precisions:
                for side, (python, code) in sides.items():
                    home = scratch / side / f"home-{round_number}-{precision}"
                    env = {**envs[side], "CTXRAG_HOME": str(home), "CTXRAG_EMBED_PRECISION": precision}
                    load = os.getloadavg()[0]
                    wall, peak = timed(python, code, env, "index", str(CORPUS), "--name", "cookbook")
                    searches = [
                        timed(
                            python,
                            code,
                            env,
                            "search",
                            f"where is the retry delay set {uuid.uuid4().hex[:8]}",
                            "--name",
                            "cookbook",
                            "-k",
                            "5",
                        )
                        for _ in range(args.searches)
                    ]
                    row = {
                        "round": round_number + 1,
                        "precision": precision,
                        "side": side,
                        "load_1min": load,
                        "index_s": round(wall, 2),
                        "index_peak_mb": round(peak, 1),
                        "search_s": round(statistics.median(s for s, _ in searches), 3),
                        "search_peak_mb": round(max(m for _, m in searches), 1),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    shutil.rmtree(home, ignore_errors=True)
    finally:
        for side, (python, code) in sides.items():
            env = {**envs[side], "CTXRAG_HOME": str(scratch / side / "warm")}
            subprocess.run(
                [python, "-c", "from ctxrag.cli import main; main()", "server", "stop"],
                env={**env, **({"PYTHONPATH": str(code)} if code else {})},
                capture_output=True,
            )
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {}
    for precision in precisions:
        mine = {side: [row for row in rows if row["precision"] == precision and row["side"] == side] for side in sides}
        entry = {}
        for measure in ("index_s", "index_peak_mb", "search_s", "search_peak_mb"):
            base = [float(row[measure]) for row in mine["base"]]  # type: ignore[arg-type]
            this = [float(row[measure]) for row in mine["this"]]  # type: ignore[arg-type]
            entry[measure] = {
                "base median": statistics.median(base),
                "this median": statistics.median(this),
                "ratio median (this/base, per round)": round(statistics.median(t / b for t, b in zip(this, base)), 3),
            }
        summary[precision] = entry
    record = {
        "machine": machine_meta(),
        "rounds": args.rounds,
        "searches": args.searches,
        "summary": summary,
        "runs": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    sys.exit(main())
