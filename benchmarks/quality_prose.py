"""On prose nobody tuned on, is hybrid-doc (tuned on code) or untuned RRF (hybrid) the better search? (issue: quality)

    .venv/bin/python benchmarks/quality_prose.py [--home CTXRAG_HOME] [--out benchmarks/results/quality_prose.md]

The docs sample (20 questions) prefers hybrid; it is the only prose set, and it is for checking. A second one, in
the style of CodeSearchNet and ``quality_repos.py``: the Markdown READMEs (long descriptions of >= 2,000 characters)
of the distributions installed here, one ``<name>.md`` each; a question per ATX heading (levels 1-4, outside fences)
with >= 3 words (markup stripped), a body of >= 200 characters and a text unique in the set; in the file its text
becomes ``Section N``, and its golden chunks are the file's chunks whose heading path ends with that section (at most
400 questions, a seeded sample). Indexed with the ``ctxrag`` CLI on offline defaults, ranked 20 deep through
``ctxrag.tasks.retrieval.search.Searcher``; paired bootstrap (ctxrag.tasks.evaluation.significance) of hybrid against hybrid-doc. ctxrag's own README
is left out (it changes with the project).

A third prose set: the docs corpus's 232 Claude-written chunk summaries (``anthropic_summary_indexed_docs.json``)
asked as questions against the same chunks indexed without them (``anthropic_docs.json``), one golden chunk each.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import json

import numpy as np

from common import RESULTS, SHARED_DATA, machine_meta, provenance, write_report  # benchmarks/common.py
from quality_cv_data import cli_index
from ctxrag.storage.index_store import IndexStore, StoredIndex  # noqa: E402
from ctxrag.tasks.load.chunking import _HEADING, _fence_after  # noqa: E402  (the chunker's own heading and fence rules)
from ctxrag.tasks.evaluation.metrics import hit_at_k, pass_at_k, reciprocal_rank_at_k  # noqa: E402
from ctxrag.tasks.retrieval.search import Searcher, Strategy  # noqa: E402
from ctxrag.tasks.evaluation.significance import paired_bootstrap  # noqa: E402

MIN_DESCRIPTION = 2_000
MIN_WORDS = 3
MIN_BODY = 200
MAX_LEVEL = 4
MAX_QUESTIONS = 400
KS = (1, 3, 5, 10, 20)
METRICS = [f"pass@{k}" for k in KS] + [f"hit@{k}" for k in KS] + ["mrr@10"]
STRATEGIES = {s.value: s for s in (Strategy.BM25, Strategy.VECTOR, Strategy.HYBRID, Strategy.HYBRID_DOC)}
LEFT_OUT = {"ctxrag"}  # this project: its README changes with it
MARKUP = [
    (re.compile(r"!?\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])"), r"\1"),  # links and images: their text
    (re.compile(r"<[^>]*>"), ""),  # inline HTML (anchors)
    (re.compile(r"`+|\*+|~~|(?<!\w)_+|_+(?!\w)"), ""),  # code spans, emphasis
]


@dataclass(frozen=True)
class Question:
    text: str
    doc: str  # the file, as the index's doc_id
    section: str  # "Section N", the heading's text in the written file


def normalized(name: str) -> str:
    """PEP 503: ``Foo_Bar.baz`` -> ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def readmes() -> list[tuple[str, str, str]]:
    """(normalized name, version, Markdown description) of the installed distributions that qualify, sorted by name."""
    found: dict[str, tuple[str, str, str]] = {}
    for dist in sorted(importlib.metadata.distributions(), key=lambda d: (normalized(d.metadata["Name"] or ""), d.version)):
        meta = dist.metadata
        text = meta.get_payload() or meta.get("Description") or ""  # type: ignore[attr-defined]
        kind = (meta.get("Description-Content-Type") or "").strip().lower()
        name = normalized(meta["Name"] or "")
        if name and name not in found and name not in LEFT_OUT and kind.startswith("text/markdown") and len(text) >= MIN_DESCRIPTION:
            found[name] = (name, dist.version, text)
    return sorted(found.values())


def plain(heading: str) -> str:
    """A heading's text without links, inline HTML, code spans and emphasis, whitespace collapsed."""
    for pattern, replacement in MARKUP:
        heading = pattern.sub(replacement, heading)
    return " ".join(heading.split())


def headings(lines: list[str]) -> list[tuple[int, str, int]]:
    """(line number, plain text, body characters) of each ATX heading of level <= MAX_LEVEL outside fences; the
    body runs to the next heading of any level."""
    found: list[tuple[int, str]] = []
    bounds: list[int] = []
    fence: str | None = None
    for number, line in enumerate(lines):
        match = _HEADING.match(line.rstrip()) if fence is None else None
        if match:
            bounds.append(number)
            if len(match.group(1)) <= MAX_LEVEL:
                found.append((number, plain(match.group(2) or "")))
        fence = _fence_after(line, fence)
    bounds.append(len(lines))
    ends = [next(bound for bound in bounds if bound > number) for number, _ in found]
    return [(number, text, len("".join(lines[number + 1 : end]).strip())) for (number, text), end in zip(found, ends)]


def build_set(docs: list[tuple[str, str, str]], folder: Path) -> tuple[list[Question], dict[str, int]]:
    """Write each README to ``folder`` with its question headings neutralized; return the questions and the counts
    of the funnel (headings, long enough, unique, asked)."""
    parsed = {name: text.splitlines(keepends=True) for name, _, text in docs}
    found = {name: headings(lines) for name, lines in parsed.items()}
    seen: dict[str, int] = {}
    for entries in found.values():
        for _, text, _ in entries:
            seen[text.casefold()] = seen.get(text.casefold(), 0) + 1
    counts = {"headings": sum(map(len, found.values())), "long enough": 0, "ambiguous": 0}
    questions: list[Question] = []
    for name, lines in parsed.items():
        number = 0
        for line_number, text, body in found[name]:
            if len([word for word in text.split() if re.search(r"\w", word)]) < MIN_WORDS or body < MIN_BODY:
                continue
            counts["long enough"] += 1
            if seen[text.casefold()] > 1:
                counts["ambiguous"] += 1
                continue
            number += 1
            marks = re.match(r"\s*#+", lines[line_number]).group(0)  # type: ignore[union-attr]
            lines[line_number] = f"{marks} Section {number}\n"
            questions.append(Question(text, f"{name}.md", f"Section {number}"))
        (folder / f"{name}.md").write_text("".join(lines), encoding="utf-8")
    counts["candidates"] = len(questions)
    if len(questions) > MAX_QUESTIONS:
        questions = random.Random(0).sample(questions, MAX_QUESTIONS)
    questions.sort(key=lambda q: (q.doc, int(q.section.split()[1])))
    return questions, counts


def golden_rows(index: StoredIndex, questions: list[Question]) -> list[list[int]]:
    """Per question, the rows of its file's chunks whose heading path ends with its section."""
    docs = index.chunks["doc_id"].to_pylist()
    paths = index.chunks["heading"].to_pylist()
    rows: dict[tuple[str, str], list[int]] = {}
    for row, (doc, path) in enumerate(zip(docs, paths)):
        rows.setdefault((doc, (path or "").split(" > ")[-1]), []).append(row)
    return [rows.get((q.doc, q.section), []) for q in questions]


def evaluate(searcher: Searcher, questions: list[Question], golden: list[list[int]]) -> dict[str, np.ndarray]:
    """Per strategy: a questions x METRICS array."""
    searcher.prefetch([q.text for q in questions])
    scores: dict[str, np.ndarray] = {}
    for name, strategy in STRATEGIES.items():
        values = []
        for question, wanted in zip(questions, golden):
            ranked = [hit.row for hit in searcher.search(question.text, strategy, k=max(KS))]
            values.append([pass_at_k(ranked, wanted, k) for k in KS] + [hit_at_k(ranked, wanted, k) for k in KS]
                          + [reciprocal_rank_at_k(ranked, wanted, 10)])
        scores[name] = np.array(values)
        print(f"{name}: done", file=sys.stderr, flush=True)
    return scores


def summary_questions(shared: Path, index: StoredIndex) -> tuple[list[Question], list[list[int]]]:
    """The docs corpus's summaries as questions, each with its own chunk (by link) as the golden one."""
    records = json.loads((shared / "anthropic_docs" / "anthropic_summary_indexed_docs.json").read_text())
    row_of = {link: row for row, link in enumerate(index.chunks["chunk_id"].to_pylist())}
    kept = [record for record in records if record.get("summary") and record["chunk_link"] in row_of]
    return [Question(record["summary"], record["chunk_link"], "") for record in kept], [[row_of[record["chunk_link"]]] for record in kept]


def score_table(scores: dict[str, np.ndarray]) -> list[str]:
    """Strategy x metric, then hybrid - hybrid-doc with its paired-bootstrap interval per metric."""
    lines = ["| strategy | " + " | ".join(METRICS) + " |", "|---|" + "---:|" * len(METRICS)]
    for name, values in scores.items():
        lines.append(f"| {name} | " + " | ".join(f"{100 * v:.2f}" for v in values.mean(axis=0)) + " |")
    lines += [
        "", "Differences in points (mean per question), paired bootstrap over the questions (10,000 resamples, seed 0, "
        "95% percentile interval); `*` = the interval excludes 0.", "", "| metric | hybrid - hybrid-doc |", "|---|---|",
    ]
    for j, metric in enumerate(METRICS):
        lines.append(f"| {metric} | {bootstrap_cell(scores['hybrid'][:, j], scores['hybrid-doc'][:, j])} |")
    return lines


def bootstrap_cell(a: np.ndarray, b: np.ndarray) -> str:
    """``+1.23 [-0.50, +2.90]`` in points; ``*`` when the interval excludes 0."""
    result = paired_bootstrap(a, b)
    mark = "*" if result.excludes_zero else ""
    return f"{100 * result.mean_difference:+.2f} [{100 * result.low:+.2f}, {100 * result.high:+.2f}]{mark}"


def render(scores: dict[str, np.ndarray], meta: dict, docs: list[tuple[str, str, str]]) -> str:
    """The Markdown report."""
    counts = meta["counts"]
    lines = [
        "# Prose checks: hybrid-doc (tuned on code) or hybrid (untuned RRF), on package READMEs and on the docs corpus's summaries",
        "",
        f"{provenance(meta)}; {meta['platform']}. Produced by `benchmarks/quality_prose.py` in "
        f"{meta['wall']:.0f} s (indexing {meta['index_seconds']:.0f} s).",
        "",
        f"- {len(docs)} distributions with a Markdown description of at least {MIN_DESCRIPTION:,} characters (of "
        f"{meta['installed']} installed), {meta['files']} files indexed, {meta['chunks']:,} chunks.",
        f"- {counts['headings']:,} headings (levels 1-{MAX_LEVEL}); {counts['long enough']} with >= {MIN_WORDS} words "
        f"and a body of >= {MIN_BODY} characters; {counts['ambiguous']} of those dropped as ambiguous (text occurs "
        f"more than once in the set); {counts['candidates']} candidates, {counts['sampled']} asked"
        f"{' (seeded sample)' if counts['candidates'] > MAX_QUESTIONS else ''}; {counts['no golden']} dropped for "
        f"having no golden chunk; **{counts['questions']} questions scored**, "
        f"{meta['golden_mean']:.2f} golden chunks each on average.",
        "",
        "Method. The README of each installed distribution is written as one Markdown file; each heading with a "
        "descriptive text (>= 3 words, a body of >= 200 characters, unique in the set) becomes a question, and its "
        "text in the file is replaced by a neutral `Section N`, so the question's words are not in its answer. "
        "The folder is indexed with `ctxrag index FOLDER --name prose` on offline defaults (structural contexts, local "
        "MiniLM, embedded BM25). A question's golden chunks are its file's chunks whose heading path ends with its "
        "`Section N` (a long section gives several). Each strategy ranks 20 deep via `ctxrag.tasks.retrieval.search.Searcher`; Pass@k "
        "is the share of golden chunks in the top k, Hit@k whether any is, MRR@10 the reciprocal rank of the first. "
        "Nothing is tuned here: hybrid-doc keeps the weights cross-validated on the codebase set. Each chunk's "
        "structural context, embedded and BM25-indexed with it, names its file (the package).",
        "",
    ]
    lines += score_table(scores)
    lines += ["", "Distributions: " + ", ".join(f"{name} {version}" for name, version, _ in docs) + "."]
    summaries = meta["summaries"]
    lines += [
        "", "## The docs corpus's summaries as questions", "",
        f"The {summaries['questions']} Claude-written chunk summaries of `anthropic_summary_indexed_docs.json` asked "
        f"against `anthropic_docs.json` (the same {summaries['chunks']} chunks, indexed without their summaries, "
        "offline defaults, in a home of its own); the golden chunk is the summary's own. Same metrics.", "",
    ]
    return "\n".join(lines + score_table(meta["summary_scores"]) + [""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=None, help="CTXRAG_HOME (default: a new temporary folder)")
    parser.add_argument("--out", type=Path, default=RESULTS / "quality_prose.md")
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    args = parser.parse_args()
    started = time.perf_counter()
    home = (args.home or Path(tempfile.mkdtemp(prefix="ctxrag-quality-prose-"))).resolve()
    folder = home / "sources" / "prose"
    folder.mkdir(parents=True, exist_ok=True)
    docs = readmes()
    questions, counts = build_set(docs, folder)
    counts["sampled"] = len(questions)
    clock = time.perf_counter()
    cli_index(home, folder, "prose")
    index_seconds = time.perf_counter() - clock
    index = IndexStore(home).open("prose")
    golden = golden_rows(index, questions)
    kept = [i for i, rows in enumerate(golden) if rows]
    counts["no golden"] = len(questions) - len(kept)
    counts["questions"] = len(kept)
    questions, golden = [questions[i] for i in kept], [golden[i] for i in kept]
    scores = evaluate(Searcher(index, home=home), questions, golden)
    docs_home = home / "docs"  # a home of its own: nothing indexed with summaries is reused
    cli_index(docs_home, args.shared_data / "anthropic_docs" / "anthropic_docs.json", "docs-plain")
    docs_index = IndexStore(docs_home).open("docs-plain")
    summary_set, summary_golden = summary_questions(args.shared_data, docs_index)
    summary_scores = evaluate(Searcher(docs_index, home=docs_home), summary_set, summary_golden)
    meta = {
        **machine_meta(),
        "platform": platform.platform(),
        "installed": len({normalized(d.metadata["Name"] or "") for d in importlib.metadata.distributions()}),
        "files": len(set(index.chunks["doc_id"].to_pylist())),
        "chunks": index.chunks.num_rows,
        "counts": counts,
        "golden_mean": float(np.mean([len(rows) for rows in golden])),
        "index_seconds": index_seconds,
        "summaries": {"questions": len(summary_set), "chunks": docs_index.chunks.num_rows},
        "summary_scores": summary_scores,
        "wall": time.perf_counter() - started,
    }
    write_report(args.out, render(scores, meta, docs))


if __name__ == "__main__":
    main()
