"""Each install layer from nothing: a new virtualenv, an empty pip cache, ``pip install -e 'CODE[EXTRAS]'``.

    .venv/bin/python benchmarks/install_layers.py --layer this:. --layer this:.[test] \\
        --layer base=DIR:. --layer base=DIR:.[test] [--rounds 1] [--out install_layers]

A layer is ``LABEL[=CODE]:SPEC``: ``this`` is this checkout, ``base=DIR`` another one (e.g. ``git archive REV`` into
DIR); SPEC is what follows the folder in pip's argument (``.``, ``.[test]``, ``.[torch]``). Each install runs in
turn (layers alternate within a round) as the README's first command does (``python3 -m venv`` then ``pip install -e``,
bytecode compiled as pip does by default), with ``PIP_CACHE_DIR`` a new empty folder and nothing else changed (pip's
index settings, local wheel folders included, apply). Per install: wall seconds, the virtualenv's size on disk
(``du``), the number of distributions, and whether torch is in it. Writes JSON and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import REPO, RESULTS, machine_meta  # benchmarks/common.py


def install_once(code: Path, spec: str) -> dict[str, object]:
    """One install of ``code`` with ``spec`` into a new virtualenv with an empty pip cache; removed after."""
    with tempfile.TemporaryDirectory(prefix="ctxrag-install-") as scratch:
        venv, cache = Path(scratch) / "venv", Path(scratch) / "pip-cache"
        cache.mkdir()
        env = {**os.environ, "PIP_CACHE_DIR": str(cache)}
        env.pop("PIP_NO_CACHE_DIR", None)
        started = time.perf_counter()
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
        target = f"{code}{spec[1:]}" if spec.startswith(".") else spec
        done = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", "-e", target],
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"pip install -e {target} failed: {done.stderr[-2000:]}")
        size = int(subprocess.run(["du", "-sk", str(venv)], capture_output=True, text=True).stdout.split()[0]) / 1024
        listed = subprocess.run(
            [str(venv / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True, check=True
        ).stdout
        names = {row["name"].lower() for row in json.loads(listed)}
        return {
            "seconds": round(seconds, 1),
            "venv_mb": round(size, 1),
            "distributions": len(names),
            "torch": "torch" in names,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", action="append", required=True, help="LABEL[=CODE]:SPEC, e.g. this:.[test]")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default="install_layers")
    args = parser.parse_args()
    layers = []
    for layer in args.layer:
        label, spec = layer.split(":", 1)
        name, _, code = label.partition("=")
        layers.append((name, Path(code).resolve() if code else REPO, spec))
    runs: dict[str, list[dict[str, object]]] = {f"{name} {spec}": [] for name, _, spec in layers}
    load = []
    for round_number in range(args.rounds):
        for name, code, spec in layers:
            load.append(os.getloadavg()[0])
            result = install_once(code, spec)
            runs[f"{name} {spec}"].append(result)
            print(f"round {round_number + 1}: {name} {spec}: {result}", flush=True)
    rows = {
        key: {
            "seconds": statistics.median(float(run["seconds"]) for run in results),  # type: ignore[arg-type]
            "venv_mb": statistics.median(float(run["venv_mb"]) for run in results),  # type: ignore[arg-type]
            "distributions": results[-1]["distributions"],
            "torch": results[-1]["torch"],
            "runs": results,
        }
        for key, results in runs.items()
    }
    record = {"machine": machine_meta(), "load_1min_at_starts": load, "layers": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = ["| layer | wall s (median) | virtualenv MB | distributions | torch |", "|---|---|---|---|---|"]
    for key, row in rows.items():
        lines.append(
            f"| `{key}` | {row['seconds']:.0f} | {row['venv_mb']:,.0f} | {row['distributions']} | {row['torch']} |"
        )
    table = "\n".join(lines)
    (RESULTS / f"{args.out}.md").write_text(
        f"# Install layers from nothing\n\n`benchmarks/install_layers.py`: a new virtualenv and an empty pip cache per "
        f"install, {args.rounds} round(s), layers in turn; 1-minute load at each start: "
        f"{', '.join(f'{value:.1f}' for value in load)}.\n\n{table}\n"
    )
    print(table)


if __name__ == "__main__":
    main()
