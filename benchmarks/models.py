"""Offline embedding models side by side on the evaluation suite: each model's suite run, then one table.

    .venv/bin/python benchmarks/models.py --home SCRATCH [--only SET,...] [--model NAME=MODEL ...] [--out DIR]

Each ``--model NAME=MODEL`` (MODEL as ``ctxrag index --embedding-model`` takes it: a folder, a shipped model's name or
a Hugging Face id; ``packaged`` for the packaged MiniLM) is run through ``benchmarks/suite.py`` in a home of its own
(``SCRATCH/NAME``: its indexes, contexts and vectors), with the same sets, so every model is scored by the product's
own search and the suite's leave-one-corpus-out rule. A model whose run is already in ``DIR/NAME/suite.json`` with the
same sets is not run again (``--again`` runs it). Writes ``DIR/models.md`` and ``models.json``: per set, the primary
metric of BM25 alone, the vector side, ``hybrid-score`` and the held-out default, per model; the means over the code
sets, the prose sets and all sets; and each corpus's indexing seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from common import REPO, machine_meta, portable_text, write_report  # benchmarks/common.py

SHOWN = ("bm25", "vector", "hybrid-score")
CODE_STYLES = ("behaviour",)  # the hand-written code sets; the cookbook's codebase set is shown apart


def run_model(name: str, model: str, home: Path, out: Path, only: str, again: bool) -> dict:
    result = out / name / "suite.json"
    if result.exists() and not again:
        found = json.loads(result.read_text())
        if sorted(row["set"] for row in found["sets"]) == sorted(only.split(",")) or not only:
            return found
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "suite.py"),
        "--home",
        str(home / name),
        "--out",
        str(out / name),
    ]
    command += ["--only", only] if only else []
    command += ["--embedding-model", model] if model != "packaged" else []
    print(f"{name}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True)
    return json.loads(result.read_text())


def summary(runs: dict[str, dict]) -> dict:
    """Per set and model the primary metric of each shown entry and the held-out default; the means by kind."""
    names = list(runs)
    sets = [row["set"] for row in runs[names[0]]["sets"]]
    table: dict[str, dict] = {}
    for set_name in sets:
        rows = {name: next(row for row in run["sets"] if row["set"] == set_name) for name, run in runs.items()}
        first = rows[names[0]]
        table[set_name] = {
            "primary": first["primary"],
            "kind": first["kind"],
            "style": first["style"],
            "models": {
                name: {
                    **{entry: 100 * row["entries"][entry] for entry in SHOWN},
                    "default": 100 * row["default"]["held out"],
                    "chosen": row["default"]["chosen"],
                }
                for name, row in rows.items()
            },
        }
    groups = {
        "code sets (hand-written, doc-MRR@10)": [
            s for s, row in table.items() if row["kind"] == "code" and row["style"] in CODE_STYLES
        ],
        "prose sets": [s for s, row in table.items() if row["kind"] == "prose"],
        "all sets": list(table),
    }
    means = {
        group: {
            name: {
                entry: sum(table[s]["models"][name][entry] for s in members) / len(members)
                for entry in (*SHOWN, "default")
            }
            for name in names
        }
        for group, members in groups.items()
        if members
    }
    indexing = {name: run["meta"].get("indexing", {}) for name, run in runs.items()}
    embedders = {name: run["meta"].get("embedder", {}) for name, run in runs.items()}
    return {"sets": table, "means": means, "groups": groups, "indexing": indexing, "embedders": embedders}


def render(result: dict, meta: dict) -> str:
    names = list(result["embedders"])
    lines = [
        "# Offline embedding models on the evaluation suite",
        "",
        f"One run of `benchmarks/models.py`, {meta['cpu']}, {meta['date']}. Each model indexed every corpus in a home of its "
        "own (`ctxrag index --embedding-model MODEL`, offline defaults otherwise) and the suite scored it with the "
        "product's search; figures are each set's primary metric x100. *default*: the configuration the suite's "
        "leave-one-corpus-out rule picks with the set's corpus left out, scored on the set.",
        "",
        "Models: "
        + "; ".join(
            f"**{name}**: `{result['embedders'][name].get('model')}` "
            f"({result['embedders'][name].get('precision') or 'machine precision'})"
            for name in names
        )
        + ".",
        "",
        "## Means",
        "",
        "| group | "
        + " | ".join(f"{name} {entry}" for name in names for entry in ("vector", "hybrid-score", "default"))
        + " |",
        "|---|" + "---:|" * (3 * len(names)),
    ]
    for group, by_model in result["means"].items():
        lines.append(
            f"| {group} | "
            + " | ".join(
                f"{by_model[name][entry]:.1f}" for name in names for entry in ("vector", "hybrid-score", "default")
            )
            + " |"
        )
    lines += [
        "",
        "## Each set",
        "",
        "| set | metric | bm25 | "
        + " | ".join(f"{name} vector | {name} hybrid-score | {name} default" for name in names)
        + " |",
        "|---|---|---:|" + "---:|" * (3 * len(names)),
    ]
    for set_name, row in result["sets"].items():
        models = row["models"]
        lines.append(
            f"| {set_name} | {row['primary']} | {models[names[0]]['bm25']:.1f} | "
            + " | ".join(
                f"{models[name]['vector']:.1f} | {models[name]['hybrid-score']:.1f} | {models[name]['default']:.1f}"
                for name in names
            )
            + " |"
        )
    lines += [
        "",
        "## Indexing seconds (`ctxrag index`, cold, as the suite recorded it)",
        "",
        "| corpus | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    corpora = sorted({corpus for seconds in result["indexing"].values() for corpus in seconds})
    for corpus in corpora:
        lines.append(
            f"| {corpus} | " + " | ".join(str(result["indexing"][name].get(corpus, "")) for name in names) + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="scratch folder: a home per model")
    parser.add_argument("--only", default="", help="comma-separated set names (default: every set)")
    parser.add_argument(
        "--model", action="append", default=[], help="NAME=MODEL (repeatable); default: the packaged MiniLM only"
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "models")
    parser.add_argument("--again", action="store_true", help="run every model again")
    args = parser.parse_args()
    models = dict(item.split("=", 1) for item in args.model) or {"minilm": "packaged"}
    runs = {
        name: run_model(name, model, args.home.resolve(), args.out, args.only, args.again)
        for name, model in models.items()
    }
    result = summary(runs)
    meta = machine_meta()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "models.json").write_text(portable_text(json.dumps({**result, "meta": meta}, indent=1)) + "\n")
    write_report(args.out / "models.md", portable_text(render(result, meta)))


if __name__ == "__main__":
    main()
