"""How each cost of `ctxrag index` and of a query grows with corpus size.

    .venv/bin/python benchmarks/scale.py [--sizes sample,cookbook,tree,synthetic] [--tree PATH] [--tree-options OPTIONS]
        [--synthetic-chunks 100000] [--synthetic-steps 20000] [--synthetic-check 2000] [--timeout-minutes 40] [--out DIR]
        [--keep] [--code DIR] [--seed-contexts] [--merge]

Each size: `ctxrag index SOURCE --name N --json` in a fresh CTXRAG_HOME (its own PREFECT_HOME: the run starts the
local server, stopped after the size), its process tree sampled with psutil (RSS, threads, CPU), the run's report for
stages, task runs from its log and its Prefect database; then `ctxrag search` as a process (median of 3) and, in a
helper process, 50 queries' p50/p95 per strategy (and a large version's ANN recall against exact search). Sizes:
sample (data/sample/corpus), cookbook (737 chunks), tree (a real code tree, default torch/_inductor, ~8,500 chunks;
`--tree-options`: its index options, e.g. the stdlib folder's `--exclude site-packages --exclude test/`), synthetic
(generated JSON, `--contextualizer none`, its embeddings pre-seeded with random unit vectors for the run's own keys: a
check size must embed 0 chunks, else the larger ones are skipped). `--seed-contexts` seeds the empty contexts too;
`--merge` adds to --out's scale.json; `--code DIR` runs another copy of the source. Writes scale.json and scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import scale_size
from common import (  # benchmarks/common.py
    REPO,
    RESULTS,
    SHARED_DATA,
    git,
    machine_meta,
    portable_path,
    portable_text,
    site_packages,
)
from scale_corpus import CHUNKS_PER_DOCUMENT, seed_embeddings, write_synthetic
from scale_report import markdown_table, write_results
from scale_size import bench_size, measure_latency


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_seed":
        return seed_embeddings(Path(sys.argv[2]), Path(sys.argv[3]), contexts="contexts" in sys.argv[4:])
    if len(sys.argv) > 1 and sys.argv[1] == "_latency":
        return measure_latency(Path(sys.argv[2]), sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="sample,cookbook,tree,synthetic")
    parser.add_argument("--tree", type=Path, default=site_packages() / "torch" / "_inductor")
    parser.add_argument("--tree-options", default="", help="ctxrag index options for the tree size")
    parser.add_argument("--synthetic-chunks", type=int, default=100_000)
    parser.add_argument(
        "--synthetic-steps", default="20000", help="Intermediate synthetic sizes, comma-separated ('' for none)."
    )
    parser.add_argument("--synthetic-check", type=int, default=2_000, help="Fast-path check size, run first.")
    parser.add_argument("--timeout-minutes", type=float, default=40.0, help="For the tree and synthetic runs.")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="Keep each size's CTXRAG_HOME (under the temp folder).")
    parser.add_argument("--code", type=Path, help="Run ctxrag from this copy of the source (first on PYTHONPATH).")
    parser.add_argument(
        "--seed-contexts",
        action="store_true",
        help="Synthetic sizes: also pre-seed the empty contexts (isolates the other stages).",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="Add to --out's scale.json (same size names replaced) instead of starting anew.",
    )
    args = parser.parse_args()
    scale_size.CODE = args.code.resolve() if args.code else None
    sizes = [size.strip() for size in args.sizes.split(",") if size.strip()]
    if unknown := set(sizes) - {"sample", "cookbook", "tree", "synthetic"}:
        parser.error(f"unknown sizes: {', '.join(sorted(unknown))}")
    import prefect

    meta = {
        **machine_meta(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "prefect": prefect.__version__,
        "command": "benchmarks/scale.py " + portable_text(" ".join(sys.argv[1:])),
        "load_average_start": [round(value, 2) for value in os.getloadavg()],
        "task_workers": os.environ.get("CTXRAG_TASK_WORKERS", "4 (default)"),
        "embed_precision": os.environ.get("CTXRAG_EMBED_PRECISION", "auto"),
        "code": portable_path(scale_size.CODE or REPO),
        "git_head": git("rev-parse", "--short", "HEAD"),
        "working_tree_changes": git("status", "--short", "--untracked-files=no") or "none",
    }
    timeout = args.timeout_minutes * 60
    records: dict[str, dict] = {}  # by size: a new size goes last, a size measured again keeps its place
    if args.merge and (args.out / "scale.json").is_file():
        previous = json.loads((args.out / "scale.json").read_text())
        records = {record["size"]: record for record in previous["sizes"]}
        meta = {**previous["meta"], "merged_runs": previous["meta"].get("merged_runs", []) + [meta]}

    def add(record: dict) -> None:
        records[record["size"]] = record
        (meta["merged_runs"][-1] if args.merge and meta.get("merged_runs") else meta)["load_average_end"] = [
            round(value, 2) for value in os.getloadavg()
        ]
        write_results(args.out, list(records.values()), meta)

    for size, source, limit, what in (
        ("sample", REPO / "data" / "sample" / "corpus", 600, "The README's sample corpus"),
        ("cookbook", SHARED_DATA / "codebase" / "codebase_chunks.json", 1200, "The cookbook's codebase corpus"),
        ("tree", args.tree, timeout, "A real code tree (a folder SOURCE)"),
    ):
        if size in sizes:
            options = args.tree_options.split() if size == "tree" else []
            add(
                bench_size(
                    size,
                    "real",
                    source,
                    options,
                    limit,
                    args.keep,
                    note=f"{what}; structural contexts; local MiniLM embeddings.",
                )
            )
    if "synthetic" in sizes:
        steps = (
            [args.synthetic_check]
            + [int(part) for part in args.synthetic_steps.split(",") if part.strip()]
            + [args.synthetic_chunks]
        )
        steps = sorted(dict.fromkeys(step for step in steps if step > 0))
        workdir = Path(tempfile.mkdtemp(prefix="ctxrag-scale-synthetic-"))
        try:
            for number, chunks in enumerate(steps):
                corpus = workdir / f"synthetic-{chunks}.json"
                made = write_synthetic(corpus, chunks)
                print(
                    f"\nwrote {corpus} ({made['documents']} documents, {made['chunks']} chunks, {made['bytes'] / 2**20:.0f} MiB) in {made['seconds']} s",
                    flush=True,
                )
                short = f"{chunks // 1000}k" if chunks % 1000 == 0 else str(chunks)
                label = f"synthetic-{short}" + ("-seeded-contexts" if args.seed_contexts else "")
                check = " The fast-path check (must embed 0 chunks)." if number == 0 and len(steps) > 1 else ""
                if args.seed_contexts:
                    check += " Contexts pre-seeded too: no contextualize task runs (the stage only looks them up)."
                record = bench_size(
                    label,
                    "synthetic-seeded-contexts" if args.seed_contexts else "synthetic",
                    corpus,
                    ["--contextualizer", "none"],
                    timeout,
                    args.keep,
                    seed=True,
                    seed_contexts=args.seed_contexts,
                    generated=True,
                    note=f"Generated ({made['documents']:,} documents x {CHUNKS_PER_DOCUMENT} chunks, "
                    f"{made['bytes'] / 2**20:.0f} MiB of JSON); `--contextualizer none`; embeddings pre-seeded (fast path)."
                    + check,
                )
                record["expected_chunks"], record["expected_documents"] = made["chunks"], made["documents"]
                add(record)
                corpus.unlink(missing_ok=True)
                if record.get("status") != "ok" or record["report"]["chunks_embedded"] != 0:
                    print(
                        f"{label}: {record.get('status')}, {record.get('report', {}).get('chunks_embedded')} chunks embedded (the fast path "
                        "embeds none): larger synthetic sizes skipped",
                        flush=True,
                    )
                    break
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\n" + markdown_table(list(records.values())))
    print(f"\nwrote {args.out / 'scale.md'} and {args.out / 'scale.json'}")


if __name__ == "__main__":
    main()
