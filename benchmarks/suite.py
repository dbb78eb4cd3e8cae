"""The evaluation suite: every set, every strategy, leave-one-corpus-out selection of the default; one table, one file.

    .venv/bin/python benchmarks/suite.py --home SCRATCH_HOME [--sets benchmarks/suite/sets] [--only a,b] [--out DIR]
        [--context-tokens N]

Sets (suite_sets): the cookbook's, docstring-derived (rich, httpx, a stdlib subset), README headings, docs summaries
and the hand-written ``--sets``; one this machine cannot give is skipped with the reason. Each corpus is indexed once
by ``ctxrag index`` (offline defaults; ``CTXRAG_EMBED_PRECISION``, if set, is part of the embedder: another precision
is indexed and ranked again) in ``--home``, with every question's BM25 and vector rankings (150 deep). Strategies: the
product's and ``ctxrag tune``'s candidates, ranked by the product's ``fuse_rankings``. Selection (suite_select): with
a corpus out, the default is the configuration best on the other sets (mean of each set's primary metric), scored on
the left-out sets; LOCO default minus ``hybrid`` bootstrapped by golden document (10,000 resamples, 95%). Per set:
what ``ctxrag tune`` keeps on its own questions.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import suite_select as select
import suite_sets as sets_
from common import REPO, machine_meta, write_report  # benchmarks/common.py: the project first on sys.path

SHOWN = select.FIXED
CHOSEN_ON_ALL = ("hybrid-score",)  # the product's default: its constant was chosen with every set in, so never *best*
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home|tmp|usr|opt|var)/")


def relative(text: str) -> str:
    """A results text with this machine's folders named as the project names them (a set's ``made`` may quote one)."""
    for folder, name in (
        (sets_.corpora.STDLIB, "the stdlib folder"),
        (sets_.corpora.SITE, "site-packages"),
        (REPO.parent, ".."),
    ):
        text = (
            text.replace(str(folder) + "/)", name + ")")
            .replace(str(folder) + "/", name + "/")
            .replace(str(folder), name)
        )
    found = MACHINE_PATH.search(text)
    if found:
        raise SystemExit(
            f"a results file would name a path of this machine: ...{text[max(0, found.start() - 60) : found.end() + 60]}..."
        )
    return text


def product_check(home: Path, specs: list[sets_.SetSpec], data: list[sets_.SetData]) -> dict[str, dict[str, str]]:
    """Per set and configuration: for how many questions the product's ``Searcher`` returns the suite's top 20."""
    from ctxrag.tasks.retrieval.search import Searcher, StrategyConfig

    found = {}
    for spec, d in zip(specs, data):
        searcher = Searcher(sets_.corpora.IndexStore(home).open(spec.corpus.index), home=home)
        searcher.prefetch(d.texts)
        found[d.name] = {}
        for label in select.configs():
            same = sum(
                [hit.row for hit in searcher.search(text, StrategyConfig.from_str(label), sets_.RANKED)]
                == d.rank(i, label)
                for i, text in enumerate(d.texts)
            )
            found[d.name][label] = f"{same}/{len(d.texts)}"
    return found


def load(args: argparse.Namespace) -> tuple[list[sets_.SetSpec], list[sets_.SetData], list[str], dict[str, float]]:
    specs = sets_.builtin_sets(args.shared_data)
    written, skipped = sets_.handwritten_sets(args.sets, args.shared_data)
    specs += written
    if args.only:
        wanted = set(args.only.split(","))
        specs = [spec for spec in specs if spec.name in wanted]
    loaded, seconds = [], {}
    for spec in specs:
        started = time.perf_counter()
        loaded.append(
            sets_.load_set(
                args.home,
                spec,
                rebuild=args.rebuild,
                context_tokens=args.context_tokens,
                embedding_model=args.embedding_model,
            )
        )
        seconds[spec.name] = time.perf_counter() - started
        print(
            f"{spec.name}: {len(loaded[-1].texts)} questions, {seconds[spec.name]:.0f} s", file=sys.stderr, flush=True
        )
    return specs, loaded, skipped, seconds


def evaluate(data: list[sets_.SetData], home: Path) -> dict:
    grid = select.configs()
    started = time.perf_counter()
    matrices = [select.matrix(home, d, grid) for d in data]
    scored = time.perf_counter() - started
    started = time.perf_counter()
    held, loco = select.loco(data, matrices, grid)
    means = np.stack([m.mean(axis=1) for m in matrices], axis=1)
    rows = []
    for s, d in enumerate(data):
        default, hybrid, chosen = held[s], matrices[s][grid.index("hybrid")], loco[d.unit]
        entry_means = {name: float(means[grid.index(name), s]) for name in SHOWN} | {"select": float(default.mean())}
        best = max((name for name in entry_means if name not in CHOSEN_ON_ALL), key=entry_means.get)
        rows.append(
            {
                "set": d.name,
                "corpus": d.label,
                "unit": d.unit,
                "level": d.level,
                "kind": d.kind,
                "style": d.style,
                "made": d.made,
                "questions": len(d.texts),
                "dropped": d.dropped,
                "chunks": d.chunks,
                "documents": int(d.doc_of_row.max() + 1),
                "golden documents": int(np.unique(d.clusters).size),
                "primary": d.primary,
                "fixed": {name: all_metrics(d, name) for name in SHOWN},
                "default": {"chosen": chosen, "held out": float(default.mean()), "metrics": all_metrics(d, chosen)},
                "entries": entry_means,
                "best": best,
                "gap": float(default.mean()) - entry_means[best],
                "in-set best": {"config": grid[int(np.argmax(means[:, s]))], "value": float(means[:, s].max())},
                "default - hybrid": list(select.cluster_bootstrap(default, hybrid, d.clusters)),
                "tune": select.tuned(d),
            }
        )
    groups = {
        base: [(held[s], matrices[s][grid.index(base)], d.clusters) for s, d in enumerate(data)]
        for base in ("hybrid", "hybrid-doc")
    }
    return {
        "sets": rows,
        "loco": loco,
        "mean": {name: float(np.mean([row["entries"][name] for row in rows])) for name in rows[0]["entries"]},
        "default - hybrid (mean over sets)": list(select.stratified_bootstrap(groups["hybrid"])),
        "default - hybrid-doc (mean over sets)": list(select.stratified_bootstrap(groups["hybrid-doc"])),
        "chosen on every set": grid[select.pick(means)],
        "configurations": len(grid),
        "seconds": {"scores": scored, "selection": time.perf_counter() - started},
    }


def all_metrics(d: sets_.SetData, strategy: str) -> dict[str, float]:
    values = np.array([d.score(i, d.rank(i, strategy)) for i in range(len(d.texts))])
    return dict(zip(d.metrics, values.mean(axis=0).tolist()))


def embedder_note(embedder: dict | None) -> str:
    """How the local model read each chunk, as the report's first paragraph says it."""
    if not embedder:
        return ""
    windows = f"windows of {embedder['window_tokens']} word pieces" if embedder.get("window_tokens") else "whole texts"
    context = (
        f", the context cut to {embedder['context_tokens']} word pieces"
        if embedder.get("context_tokens")
        else ", the context whole"
    )
    return f"; the local model reads {windows}{context}" + (
        f", in {embedder['precision']}" if embedder.get("precision") else ""
    )


def pct(value: float) -> str:
    return f"{100 * value:.1f}"


def interval(found: list[float]) -> str:
    """A bootstrap's mean and interval in points; ``*`` when the interval excludes 0."""
    mean, low, high = found
    return f"{100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]" + ("*" if low > 0 or high < 0 else "")


def render(result: dict, meta: dict) -> str:
    rows = result["sets"]
    lines = [
        "# Evaluation suite: leave-one-corpus-out choice of the default strategy",
        "",
        f"One run, {meta['cpus']}-core machine ({meta['cpu']}), Python {meta['python']}, {meta['date']}; produced by "
        f"`benchmarks/suite.py` (method in its docstring). Offline defaults (structural contexts, local MiniLM, "
        f"embedded BM25){embedder_note(meta.get('embedder'))}. {len(rows)} sets on {len(result['loco'])} corpora; {result['configurations']:,} "
        "configurations (the product's strategies and `ctxrag tune`'s candidates, each ranked by the product's fusion).",
        "",
        "Each set's primary metric, x100: `mrr@10` is the reciprocal rank of the first golden chunk within the top 10; "
        "`doc-mrr@10` the same for the first chunk of any golden document (document-level sets); `pass@10` (codebase) "
        "the share of golden chunks in the top 10; `recall@3` (docs-sample) the same in the top 3, the docs target's "
        "metric. **default (LOCO)**: the configuration chosen with the set's corpus left out (by the mean over the "
        "other sets of their primary metric, every set weighing the same), scored on the set; *chosen*: what that was. "
        "*best*: the strategy with the best held-out figure on the set among the product's and `select`; *gap*: default "
        "minus best. `hybrid-score` is the product's default at the constant this selection chose with every set in (so "
        "it is not held out and is never *best*). Last column: default minus `hybrid`, paired bootstrap resampling "
        "golden documents with all their questions, 95%; `*`: excludes 0.",
        "",
        "| set | corpus | style | questions | metric | "
        + " | ".join(SHOWN)
        + " | default (LOCO) | chosen with the corpus out | best | gap | default - hybrid |",
        "|---|---|---|---:|---|" + "---:|" * len(SHOWN) + "---:|---|---|---:|---|",
    ]
    for row in rows:
        fixed = " | ".join(pct(row["fixed"][name][row["primary"]]) for name in SHOWN)
        lines.append(
            f"| {row['set']} | {row['unit']} | {row['kind']}/{row['style']} | {row['questions']} | {row['primary']} | {fixed} | "
            f"**{pct(row['default']['held out'])}** | `{row['default']['chosen']}` | {row['best']} ({pct(row['entries'][row['best']])}) | "
            f"{100 * row['gap']:+.1f} | {interval(row['default - hybrid'])} |"
        )
    means = result["mean"]
    lines.append(
        "| **mean over sets** | | | | | "
        + " | ".join(pct(means[name]) for name in SHOWN)
        + f" | **{pct(means['select'])}** | | | | {interval(result['default - hybrid (mean over sets)'])} |"
    )
    lines += [
        "",
        f"Mean over sets, LOCO default minus `hybrid-doc` (the default before this suite): "
        f"{interval(result['default - hybrid-doc (mean over sets)'])} points (same bootstrap). With every set in, the "
        f"selection would choose `{result['chosen on every set']}`.",
    ]
    lines += [
        "",
        "## With `ctxrag tune` on the set's own questions",
        "",
        "What `ctxrag tune` keeps for an index when the set's questions are its evaluation set: the product's "
        "candidates and decision (`ctxrag.tasks.evaluation.tune.decide`: 5 folds grouped by golden document; the "
        "choice is kept only if its cross-validated figure beats the default; under 30 questions the default "
        "stays), on the set's primary metric (x100). *expected*: the cross-validated figure if a choice is kept, "
        "else the default's; *best*: as in the first table; *gap*: expected minus best.",
        "",
        "| set | questions | kept | cross-validated | default | expected | best | gap |",
        "|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        tune = row["tune"]
        cv = pct(tune["cv"]) if tune["cv"] is not None else "-"
        lines.append(
            f"| {row['set']} | {row['questions']} | {tune['kept'] or '(default)'} | {cv} | {pct(tune['default'])} | "
            f"**{pct(tune['expected'])}** | {row['best']} ({pct(row['entries'][row['best']])}) | "
            f"{100 * (tune['expected'] - row['entries'][row['best']]):+.1f} |"
        )
    expected, best = (
        np.mean([row["tune"]["expected"] for row in rows]),
        np.mean([row["entries"][row["best"]] for row in rows]),
    )
    lines.append(
        f"| **mean over sets** | | | | {pct(np.mean([row['tune']['default'] for row in rows]))} | **{pct(expected)}** | "
        f"{pct(best)} | {100 * (expected - best):+.1f} |"
    )
    lines += ["", "## What was chosen with each corpus left out", "", "| left out | default (`select`) |", "|---|---|"]
    for unit, chosen in result["loco"].items():
        lines.append(f"| {unit} | `{chosen}` |")
    lines += [
        "",
        "## Other metrics",
        "",
        "Every metric of each set (x100) for the fixed strategies and the LOCO default.",
        "",
        "| set | metric | " + " | ".join(SHOWN) + " | default (LOCO) |",
        "|---|---|" + "---:|" * (len(SHOWN) + 1),
    ]
    for row in rows:
        for metric in row["fixed"]["bm25"]:
            lines.append(
                f"| {row['set']} | {metric} | "
                + " | ".join(pct(row["fixed"][name][metric]) for name in SHOWN)
                + f" | {pct(row['default']['metrics'][metric])} |"
            )
    lines += [
        "",
        "## The sets",
        "",
        "| set | corpus | level | questions (dropped) | golden documents | chunks | how the questions were made |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['set']} | {row['corpus']} | {row['level']} | {row['questions']} ({row['dropped']}) | "
            f"{row['golden documents']} | {row['chunks']:,} | {row['made']} |"
        )
    if result.get("product check"):
        checks = result["product check"]
        agree = all(value.split("/")[0] == value.split("/")[1] for row in checks.values() for value in row.values())
        lines += [
            "",
            "Every configuration through `ctxrag.tasks.retrieval.search.Searcher` on the same indexes: the top 20 equals the suite's for "
            + (
                "every question of every set."
                if agree
                else "; ".join(
                    f"{name}: " + ", ".join(f"{k} {v}" for k, v in row.items()) for name, row in checks.items()
                )
            ),
        ]
    if meta["skipped"]:
        lines += ["", "Skipped: " + "; ".join(meta["skipped"]) + "."]
    seconds = meta["seconds"]
    lines += [
        "",
        f"Timings: sets loaded (indexing and ranking where not cached) {sum(seconds['sets'].values()):.0f} s; "
        f"configurations scored {seconds['scores']:.0f} s (cached after the first run); LOCO selection "
        f"and bootstraps {seconds['selection']:.0f} s; whole run {seconds['total']:.0f} s.",
    ]
    if meta["indexing"]:
        lines += [
            "",
            "`ctxrag index` of each corpus, as recorded when its live index was built in this home (cold the first "
            "time; a re-index for another embedder reuses the stored contexts and the vectors of unchanged texts): "
            + ", ".join(f"{name} {value:.0f} s" for name, value in meta["indexing"].items())
            + ".",
        ]
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--home", type=Path, default=None, help="scratch CTXRAG_HOME: indexes and caches (default: a new temporary one)"
    )
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--sets", type=Path, default=REPO / "benchmarks" / "suite" / "sets", help="hand-written sets")
    parser.add_argument("--only", default="", help="comma-separated set names")
    parser.add_argument("--rebuild", action="store_true", help="rank the questions again (indexes are kept)")
    parser.add_argument(
        "--check-product",
        action="store_true",
        help="compare every configuration with ctxrag.tasks.retrieval.search.Searcher",
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=sets_.corpora.EmbeddingOptions().context_tokens,
        help="ctxrag index --context-tokens for every corpus (default: the product's)",
    )
    parser.add_argument(
        "--embedding-model",
        default=None,
        help="ctxrag index --embedding-model for every corpus: a model folder or id (default: the product's)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    args.home = (args.home or Path(tempfile.mkdtemp(prefix="ctxrag-suite-"))).resolve()
    specs, data, skipped, seconds = load(args)
    if len({d.unit for d in data}) < 2:
        raise SystemExit("leave-one-corpus-out needs sets on at least two corpora")
    result = evaluate(data, args.home)
    if args.check_product:
        result["product check"] = product_check(args.home, specs, data)
    result["seconds"] = {"sets": seconds, **result["seconds"], "total": time.perf_counter() - started}
    meta = {
        **machine_meta(),
        "skipped": skipped,
        "seconds": result["seconds"],
        "indexing": sets_.corpora.indexing_seconds(args.home),
        "embedder": sets_.corpora.embedder(args.context_tokens, args.embedding_model),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "suite.json").write_text(relative(json.dumps({**result, "meta": meta}, indent=1)) + "\n")
    write_report(args.out / "suite.md", relative(render(result, meta)))


if __name__ == "__main__":
    main()
