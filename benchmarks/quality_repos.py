"""Do the codebase set's fusion choices hold on real repositories with questions nobody tuned on? (issue: quality)

    .venv/bin/python benchmarks/quality_repos.py [--packages rich,sqlalchemy/orm] [--home CTXRAG_HOME] [--out benchmarks/results]

The cookbook's questions were written by an LLM, and they are skewed: 57% of their golden chunks are the first or
second chunk of their document (23% of the corpus's chunks are). A ranking signal can fit that skew instead of
retrieval. This benchmark asks questions whose answers lie wherever the code is, in the style of CodeSearchNet:

- Repositories: installed Python packages (their sources in this venv's site-packages), copied with every docstring
  removed (module, class and function docstrings; comments stay), so the code is what it would be without them.
- Questions: the first sentence of each public function's or class's docstring (at least 6 words); its golden chunk
  is the chunk of the docstring-free copy that holds the definition's header line. A question whose header line is
  not unique in its file, or whose text repeats another question's, is left out.
- Each copy is indexed with the ``ctxrag`` CLI on offline defaults (structural contexts, local MiniLM, embedded BM25);
  every query is ranked once by BM25 and by vector (150 deep) and the strategies are scored on those rankings with
  ``benchmarks/quality_cv.py``'s implementations and the parameters chosen there on the codebase set (no tuning
  here), plus an ablation (doc-def's weights without its definition bonus). Pass@k = Hit@k (one golden chunk per
  question). Paired bootstrap (ctxrag.tasks.evaluation.significance) against doc-rank (the previous default) and against hybrid.

Docstring questions are terse and describe more than they name, so absolute figures are
low; the point is the differences between strategies.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from common import RESULTS, SHARED_DATA, machine_meta, provenance, site_packages, write_report  # benchmarks/common.py
from quality_cv_data import KS, Dataset, cli_index, load_dataset
from quality_cv_fusion import VARIANTS, v_rrf, v_single
from quality_cv_report import describe, disagreement_table, interval
from quality_cv_select import code_scores, run_variant
from ctxrag.tasks.load import load_source  # noqa: E402
from ctxrag.tasks.context.structure import mentioned_names  # noqa: E402

MIN_WORDS = 6
MAX_QUERIES = 400  # per repository, a seeded sample when there are more
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`])")


def docstring_node(node: ast.AST) -> ast.Expr | None:
    if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        return body[0]
    return None


def strip_docstrings(source: str) -> str | None:
    """The source without its docstrings (their lines blanked; a body left empty gets ``...``), or None if unparsable."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines()
    for node in ast.walk(tree):
        doc = docstring_node(node)
        if doc is None or doc.end_lineno is None:
            continue
        keep_stub = len(node.body) == 1  # type: ignore[attr-defined]
        indent = re.match(r"\s*", lines[doc.lineno - 1]).group(0)  # type: ignore[union-attr]
        for number in range(doc.lineno - 1, doc.end_lineno):
            lines[number] = ""
        if keep_stub:
            lines[doc.lineno - 1] = f"{indent}..."
    return "\n".join(lines) + "\n"


def first_sentence(docstring: str) -> str:
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    return SENTENCE.split(paragraph)[0]


def mine(package: Path, copy: Path) -> list[tuple[str, str, str]]:
    """Write the docstring-free copy of ``package`` to ``copy``; return (question, file, header line) triples."""
    found: list[tuple[str, str, str]] = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        stripped = strip_docstrings(source)
        if stripped is None:
            continue
        relative = path.relative_to(package)
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_text(stripped, encoding="utf-8")
        lines = stripped.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or node.name.startswith("_"):
                continue
            docstring = ast.get_docstring(node)
            if not docstring:
                continue
            question = first_sentence(docstring)
            header = lines[node.lineno - 1].strip()
            if len(question.split()) >= MIN_WORDS and header and sum(line.strip() == header for line in lines) == 1:
                found.append((question, str(relative), header))
    return found


def write_evalset(copy: Path, mined: list[tuple[str, str, str]], out: Path, seed: int = 0) -> int:
    """Golden chunk = the chunk of the copy (as ctxrag loads it) holding the header line. Returns the query count."""
    chunks: dict[str, list[tuple[int, str]]] = {}
    for chunk in load_source(copy).chunks:
        chunks.setdefault(chunk.doc_id, []).append((chunk.chunk_index, chunk.content))
    seen: set[str] = set()
    records = []
    for question, doc, header in mined:
        holding = [index for index, content in chunks.get(doc, []) if any(line.strip() == header for line in content.splitlines())]
        if len(holding) != 1 or question in seen:
            continue
        seen.add(question)
        records.append({"query": question, "golden_chunk_uuids": [[doc, holding[0]]]})
    repeated = {record["query"] for record in records if sum(other["query"] == record["query"] for other in records) > 1}
    records = [record for record in records if record["query"] not in repeated]
    if len(records) > MAX_QUERIES:
        records = random.Random(seed).sample(records, MAX_QUERIES)
    out.write_text("".join(json.dumps(record) + "\n" for record in records))
    return len(records)


REFERENCES = {
    "bm25": (v_single, {"retriever": "bm25"}),
    "vector": (v_single, {"retriever": "vector"}),
    "hybrid": (v_rrf, {"kb": 60, "kv": 60, "w": 1.0}),
}
TUNED = ("doc-rank", "doc-def", "doc-position")  # quality_cv families, each at its whole-set choice
ABOUT = {
    "doc-rank": "document evidence (the default hybrid-doc before definitions)",
    "doc-def": "doc-rank + definition evidence (hybrid-doc now)",
    "doc-position": "doc-rank + a lead prior (a probe of the codebase set's skew)",
    "doc-def, dm=0": "ablation: doc-def's weights without the definition bonus",
}


def repository_index_name(package: str) -> str:
    """``sqlalchemy/orm`` -> ``repo-sqlalchemy-orm``."""
    return "repo-" + re.sub(r"[^a-z0-9]+", "-", package.lower()).strip("-")


def prepare_repository(package: Path, home: Path, name: str) -> tuple[Path, Path]:
    """The docstring-free copy of ``package`` and its question file under ``home`` (made once, then reused)."""
    copy, evalset = home / "sources" / name, home / f"{name}.jsonl"
    if not evalset.exists():
        copy.mkdir(parents=True, exist_ok=True)
        count = write_evalset(copy, mine(package, copy), evalset)
        print(f"{package.name}: {count} questions", file=sys.stderr, flush=True)
    return copy, evalset


def codebase_choices(code: Dataset) -> dict[str, tuple]:
    """Each tuned family's configuration best on the whole codebase set (quality_cv's grids and objective)."""
    chosen = dict(REFERENCES)
    for family in TUNED:
        function, params_grid, _ = VARIANTS[family]
        scores = np.stack([code_scores(code, run_variant(code, function, params)) for params in params_grid])
        chosen[family] = (function, params_grid[int(np.argmax(scores.mean(axis=(1, 2))))])
    function, params = chosen["doc-def"]
    chosen["doc-def, dm=0"] = (function, {**params, "dm": 0.0})  # ablation: its fusion weights without definitions
    return chosen


def score(data: Dataset, strategies: dict[str, tuple]) -> dict[str, np.ndarray]:
    return {name: code_scores(data, run_variant(data, function, params)) for name, (function, params) in strategies.items()}


def definition_reach(data: Dataset) -> tuple[float, float]:
    """Share of questions where some candidate defines a name the question mentions, and where the golden one does."""
    row_of = {ref: row for row, ref in enumerate(data.refs)}
    some = golden = 0
    for query in data.queries:
        names = mentioned_names(query.text)
        candidates = np.nonzero(np.isfinite(query.rb) | np.isfinite(query.rv))[0]
        some += any(data.defines[row] & names for row in candidates)
        golden += any(data.defines[row_of[ref]] & names for ref in query.golden if ref in row_of)
    return some / len(data.queries), golden / len(data.queries)


def render(results: dict[str, dict], meta: dict) -> str:
    lines = [
        "# Real repositories, docstring questions: do the codebase set's choices hold?",
        "",
        f"{provenance(meta)}. Produced by "
        "`benchmarks/quality_repos.py`; how the questions are made is in its docstring. Offline defaults; parameters "
        "from the codebase set (each family's whole-set choice, quality_cv's grids), none tuned here. Pass@k in %; "
        "differences (points) against doc-rank and against hybrid (RRF k=60): paired bootstrap, 10,000 resamples, 95%, "
        "`*` = the interval excludes 0.",
        "",
    ]
    for package, result in results.items():
        scores = result["scores"]
        lines += [
            f"## {package}: {result['chunks']:,} chunks in {result['documents']:,} files, {result['queries']} questions",
            "",
            "| strategy | P@5 | P@10 | P@20 | vs doc-rank @5 | @10 | @20 | vs hybrid @5 | @10 | @20 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, values in scores.items():
            cells = []
            for base in ("doc-rank", "hybrid"):
                same = name == base or (base == "doc-rank" and name not in ABOUT)
                cells += ["-"] * 3 if same else [interval(values[:, i], scores[base][:, i]) for i in range(len(KS))]
            label = f"{name}: {ABOUT[name]}" if name in ABOUT else name
            lines.append(f"| {label} | " + " | ".join(f"{100 * v:.2f}" for v in values.mean(axis=0)) + " | " + " | ".join(cells) + " |")
        lines += ["", "Where bm25 and vector disagree (found = Pass@k of 1; each fusion's mean Pass@k on those queries):", ""]
        lines += disagreement_table(scores, ["hybrid", "doc-def"])
        reach = result["reach"]
        lines += ["", f"A definition match fires for {100 * reach[0]:.0f}% of the questions (some candidate defines a name the "
                  f"question mentions); the golden chunk defines one in {100 * reach[1]:.0f}%.", ""]
    lines += ["Parameters (chosen on the whole codebase set): " + "; ".join(f"{name}: `{describe((name if name in TUNED else 'doc-def', params))}`" for name, (_, params) in meta["strategies"].items() if name in ABOUT), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", default="rich,sqlalchemy/orm", help="folders under site-packages")
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    site = site_packages()
    home = args.home or Path(tempfile.mkdtemp(prefix="ctxrag-quality-repos-"))
    os.environ["CTXRAG_HOME"] = str(home)
    corpus = args.shared_data / "codebase" / "codebase_chunks.json"
    cli_index(home, corpus, "code")
    strategies = codebase_choices(load_dataset("code", home, args.shared_data / "codebase" / "evaluation_set.jsonl"))
    results: dict[str, dict] = {}
    for package in args.packages.split(","):
        name = repository_index_name(package)
        copy, evalset = prepare_repository(site / package, home, name)
        cli_index(home, copy, name)
        data = load_dataset(name, home, evalset)
        results[package] = {
            "chunks": len(data.refs),
            "documents": int(data.doc_of_row.max() + 1),
            "queries": len(data.queries),
            "scores": score(data, strategies),
            "reach": definition_reach(data),
        }
    write_report(args.out / "quality_repos.md", render(results, {**machine_meta(), "strategies": strategies}))


if __name__ == "__main__":
    main()
