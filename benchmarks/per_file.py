"""Each file once (``per_file``) against the chunk hits, on the evaluation suite's sets, for the default strategy.

    .venv/bin/python benchmarks/per_file.py --home SUITE_HOME [--sets benchmarks/suite/sets] [--only a,b]
        [--product N] [--out DIR]

The sets, their indexes and every question's BM25 and vector rankings (150 deep) are the suite's (``suite.load``:
indexed and ranked in ``--home`` where not cached). Per question, the default strategy (``hybrid-score``) fused by the
product's ``fuse_rankings`` (``SetData.rank``) gives:

- the chunk hits: the first 10 chunks, as a search returns them;
- the ``per_file`` hits: the same ranking 150 deep (``PER_FILE_CHUNKS``, as ``Index.answer`` asks for it), each file
  once at its best chunk's place, the first 10 files (``Index._per_file``'s rule); a file's other chunks among the
  first 30 are its ``also``.

Figures, per set and in mean over code sets, prose sets and all: the distinct files among the 10 hits (share and
median count); file-level Hit@5, Hit@10 and MRR@10 (a golden file counts once, at the rank of its first hit: a
chunk's rank among the chunk hits, its place among the per_file hits); for chunk-level sets, the golden chunk among
the 10 hits (per_file: shown as a hit's text, or shown or named by a hit's ``also`` line ranges). Golden files are a
document-level set's golden documents, a chunk-level set's golden chunks' documents.

``--product N``: the first N questions of each set (0: every one) asked of the product too, ``ctxrag.open(INDEX)``'s
``search(question, k=10, strategy="hybrid-score")`` with ``per_file`` off and on in the suite's home: the hits (chunk
ids, then files in order) checked equal to the figures' lists, and where each chunk hit's matched lines came from
(``tasks/retrieval/matches.py``): the query's terms (lines with marked words), the lines nearest the query's meaning
(word-piece vectors), or the hit's first lines (where the model's files are not on the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import suite
import suite_sets as sets_
from common import REPO, git, machine_meta, write_report  # benchmarks/common.py: the project first on sys.path

from ctxrag.searching import PER_FILE_ALSO, PER_FILE_CHUNKS
from ctxrag.tasks.common.hits import SearchAnswer
from ctxrag.tasks.retrieval.word_vectors import packaged_word_vectors

STRATEGY = "hybrid-score"  # the product's default
K = 10
GROUPS = ("code", "prose", "all")


def per_file(rows: list[int], doc_of_row: np.ndarray, k: int = K) -> tuple[list[int], dict[int, list[int]]]:
    """``Index._per_file``'s rule on a ranking of rows: the first ``k`` files (their best rows, in order), and each
    listed file's other rows among the first ``PER_FILE_ALSO`` x ``k``."""
    best: dict[int, int] = {}
    others: dict[int, list[int]] = {}
    for place, row in enumerate(rows):
        document = int(doc_of_row[row])
        if document not in best:
            if len(best) < k:
                best[document] = row
        elif place < PER_FILE_ALSO * k:
            others.setdefault(document, []).append(row)
    return list(best.values()), {document: others.get(document, []) for document in best}


def file_rank(files: list[int], golden: set[int]) -> int | None:
    """The 1-based rank of the first golden file in a list of files (one per hit), None if none is there."""
    return next((rank for rank, document in enumerate(files, start=1) if document in golden), None)


def question_figures(d: sets_.SetData, i: int) -> dict[str, float]:
    """One question's figures, chunk hits (``chunks_``) and per_file hits (``files_``)."""
    ranking = d.rank(i, STRATEGY, max(K, PER_FILE_CHUNKS))
    chunks, doc_of = ranking[:K], d.doc_of_row
    if chunks != d.rank(i, STRATEGY)[:K]:
        raise SystemExit(f"{d.name}: the 150-deep ranking does not begin with the top {K} (question {i})")
    shown, also = per_file(ranking, doc_of)
    golden_files = {int(doc_of[row]) for row in d.golden[i]} if d.level == "chunk" else set(d.golden[i].tolist())
    figures: dict[str, float] = {}
    for mode, files in (("chunks_", [int(doc_of[row]) for row in chunks]), ("files_", [int(doc_of[r]) for r in shown])):
        rank = file_rank(files, golden_files)
        figures[mode + "distinct"] = len(set(files))
        figures[mode + "share"] = len(set(files)) / len(files) if files else 0.0
        figures[mode + "hit@5"] = float(rank is not None and rank <= 5)
        figures[mode + "hit@10"] = float(rank is not None and rank <= K)
        figures[mode + "mrr@10"] = 1 / rank if rank is not None and rank <= K else 0.0
    if d.level == "chunk":
        golden_rows = set(d.golden[i].tolist())
        named = {row for rows in also.values() for row in rows}
        figures["chunks_chunk hit@10"] = float(bool(golden_rows & set(chunks)))
        figures["files_chunk shown"] = float(bool(golden_rows & set(shown)))
        figures["files_chunk shown or named"] = float(bool(golden_rows & (set(shown) | named)))
    return figures


def set_figures(d: sets_.SetData) -> dict:
    per_question = [question_figures(d, i) for i in range(len(d.texts))]
    keys = per_question[0].keys()
    means = {key: float(np.mean([q[key] for q in per_question])) for key in keys}
    for mode in ("chunks_", "files_"):
        means[mode + "median distinct"] = float(statistics.median(q[mode + "distinct"] for q in per_question))
        means[mode + "one file"] = float(np.mean([q[mode + "distinct"] == 1 for q in per_question]))
    return {"set": d.name, "kind": d.kind, "level": d.level, "questions": len(d.texts), "figures": means}


def product_pass(home: Path, spec: sets_.SetSpec, d: sets_.SetData, count: int) -> dict:
    """The first ``count`` questions (0: all) through ``ctxrag.open``: hits equal to the figures' lists, and where the
    chunk hits' matched lines came from."""
    import ctxrag

    index = ctxrag.open(spec.corpus.index)
    chunk_ids = index._searcher.index.chunks  # the index's rows, to name the suite's rows as the hits name them
    asked = range(len(d.texts)) if count == 0 else range(min(count, len(d.texts)))
    same_chunks = same_files = 0
    sources: Counter[str] = Counter()
    started = time.perf_counter()
    for i in asked:
        ranking = d.rank(i, STRATEGY, max(K, PER_FILE_CHUNKS))
        answer = index.search(d.texts[i], k=K, strategy=STRATEGY)
        same_chunks += [hit.chunk_id for hit in answer] == chunk_ids.values("chunk_id", ranking[:K])
        shown, _ = per_file(ranking, d.doc_of_row)
        grouped = index.search(d.texts[i], k=K, strategy=STRATEGY, per_file=True)
        same_files += [hit.chunk_id for hit in grouped] == chunk_ids.values("chunk_id", shown)
        sources.update(match_sources(answer))
    seconds = time.perf_counter() - started
    return {
        "asked": len(asked),
        "same chunk hits": same_chunks,
        "same per_file hits": same_files,
        "matched lines": dict(sources),
        "seconds per question (both searches)": seconds / max(len(asked), 1),
    }


def match_sources(answer: SearchAnswer) -> list[str]:
    """Where each hit's matched lines came from, by ``matched_lines``' rule: ``terms`` (a line with marked words),
    ``meaning`` (scored by word-piece vectors) or ``first lines`` (where the model's files are not on the machine)."""
    vectors = packaged_word_vectors() is not None
    return [
        "terms" if any(line.spans for line in hit.matches) else "meaning" if vectors else "first lines"
        for hit in answer
    ]


def group_means(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Each figure's mean over the sets of a kind (code, prose) and over all, each set weighing the same."""
    out = {}
    for group in GROUPS:
        members = [row for row in rows if group == "all" or row["kind"] == group]
        keys = {key for row in members for key in row["figures"]}
        out[group] = {
            key: float(np.mean([row["figures"][key] for row in members if key in row["figures"]]))
            for key in sorted(keys)
        }
        out[group]["sets"] = len(members)
    return out


def pct(value: float) -> str:
    return f"{100 * value:.1f}"


def render(result: dict, meta: dict) -> str:
    rows, means = result["sets"], result["means"]
    lines = [
        "# One file once: `per_file` against the chunk hits on the evaluation suite",
        "",
        f"One run, {meta['cpus']}-core machine ({meta['cpu']}), Python {meta['python']}, {meta['date']}; produced by "
        f"`benchmarks/per_file.py` (method in its docstring) at commit {meta['commit']}. Offline defaults, the "
        f"default strategy `{STRATEGY}`, 10 hits. {len(rows)} sets.",
        "",
        "*distinct*: the distinct files among the 10 hits, mean share (x100) and median count; *one file*: the share of "
        "questions whose 10 chunk hits are all of one file. File-level figures (x100): a golden file counts once, at "
        "its first hit's rank (among chunk hits: its best chunk's rank; among per_file hits: its place). "
        "`c`: chunk hits, `f`: per_file hits.",
        "",
        "| set | kind | level | questions | distinct c (share, median) | one file c | files f (median) | Hit@5 c | "
        "Hit@5 f | Hit@10 c | Hit@10 f | MRR@10 c | MRR@10 f |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def figures_row(name: str, kind: str, level: str, questions: str, f: dict) -> str:
        return (
            f"| {name} | {kind} | {level} | {questions} | {pct(f['chunks_share'])}, {f['chunks_median distinct']:.1f} | "
            f"{pct(f['chunks_one file'])} | {f['files_median distinct']:.1f} | {pct(f['chunks_hit@5'])} | "
            f"{pct(f['files_hit@5'])} | {pct(f['chunks_hit@10'])} | {pct(f['files_hit@10'])} | "
            f"{pct(f['chunks_mrr@10'])} | {pct(f['files_mrr@10'])} |"
        )

    for row in rows:
        lines.append(figures_row(row["set"], row["kind"], row["level"], str(row["questions"]), row["figures"]))
    for group in GROUPS:
        mean = means[group]
        label = f"**mean, {group} sets ({mean['sets']})**" if group != "all" else f"**mean, all ({mean['sets']})**"
        lines.append(figures_row(label, "", "", "", mean))
    chunk_rows = [row for row in rows if row["level"] == "chunk"]
    if chunk_rows:
        lines += [
            "",
            "Chunk-level sets (the golden answer is a chunk): the golden chunk among the 10 chunk hits, against the "
            "per_file hits: shown as a hit's text, or shown or named by a hit's `also` line ranges (x100).",
            "",
            "| set | chunk hits: golden chunk in 10 | per_file: shown | per_file: shown or in `also` |",
            "|---|---:|---:|---:|",
        ]
        for row in chunk_rows:
            f = row["figures"]
            lines.append(
                f"| {row['set']} | {pct(f['chunks_chunk hit@10'])} | {pct(f['files_chunk shown'])} | "
                f"{pct(f['files_chunk shown or named'])} |"
            )
    if result.get("product"):
        lines += [
            "",
            "## Through the product",
            "",
            '`ctxrag.open(INDEX).search(question, k=10, strategy="hybrid-score")` with `per_file` off and on, in the '
            "suite's home: hits equal to the lists above (chunk ids in order), and where the chunk hits' matched "
            "lines came from (x100 of the hits): the query's terms, the lines nearest its meaning, or the first lines "
            "(where the model's files are not on the machine).",
            "",
            "| set | asked | same chunk hits | same per_file hits | terms | meaning | first lines | s a question (both) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        totals: Counter[str] = Counter()
        for name, found in result["product"].items():
            counted = found["matched lines"]
            totals.update(counted)
            hits = sum(counted.values()) or 1
            lines.append(
                f"| {name} | {found['asked']} | {found['same chunk hits']} | {found['same per_file hits']} | "
                + " | ".join(pct(counted.get(source, 0) / hits) for source in ("terms", "meaning", "first lines"))
                + f" | {found['seconds per question (both searches)']:.2f} |"
            )
        hits = sum(totals.values()) or 1
        lines.append(
            "| **all hits** | | | | "
            + " | ".join(pct(totals.get(source, 0) / hits) for source in ("terms", "meaning", "first lines"))
            + " | |"
        )
    if meta["skipped"]:
        lines += ["", "Not run here: " + "; ".join(meta["skipped"]) + "."]
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="the suite's scratch CTXRAG_HOME (made if missing)")
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--sets", type=Path, default=REPO / "benchmarks" / "suite" / "sets", help="hand-written sets")
    parser.add_argument("--only", default="", help="comma-separated set names")
    parser.add_argument("--product", type=int, default=None, help="questions per set asked of the product (0: all)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args()
    args.home = args.home.resolve()
    args.rebuild, args.embedding_model = False, None
    args.context_tokens = sets_.corpora.EmbeddingOptions().context_tokens
    specs, data, skipped, _ = suite.load(args)
    result: dict = {"strategy": STRATEGY, "k": K, "sets": [set_figures(d) for d in data]}
    result["means"] = group_means(result["sets"])
    if args.product is not None:
        os.environ["CTXRAG_HOME"] = str(args.home)
        result["product"] = {d.name: product_pass(args.home, spec, d, args.product) for spec, d in zip(specs, data)}
    meta = {**machine_meta(), "skipped": skipped, "commit": git("rev-parse", "--short", "HEAD")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "per_file.json").write_text(suite.relative(json.dumps({**result, "meta": meta}, indent=1)) + "\n")
    write_report(args.out / "per_file.md", suite.relative(render(result, meta)))


if __name__ == "__main__":
    sys.exit(main())
