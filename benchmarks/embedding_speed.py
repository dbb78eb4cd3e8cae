"""Local embedding speed and quality: fp32 vs bf16 on the cookbook's codebase chunks (read from ../shared/data).

    .venv/bin/python benchmarks/embedding_speed.py [--shared-data PATH] [--rounds 2] [--contextualizer none|structural]
                                                    [--explore] [--threads N] [--limit N] [--out benchmarks/results/embedding_speed.md]

Times the indexing path (``embed_with_cache`` into an empty cache) over all chunks, variants alternating round by
round so that load from other processes falls on all of them alike:

- ``fp32, by characters``: the embedder before token-count batching (sentence-transformers' own batching of the
  128-text groups, sorted by characters): the old figure, for reference;
- ``fp32`` and ``bf16``: ``LocalEmbedder`` with its precision forced.

Reports chunks/s (wall, ``time.perf_counter``) and CPU seconds (``resource.getrusage``), the bf16 / fp32 ratio, the
largest 1 - cosine between a chunk's fp32 and bf16 vectors, and vector Pass@5/10/20 on the 248 queries for fp32,
bf16, and bf16 queries against fp32 chunk vectors (an index built from a cache holding both). ``--explore`` also
times bf16 at batch sizes 16/32/64, and with one torch thread beside the default. Writes a Markdown copy of what it
prints.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from common import RESULTS, SHARED_DATA, cpu_model  # benchmarks/common.py

from ctxrag.storage.artifacts import RowCache  # noqa: E402
from ctxrag.storage.backends.embedded import top_rows  # noqa: E402
from ctxrag.storage.vectors import VectorIndex  # noqa: E402
from ctxrag.tasks.context.contextualize import NoContext, StructuralContextualizer  # noqa: E402
from ctxrag.tasks.embedding.embed import (  # noqa: E402
    BATCH_SIZE,
    EmbedderSpec,
    LocalEmbedder,
    embed_with_cache,
)
from ctxrag.tasks.embedding.precision import cpu_has_native_bf16, measured_bf16_speedup  # noqa: E402
from ctxrag.tasks.evaluation.evalset import golden_ref, load_evalset  # noqa: E402
from ctxrag.tasks.load.cookbook import load_cookbook  # noqa: E402
from ctxrag.tasks.evaluation.metrics import pass_at_k  # noqa: E402
from ctxrag.tasks.common.models import indexed_text  # noqa: E402

KS = (5, 10, 20)


class CharacterBatchedEmbedder:
    """The embedder as it was before token-count batching: fp32, sentence-transformers sorting each call by characters."""

    def __init__(self, spec: EmbedderSpec) -> None:
        self.inner = LocalEmbedder(spec, precision="fp32")

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        vectors = self.inner.model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed_embedding(texts: list[str], embedder: object, spec: EmbedderSpec) -> tuple[np.ndarray, float, float]:
    """(vectors, wall seconds, CPU seconds) for embedding ``texts`` into an empty cache, as an index build does."""
    with tempfile.TemporaryDirectory(prefix="ctxrag-embed-bench-") as home:
        cpu, wall = cpu_seconds(), time.perf_counter()
        vectors, embedded = embed_with_cache(texts, spec, RowCache(Path(home), "embeddings"), embedder=embedder)  # type: ignore[arg-type]
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    assert embedded == len(set(texts)) or embedded == len(texts), embedded
    return vectors, wall, cpu


def corpus_texts(path: Path, contextualizer: str) -> tuple[list[str], list[str]]:
    """(texts as indexed, golden refs of the rows) for a cookbook corpus."""
    corpus = load_cookbook(path)
    maker = StructuralContextualizer() if contextualizer == "structural" else NoContext()
    contexts: dict[str, str] = {}
    for document in corpus.documents:
        chunks = [chunk for chunk in corpus.chunks if chunk.doc_id == document.doc_id]
        contexts.update((chunk.chunk_id, context) for chunk, context in zip(chunks, maker.contextualize(document, chunks)))
    texts = [indexed_text(contexts[chunk.chunk_id], chunk.content) for chunk in corpus.chunks]
    refs = [golden_ref(chunk.doc_id, chunk.chunk_index) for chunk in corpus.chunks]
    return texts, refs


def pass_at(chunk_vectors: np.ndarray, query_vectors: np.ndarray, refs: list[str], golden: list[tuple[str, ...]]) -> dict[int, float]:
    """Vector-strategy Pass@k in percent, ranked as the embedded backend ranks (exact cosine, ties by row)."""
    index = VectorIndex(chunk_vectors)
    scores: dict[int, list[float]] = {k: [] for k in KS}
    for query_vector, wanted in zip(query_vectors, golden):
        retrieved = [refs[row] for row in top_rows(index.scores(query_vector), max(KS))]
        for k in KS:
            scores[k].append(pass_at_k(retrieved, list(wanted), k))
    return {k: 100 * float(np.mean(values)) for k, values in scores.items()}


def alternate(variants: dict[str, Callable[[], tuple[np.ndarray, float, float]]], rounds: int, lines: list[str]) -> dict[str, dict]:
    """Run each variant once per round, in turn; keep each run's wall and CPU time and the last vectors."""
    results: dict[str, dict] = {name: {"wall": [], "cpu": [], "load": []} for name in variants}
    for round_number in range(1, rounds + 1):
        for name, run in variants.items():
            vectors, wall, cpu = run()
            load = os.getloadavg()[0]
            results[name]["wall"].append(wall)
            results[name]["cpu"].append(cpu)
            results[name]["load"].append(load)
            results[name]["vectors"] = vectors
            say(lines, f"round {round_number}: {name:<22} {wall:7.1f} s wall  {cpu:7.1f} s CPU  (load average {load:.1f})", table=False)
    return results


def say(lines: list[str], text: str = "", table: bool = True) -> None:
    print(text, flush=True)
    lines.append(text if table else f"    {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--contextualizer", choices=["none", "structural"], default="none")
    parser.add_argument("--explore", action="store_true", help="also time bf16 batch sizes and torch thread counts")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own, one per core)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N chunks and queries (a quick check)")
    parser.add_argument("--out", type=Path, default=RESULTS / "embedding_speed.md")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    texts, refs = corpus_texts(args.shared_data / "codebase" / "codebase_chunks.json", args.contextualizer)
    evalset = load_evalset(args.shared_data / "codebase" / "evaluation_set.jsonl")
    queries = [query.query for query in evalset.queries]
    golden = [query.golden for query in evalset.queries]
    if args.limit:
        texts, refs, queries, golden = texts[: args.limit], refs[: args.limit], queries[: args.limit], golden[: args.limit]
    spec = EmbedderSpec()
    fp32, bf16 = LocalEmbedder(spec, precision="fp32"), LocalEmbedder(spec, precision="bf16")
    before = CharacterBatchedEmbedder(spec)
    fp32.embed(texts[:64])  # load the model and warm both paths up outside the timings
    bf16.embed(texts[:64])

    lines: list[str] = ["# Local embedding speed: fp32 vs bf16", ""]
    say(lines, f"Machine: {os.cpu_count()} cores ({cpu_model()}; native bf16: {cpu_has_native_bf16()}; auto's timing: bf16 "
               f"{measured_bf16_speedup():.2f}x as fast as fp32), torch {torch.__version__} "
               f"with {torch.get_num_threads()} threads, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}.")
    say(lines, f"Corpus: {len(texts)} codebase chunks (contextualizer {args.contextualizer}), {len(queries)} queries; "
               f"all-MiniLM-L6-v2, max 512 word pieces, batch {BATCH_SIZE}. Produced by `benchmarks/embedding_speed.py`; "
               "these are one run's figures, on a machine shared with other work (see the load averages).")
    say(lines)
    say(lines, "Runs (alternating):")
    say(lines)

    variants = {
        "fp32, by characters": lambda: timed_embedding(texts, before, spec),
        "fp32": lambda: timed_embedding(texts, fp32, spec),
        "bf16": lambda: timed_embedding(texts, bf16, spec),
    }
    results = alternate(variants, args.rounds, lines)
    say(lines)
    say(lines, "| variant | chunks/s (best round) | chunks/s (mean of rounds) | CPU s (least) | speed-up vs fp32 (best rounds) |")
    say(lines, "|---|---:|---:|---:|---:|")
    best = {name: len(texts) / min(result["wall"]) for name, result in results.items()}
    for name, result in results.items():
        mean_rate = float(np.mean([len(texts) / wall for wall in result["wall"]]))
        say(lines, f"| {name} | {best[name]:.1f} | {mean_rate:.1f} | {min(result['cpu']):.1f} | {best[name] / best['fp32']:.2f}x |")
    say(lines)
    say(lines, f"bf16 / fp32: {best['bf16'] / best['fp32']:.2f}x (best rounds); "
               f"{min(results['fp32']['cpu']) / min(results['bf16']['cpu']):.2f}x less CPU time.")

    v32, v16 = results["fp32"]["vectors"], results["bf16"]["vectors"]
    cosine = np.sum(v32 * v16, axis=1)
    norms = np.linalg.norm(v16, axis=1)
    say(lines, f"fp32 vs bf16 chunk vectors: max |1 - cosine| {np.max(np.abs(1 - cosine)):.2e} (mean {np.mean(np.abs(1 - cosine)):.2e}), "
               f"max abs element difference {np.max(np.abs(v32 - v16)):.2e}; bf16 vectors {v16.dtype}, norms "
               f"{norms.min():.6f}-{norms.max():.6f}.")
    old = results["fp32, by characters"]["vectors"]
    say(lines, f"fp32 by tokens vs fp32 by characters: max |1 - cosine| {np.max(np.abs(1 - np.sum(old * v32, axis=1))):.2e} (padding only).")
    say(lines)

    q32 = fp32.embed(queries, input_type="query")
    q16 = bf16.embed(queries, input_type="query")
    quality = {
        "fp32": pass_at(v32, q32, refs, golden),
        "bf16": pass_at(v16, q16, refs, golden),
        "bf16 queries, fp32 chunks": pass_at(v32, q16, refs, golden),
    }
    say(lines, "| vector retrieval | " + " | ".join(f"Pass@{k}" for k in KS) + " |")
    say(lines, "|---|" + "---:|" * len(KS))
    for name, values in quality.items():
        say(lines, f"| {name} | " + " | ".join(f"{values[k]:.2f}" for k in KS) + " |")
    say(lines)
    say(lines, f"Pass@10 bf16 - fp32: {quality['bf16'][10] - quality['fp32'][10]:+.2f} points.")

    if args.explore:
        say(lines)
        say(lines, "Exploration, bf16 (alternating):")
        say(lines)

        def with_threads(count: int, embedder: LocalEmbedder) -> Callable[[], tuple[np.ndarray, float, float]]:
            def run() -> tuple[np.ndarray, float, float]:
                previous = torch.get_num_threads()
                torch.set_num_threads(count)
                try:
                    return timed_embedding(texts, embedder, spec)
                finally:
                    torch.set_num_threads(previous)
            return run

        default_threads = torch.get_num_threads()
        explore = {
            f"bf16 batch {size}": with_threads(default_threads, LocalEmbedder(spec, precision="bf16", batch_size=size))
            for size in (16, 32, 64)
        }
        if default_threads != 1:
            explore["bf16 batch 32, 1 thread"] = with_threads(1, bf16)
        found = alternate(explore, args.rounds, lines)
        say(lines)
        say(lines, "| variant | chunks/s (best round) | chunks/s (mean of rounds) | CPU s (least) |")
        say(lines, "|---|---:|---:|---:|")
        for name, result in found.items():
            mean_rate = float(np.mean([len(texts) / wall for wall in result["wall"]]))
            say(lines, f"| {name} | {len(texts) / min(result['wall']):.1f} | {mean_rate:.1f} | {min(result['cpu']):.1f} |")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"\nwritten to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
