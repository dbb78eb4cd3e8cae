"""Lines by meaning: how a hit found by its meaning alone (no line holds a query term) chooses the 3 lines it shows.

On the cookbook's codebase index (built once in ``--home``), every evaluation question is searched as ``ctxrag
mcp`` searches (10 hits, each file once); each hit without a term line, with more than 3 non-blank lines, is a case.
The reference ranks all its lines by the index's own model (each line and the query embedded, cosine): what a
person would get if the model read every line. Each way of choosing is scored by its overlap with the reference's 3
lines (share of them it shows) and whether it shows the reference's best line, and timed per search (all of one
search's cases in one call, as ``matched_lines`` asks, median over questions):

- ``model, 8 spread lines``: the model on at most 8 lines spread over the hit, at most 32 lines a search (the
  product before: the rest showed their first lines; here every case gets its 8, the better case for it);
- ``word-piece vectors``: ``ctxrag.tasks.retrieval.word_vectors`` on all the lines (the product now);
- ``first 3 lines``: no scoring.

Writes benchmarks/results/meaning_lines.md (and .json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from common import RESULTS, SHARED_DATA, git, machine_meta, portable_path, private_env, run_ctxrag, write_report

if TYPE_CHECKING:
    from ctxrag.searching import Index

CORPUS, QUESTIONS = SHARED_DATA / "codebase" / "codebase_chunks.json", SHARED_DATA / "codebase" / "evaluation_set.jsonl"
SPREAD_LINES = 8  # the model's lines a hit, before
SHOWN = 3


def cases(index: Index, questions: list[str]) -> list[tuple[str, list[list[str]]]]:
    """(question, the lines of each of its hits found by meaning alone) for every question that has such hits."""
    from ctxrag.tasks.retrieval.matches import MAX_LINE_CHARS, query_terms, term_lines

    found = []
    for question in questions:
        terms = query_terms(question)
        answer = index.search(question, k=10, per_file=True)
        hits = [
            [text.strip()[:MAX_LINE_CHARS] for text in hit.content.split("\n") if text.strip()]
            for hit in answer
            if not term_lines(hit.content, terms)
        ]
        if hits := [lines for lines in hits if len(lines) > SHOWN]:
            found.append((question, hits))
    return found


def measure(index: Index, found: list[tuple[str, list[list[str]]]]) -> dict:
    from ctxrag.storage.vectors import normalize_rows
    from ctxrag.tasks.retrieval.matches import spread
    from ctxrag.tasks.retrieval.word_vectors import packaged_word_vectors

    model = index._searcher.embedder  # the index's own model (the local MiniLM)
    vectors = packaged_word_vectors()
    assert vectors is not None, "the packaged model is a dependency of ctxrag"

    def by_model(question: str, texts: list[str]) -> np.ndarray:
        return (
            normalize_rows(model.embed(texts, input_type="query"))
            @ normalize_rows(model.embed([question], input_type="query"))[0]
        )

    ways = ("model, 8 spread lines", "word-piece vectors", "first 3 lines")
    overlap: dict[str, list[float]] = {way: [] for way in ways}
    best: dict[str, list[bool]] = {way: [] for way in ways}
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    for question, hits in found:
        chosen: dict[str, list[list[int]]] = {}
        begun = time.perf_counter()
        asked = [
            (hit, number) for hit, lines in enumerate(hits) for number in spread(list(range(len(lines))), SPREAD_LINES)
        ]
        scores = by_model(question, [hits[hit][number] for hit, number in asked])
        chosen[ways[0]] = [
            [number for _, (h, number) in sorted(zip(-scores, asked)) if h == hit][:SHOWN] for hit in range(len(hits))
        ]
        seconds[ways[0]].append(time.perf_counter() - begun)
        begun = time.perf_counter()
        flat = vectors.similarity(question, [line for lines in hits for line in lines])
        starts = np.cumsum([0] + [len(lines) for lines in hits])
        chosen[ways[1]] = [
            list(np.argsort(-np.asarray(flat[starts[i] : starts[i + 1]]), kind="stable")[:SHOWN])
            for i in range(len(hits))
        ]
        seconds[ways[1]].append(time.perf_counter() - begun)
        chosen[ways[2]] = [list(range(SHOWN)) for _ in hits]
        seconds[ways[2]].append(0.0)
        for position, lines in enumerate(hits):
            reference = by_model(question, lines)
            top = set(np.argsort(-reference, kind="stable")[:SHOWN].tolist())
            for way in ways:
                shown = {int(number) for number in chosen[way][position]}
                overlap[way].append(len(top & shown) / SHOWN)
                best[way].append(int(np.argmax(reference)) in shown)
    return {
        way: {
            "overlap@3": round(statistics.fmean(overlap[way]), 3),
            "best line shown": round(statistics.fmean(best[way]), 3),
            "ms a search (median)": round(1000 * statistics.median(seconds[way]), 2),
        }
        for way in ways
    }


def render(report: dict) -> str:
    lines = [
        "# Lines by meaning: choosing the lines a hit found by its meaning alone shows",
        "",
        f"One run, {report['cpus']}-core machine ({report['cpu']}), Python {report['python']}, {report['date']}; produced by `benchmarks/meaning_lines.py` (method in its "
        f"docstring) at commit {report['commit']}, load {report['load_average_start'][0]:.1f} at the start. "
        f"{report['questions']} questions, {report['searches']} with such hits, {report['cases']} hits.",
        "",
        "| way | overlap@3 with the model on all lines | its best line shown | ms a search (median) |",
        "|---|---:|---:|---:|",
    ]
    for way, figures in report["ways"].items():
        lines.append(
            f"| {way} | {figures['overlap@3']:.3f} | {figures['best line shown']:.3f} | {figures['ms a search (median)']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, required=True, help="scratch folder: the index is built here once")
    args = parser.parse_args()
    built = args.home / "built"
    env = private_env(built, CTXRAG_PREFECT_SERVER="temporary")
    if not (built / "indexes" / "codebase").is_dir():
        run_ctxrag(["index", str(CORPUS), "--name", "codebase"], env)
    os.environ["CTXRAG_HOME"] = env["CTXRAG_HOME"]
    questions = [json.loads(line)["query"] for line in QUESTIONS.read_text().splitlines() if line.strip()]
    report = {**machine_meta(), "commit": git("rev-parse", "--short", "HEAD"), "load_average_start": os.getloadavg()}
    import ctxrag

    index = ctxrag.open("codebase")
    found = cases(index, questions)
    report.update(
        corpus=portable_path(CORPUS),
        questions=len(questions),
        searches=len(found),
        cases=sum(len(hits) for _, hits in found),
        ways=measure(index, found),
    )
    (RESULTS / "meaning_lines.json").write_text(json.dumps(report, indent=2) + "\n")
    write_report(RESULTS / "meaning_lines.md", render(report))
    print(render(report), file=sys.stdout)


if __name__ == "__main__":
    main()
