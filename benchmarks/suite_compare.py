"""Two or more suite homes, each indexed with another ``--context-tokens``, compared by the suite's own rule.

    .venv/bin/python benchmarks/suite_compare.py NAME=HOME:CAP NAME=HOME:CAP ... [--out benchmarks/results/context_cap.md]

Each home is loaded as ``benchmarks/suite.py --home HOME --context-tokens CAP`` loads it (an index built with another
embedder is indexed again; rankings and scores come from the home's caches). Per set: the LOCO default's held-out
primary metric and the fixed strategies' (x100), and the mean over sets. Each variant after the first is compared
with the first, question by question: the LOCO default's held-out values, paired, golden documents resampled with
all their questions (the suite's bootstrap; the mean over sets resamples each set on its own). The variants must ask
the same questions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import suite_select as select  # noqa: E402
import suite_sets as sets_  # noqa: E402
from common import machine_meta, provenance, write_report  # noqa: E402
from suite import SHOWN, relative  # noqa: E402

SHOWN_HERE = ("vector", "hybrid", "hybrid-doc")


def held_out(home: Path, cap: int, shared: Path, sets_folder: Path) -> tuple[list, dict, list]:
    """The home's sets, the LOCO default's held-out per-question values, and each fixed strategy's."""
    specs = sets_.builtin_sets(shared) + sets_.handwritten_sets(sets_folder, shared)[0]
    data = [sets_.load_set(home, spec, context_tokens=cap) for spec in specs]
    grid = select.configs()
    matrices = [select.matrix(home, d, grid) for d in data]
    held = select.loco(data, matrices, select.entries(grid))
    index = {c.family: number for number, c in enumerate(grid) if c.family in select.FIXED}
    fixed = {name: [matrices[s][index[name]] for s in range(len(data))] for name in SHOWN}
    return data, {"select": held["select"]["held"], **fixed}, [held["select"]["chosen"][d.unit] for d in data]


def pct(value: float) -> str:
    return f"{100 * value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="NAME=HOME:CAP")
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--sets", type=Path, default=REPO / "benchmarks" / "suite" / "sets")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "context_cap.md")
    args = parser.parse_args()
    variants = []
    for text in args.variants:
        name, _, rest = text.partition("=")
        home, _, cap = rest.rpartition(":")
        data, held, chosen = held_out(Path(home).resolve(), int(cap), args.shared_data, args.sets)
        variants.append({"name": name, "cap": int(cap), "data": data, "held": held, "chosen": chosen})
        print(f"{name}: loaded", file=sys.stderr, flush=True)
    base = variants[0]
    for other in variants[1:]:
        for a, b in zip(base["data"], other["data"]):
            if a.name != b.name or a.texts != b.texts:
                raise SystemExit(f"{other['name']}: set {b.name} asks other questions than {base['name']}'s")
    names = [d.name for d in base["data"]]
    lines = [
        "# The context cap on the evaluation suite: each variant's held-out figures, and the difference from the first",
        "",
        f"{provenance(machine_meta())}; produced by `benchmarks/suite_compare.py` (method in its docstring). Each "
        "variant's corpora indexed by `ctxrag index --context-tokens CAP` on offline defaults, everything else the "
        "same. Per set, its primary metric x100: the LOCO default (the suite's `select`, chosen with the set's corpus "
        "left out) and " + ", ".join(f"`{name}`" for name in SHOWN_HERE) + ". Last rows: each variant minus the first, "
        "the LOCO default, paired per question, golden documents resampled with all their questions (95%; `*`: "
        "excludes 0); the mean over sets resamples each set on its own.",
        "",
        "| variant | cap | " + " | ".join(names) + " | mean |",
        "|---|---:|" + "---:|" * (len(names) + 1),
    ]
    for variant in variants:
        for entry in ("select", *SHOWN_HERE):
            values = [float(np.mean(v)) for v in variant["held"][entry]]
            label = "default (LOCO)" if entry == "select" else entry
            lines.append(f"| {variant['name']}: {label} | {variant['cap'] or 'whole'} | " + " | ".join(pct(v) for v in values)
                         + f" | {pct(float(np.mean(values)))} |")
    result = {"variants": [{"name": v["name"], "cap": v["cap"], "chosen": v["chosen"],
                            "held": {k: [float(np.mean(x)) for x in vals] for k, vals in v["held"].items()}} for v in variants],
              "differences": {}}
    for other in variants[1:]:
        cells = []
        for s, d in enumerate(base["data"]):
            mean, low, high = select.cluster_bootstrap(other["held"]["select"][s], base["held"]["select"][s], d.clusters)
            cells.append(f"{100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]" + ("*" if low > 0 or high < 0 else ""))
        groups = [(other["held"]["select"][s], base["held"]["select"][s], d.clusters) for s, d in enumerate(base["data"])]
        mean, low, high = select.stratified_bootstrap(groups)
        overall = f"{100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]" + ("*" if low > 0 or high < 0 else "")
        lines.append(f"| {other['name']} - {base['name']}, default (LOCO) | | " + " | ".join(cells) + f" | {overall} |")
        result["differences"][other["name"]] = {"sets": cells, "mean": [mean, low, high]}
    lines += ["", "What the LOCO default chose with each set's corpus left out:", "",
              "| variant | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for variant in variants:
        lines.append(f"| {variant['name']} | " + " | ".join(f"`{c}`" for c in variant["chosen"]) + " |")
    lines.append("")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(relative(json.dumps(result, indent=1)) + "\n")
    write_report(args.out, relative("\n".join(lines)))


if __name__ == "__main__":
    main()
