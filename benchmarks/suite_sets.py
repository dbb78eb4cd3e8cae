"""The evaluation suite's sets: a registry (each set says how its questions were made), the hand-written sets' loader,
per-set metrics, and the cache of every question's BM25 and vector rankings (150 deep) in the scratch home.

A set is asked of one corpus (suite_corpora). Golden answers are chunks (rows of the index) or documents. Metrics:
``pass@k``, ``recall@k``, ``mrr@k``, ``hit@k`` over chunks (ctxrag.tasks.evaluation.metrics); ``doc-mrr@k`` and
``doc-hit@k`` rank the first chunk of any golden document. A set's first metric is its primary one. A strategy ranks
a question (``SetData.rank``) as the product does: the cached rankings fused by ``fuse_rankings``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import suite_corpora as corpora
import suite_questions as questions_
from suite_corpora import Corpus, Unavailable

from ctxrag.storage.index_store import StoredIndex
from ctxrag.tasks.context.structure import defined_names, mentioned_names
from ctxrag.tasks.evaluation.evalset import golden_ref, load_evalset
from ctxrag.tasks.evaluation.metrics import hit_at_k, pass_at_k, recall_at_k, reciprocal_rank_at_k
from ctxrag.tasks.retrieval.search import DEFINES, Searcher, StrategyConfig, fuse_rankings

DEPTH = 150  # each retriever's ranking, as the hybrid strategies read it (ctxrag.storage.fusion.FUSION_DEPTH)
RANKED = 20  # each strategy's ranking, as scored
STDLIB_PATHS = ["asyncio", "email", "http", "json", "logging", "urllib", "concurrent"]  # as stdlib-behaviour's corpus
CODE_METRICS = ["mrr@10", "hit@10", "mrr@3", "hit@3"]
DOCUMENT_METRICS = ["doc-mrr@10", "doc-hit@10", "doc-mrr@3", "doc-hit@3"]
CACHE_VERSION = 1


@dataclass
class Question:
    text: str
    golden: list  # rows of the index (chunk level) or doc ids (document level)


@dataclass
class SetSpec:
    name: str
    corpus: Corpus
    level: str  # "chunk" or "document"
    metrics: list[str]  # the first is the primary one
    kind: str  # "code" or "prose"
    style: str
    made: str
    questions: Callable[[Path, StoredIndex], list[Question]]
    key: str = ""  # what else the cached rankings depend on (a hand-written set's question file)


def rows_by(index: StoredIndex, column: str) -> dict[str, int]:
    return {value: row for row, value in enumerate(index.chunks[column].to_pylist())}


def chunk_refs(index: StoredIndex) -> dict[str, int]:
    """``doc_id#chunk_index`` -> row (the cookbook's golden pairs and the docstring sets' question files)."""
    chunks = index.chunks
    return {
        golden_ref(doc, position): row
        for row, (doc, position) in enumerate(zip(chunks["doc_id"].to_pylist(), chunks["chunk_index"].to_pylist()))
    }


def from_evalset(path: Callable[[Path], Path], by_link: bool) -> Callable[[Path, StoredIndex], list[Question]]:
    """Questions of a ctxrag.tasks.evaluation.evalset file (JSONL pairs or docs links), golden chunks as rows."""

    def build(home: Path, index: StoredIndex) -> list[Question]:
        rows = rows_by(index, "chunk_id") if by_link else chunk_refs(index)
        return [
            Question(q.query, [rows[ref] for ref in q.golden if ref in rows]) for q in load_evalset(path(home)).queries
        ]

    return build


def builtin_sets(data: Path) -> list[SetSpec]:
    """The sets made by the project's own means (shared data and miners)."""
    docs_plain = corpora.shared(data, "anthropic_docs/anthropic_docs.json")
    specs = [
        SetSpec(
            "codebase",
            corpora.shared(data, "codebase/codebase_chunks.json"),
            "chunk",
            ["pass@10", "pass@5", "pass@20", "mrr@10"],
            "code",
            "cookbook",
            "The cookbook's 248 questions, written by an LLM from the chunks themselves (golden: chunks); primary "
            "Pass@10, the cookbook's own metric.",
            from_evalset(lambda home: data / "codebase" / "evaluation_set.jsonl", False),
        ),
        SetSpec(
            "docs-sample",
            corpora.shared(data, "anthropic_docs/anthropic_summary_indexed_docs.json"),
            "chunk",
            ["recall@3", "mrr@3", "recall@10"],
            "prose",
            "cookbook",
            "20 of the cookbook's docs questions (golden: 1-3 chunk links) on the summary-indexed docs; primary "
            "recall@3, the metric of the cookbook's published figures and of the project's docs target.",
            from_evalset(lambda home: data / "anthropic_docs" / "docs_evaluation_sample.json", True),
        ),
        SetSpec(
            "docs-summaries",
            docs_plain,
            "chunk",
            CODE_METRICS,
            "prose",
            "summary",
            "The docs corpus's 232 Claude-written chunk summaries asked against the same chunks indexed without them "
            "(suite_questions.summary_questions); golden: the summary's own chunk.",
            lambda home, index: [Question(q.text, rows) for q, rows in zip(*questions_.summary_questions(data, index))],
        ),
        SetSpec(
            "readmes-heading",
            corpora.readmes(),
            "chunk",
            ["mrr@10", "pass@10", "hit@10"],
            "prose",
            "heading",
            "Headings of the installed distributions' Markdown READMEs as questions, each heading replaced by "
            "`Section N` in its file (suite_questions.build_set); golden: the chunks under that section.",
            readme_questions,
        ),
    ]
    for package, distribution in (("rich", "rich"), ("httpx", "httpx")):
        specs.append(docstring_set(f"{package}-docstring", corpora.site_package(package, distribution)))
    specs.append(docstring_set("stdlib-docstring", corpora.stdlib(STDLIB_PATHS)))
    return specs


def docstring_set(name: str, base: Corpus) -> SetSpec:
    corpus = corpora.docstring_free(base)
    made = (
        "First sentences (>= 6 words) of public docstrings as questions, asked of a docstring-free copy "
        "(suite_questions.mine; at most 400, seeded sample); golden: the chunk holding the definition's header line."
    )
    return SetSpec(
        name,
        corpus,
        "chunk",
        CODE_METRICS,
        "code",
        "docstring",
        made,
        from_evalset(lambda home: home / f"{corpus.index}.jsonl", False),
    )


def readme_questions(home: Path, index: StoredIndex) -> list[Question]:
    questions = questions_.build_set(questions_.readmes(), corpora.readmes().prepare(home))
    return [Question(q.text, rows) for q, rows in zip(questions, questions_.golden_rows(index, questions))]


def handwritten_sets(folder: Path, data: Path) -> tuple[list[SetSpec], list[str]]:
    """Every ``<folder>/<name>/set.json`` + ``questions.jsonl``; and why each set that cannot run here is skipped."""
    specs, skipped = [], []
    for meta_path in sorted(folder.glob("*/set.json")) if folder.is_dir() else []:
        meta = json.loads(meta_path.read_text())
        name = meta.get("name", meta_path.parent.name)
        try:
            corpus = corpora.corpus_of(meta["corpus"], data)
        except Unavailable as reason:
            skipped.append(f"{name}: skipped, {reason}")
            print(f"suite: {skipped[-1]}", file=sys.stderr)
            continue
        text = (meta_path.parent / "questions.jsonl").read_text()
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        level = "chunk" if meta.get("level") == "chunk" else "document"
        specs.append(
            SetSpec(
                name,
                corpus,
                level,
                CODE_METRICS if level == "chunk" else DOCUMENT_METRICS,
                meta.get("kind", "?"),
                meta.get("style", "?"),
                meta.get("made", ""),
                handwritten_questions(records, level),
                hashlib.sha256(text.encode()).hexdigest(),
            )
        )
    return specs, skipped


def handwritten_questions(records: list[dict], level: str) -> Callable[[Path, StoredIndex], list[Question]]:
    def build(home: Path, index: StoredIndex) -> list[Question]:
        if level == "chunk":
            rows = rows_by(index, "chunk_id")
            return [Question(r["query"], [rows[link] for link in r["golden_chunks"] if link in rows]) for r in records]
        return [Question(r["query"], list(r["golden_docs"])) for r in records]

    return build


# --- the ranking cache ---------------------------------------------------------------------------------------------


@dataclass
class SetData:
    """One set's cached rankings, as the selection reads them."""

    name: str
    unit: str
    label: str
    level: str
    metrics: list[str]
    kind: str
    style: str
    made: str
    texts: list[str]
    golden: list[np.ndarray]  # per question: rows (chunk level) or document numbers
    clusters: np.ndarray  # per question: its (first) golden document's number
    doc_of_row: np.ndarray
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # rank_arrays: per question, BM25 and vector rankings
    defines: dict[int, frozenset[str]] = field(default_factory=dict)  # row -> the names its chunk defines
    dropped: int = 0  # questions whose golden answer is not in the index
    chunks: int = 0
    rankings: str = ""  # the rankings' cache key (the set and the index version they were made on)

    @property
    def primary(self) -> str:
        return self.metrics[0]

    def score(self, i: int, ranking: list[int] | np.ndarray, metrics: list[str] | None = None) -> list[float]:
        """The question's metrics (default: all of the set's) for a ranking of rows."""
        return [metric_value(name, ranking, self.golden[i], self.doc_of_row) for name in (metrics or self.metrics)]

    def rank(self, i: int, strategy: str, depth: int = RANKED) -> list[int]:
        """Rows of the index, ``depth`` of them, as the product's ``strategy`` (a ``StrategyConfig`` label) ranks
        question ``i``: the cached rankings, in ``Searcher.rankings``' order, through ``fuse_rankings`` (the function
        ``Searcher.fuse`` runs)."""
        names = mentioned_names(self.texts[i])

        def evidence(rows: list[int]) -> tuple[dict[int, int], set[int]]:
            return {row: int(self.doc_of_row[row]) for row in rows}, {
                row for row in rows if self.defines.get(row, frozenset()) & names
            }

        rankings = {
            side: [
                (int(row), float(score))
                for row, score in zip(self.arrays[side[0] + "row"][i], self.arrays[side[0] + "score"][i])
                if row >= 0
            ]
            for side in ("vector", "bm25")
        }  # arrays "vrow", "vscore", "brow", "bscore"
        return [hit.row for hit in fuse_rankings(StrategyConfig.from_str(strategy), rankings, depth, evidence)]


def metric_value(name: str, ranking, golden: np.ndarray, doc_of_row: np.ndarray) -> float:
    kind, k = name.rsplit("@", 1)
    items = list(ranking)
    if kind.startswith("doc-"):
        kind, items = kind[4:], [int(doc_of_row[row]) for row in items]
    function = {"pass": pass_at_k, "recall": recall_at_k, "mrr": reciprocal_rank_at_k, "hit": hit_at_k}[kind]
    return function(items, golden.tolist(), int(k))


def cache_paths(home: Path, name: str) -> tuple[Path, Path]:
    folder = home / "suite"
    return folder / f"{name}.npz", folder / f"{name}.json"


def build_cache(home: Path, spec: SetSpec) -> None:
    """Make the questions, rank each 150 deep with BM25 and vector on the corpus's live index, and store it all."""
    index = corpora.IndexStore(home).open(spec.corpus.index)
    questions = spec.questions(home, index)
    doc_ids = index.chunks["doc_id"].to_pylist()
    numbering = {doc: number for number, doc in enumerate(dict.fromkeys(doc_ids))}
    doc_of_row = np.array([numbering[doc] for doc in doc_ids])
    kept, golden = [], []
    for question in questions:
        wanted = (
            [numbering[doc] for doc in question.golden if doc in numbering]
            if spec.level == "document"
            else list(question.golden)
        )
        if wanted:
            kept.append(question.text)
            golden.append(wanted)
    arrays = rank_arrays(Searcher(index, home=home), kept)
    defines = chunk_defines(index)
    npz, meta = cache_paths(home, spec.name)
    npz.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(npz, doc_of_row=doc_of_row, **arrays)
    first_doc = [int(doc_of_row[g[0]]) if spec.level == "chunk" else g[0] for g in golden]
    meta.write_text(
        json.dumps(
            {
                "version": CACHE_VERSION,
                "key": cache_key(spec, home),
                "name": spec.name,
                "unit": spec.corpus.unit,
                "label": spec.corpus.label,
                "level": spec.level,
                "metrics": spec.metrics,
                "kind": spec.kind,
                "style": spec.style,
                "made": spec.made,
                "texts": kept,
                "golden": golden,
                "clusters": first_doc,
                "dropped": len(questions) - len(kept),
                "defines": {str(row): names for row, names in enumerate(defines) if names},
            }
        )
    )


def rank_arrays(searcher: Searcher, texts: list[str]) -> dict[str, np.ndarray]:
    """Every question's BM25 and vector rankings, DEPTH deep: rows (-1 past the end) and scores, as cached."""
    searcher.prefetch(texts)
    arrays = {
        key: np.full((len(texts), DEPTH), fill, dtype)
        for key, fill, dtype in (
            ("brow", -1, np.int32),
            ("bscore", 0, np.float32),
            ("vrow", -1, np.int32),
            ("vscore", np.nan, np.float32),
        )
    }
    for i, text in enumerate(texts):
        for prefix, ranking in (("b", searcher.rank_bm25(text, DEPTH)), ("v", searcher.rank_vector(text, DEPTH))):
            for position, (row, value) in enumerate(ranking):
                arrays[prefix + "row"][i, position], arrays[prefix + "score"][i, position] = row, value
    return arrays


def chunk_defines(index: StoredIndex) -> list[list[str]]:
    """Per row, the names its chunk defines (the index's column; its text for an index without one)."""
    if DEFINES in index.chunks.column_names:
        return [sorted(found or []) for found in index.chunks[DEFINES].to_pylist()]
    return [sorted(defined_names(text)) for text in index.chunks["content"].to_pylist()]


def cache_key(spec: SetSpec, home: Path) -> str:
    """What the cache depends on: the set's definition and the live index version (the questions are made from both)."""
    live = corpora.IndexStore(home).live_version(spec.corpus.index)
    text = json.dumps(
        [
            CACHE_VERSION,
            spec.name,
            spec.level,
            spec.metrics,
            spec.made,
            spec.corpus.label,
            spec.key,
            live.name if live else None,
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_set(
    home: Path,
    spec: SetSpec,
    rebuild: bool = False,
    context_tokens: int = corpora.EmbeddingOptions().context_tokens,
    embedding_model: str | None = None,
) -> SetData:
    """The set's cached rankings (made first if missing, stale or asked to), on the corpus's index as
    ``ctxrag index --context-tokens`` makes it (``corpora.ensure_index``: indexed again if its embedder differs)."""
    corpora.ensure_index(home, spec.corpus, context_tokens, embedding_model)
    npz, meta_path = cache_paths(home, spec.name)
    current = json.loads(meta_path.read_text()) if meta_path.exists() and not rebuild else None
    if current is None or current.get("key") != cache_key(spec, home):
        build_cache(home, spec)
        current = json.loads(meta_path.read_text())
    arrays = dict(np.load(npz))
    defines = {int(row): frozenset(names) for row, names in current["defines"].items()}
    return SetData(
        current["name"],
        current["unit"],
        current["label"],
        current["level"],
        current["metrics"],
        current["kind"],
        current["style"],
        current["made"],
        current["texts"],
        [np.array(g) for g in current["golden"]],
        np.array(current["clusters"]),
        arrays["doc_of_row"],
        dropped=current["dropped"],
        chunks=len(arrays["doc_of_row"]),
        rankings=current["key"],
        arrays=arrays,
        defines=defines,
    )
