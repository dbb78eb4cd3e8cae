"""Benchmark ctxrag on the cookbook's data (read from ../shared/data): quality, index time, query latency.

    .venv/bin/python benchmarks/run.py [--shared-data PATH] [--out benchmarks/results]

Each run: a fresh CTXRAG_HOME ("cold": nothing cached) and `ctxrag` as a subprocess; query latency in process with
the model loaded. Writes results.json and results.md beside the cookbook's published figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from common import (
    RESULTS,
    SHARED_DATA,
    machine_meta,
    portable_path,
    private_env,
    run_ctxrag,
    search_latency,
    stop_server,
    write_report,
)

PUBLISHED_CODEBASE = {  # Pass@5 / @10 / @20, cookbook (paid APIs: voyage-2, Claude, Cohere)
    "voyage-2 baseline": (80.92, 87.15, 90.06),
    "+ Claude contexts": (88.12, 92.34, 94.29),
    "+ Elasticsearch BM25 hybrid": (86.43, 93.21, 94.99),
    "+ Cohere rerank": (92.15, 95.26, 97.45),
}
PUBLISHED_DOCS = {  # k=3, all 100 questions: precision / recall / F1 / MRR
    "basic": (0.428, 0.659, 0.519, 0.737),
    "summary indexing": (0.453, 0.714, 0.555, 0.773),
    "+ Claude rerank": (0.437, 0.693, 0.536, 0.865),
}


def ctxrag(home: Path, *args: str, extra_env: dict[str, str] | None = None) -> tuple[dict, float]:
    started = time.perf_counter()
    result = run_ctxrag([*args, "--json"], private_env(home, **(extra_env or {})))
    return json.loads(result.stdout), time.perf_counter() - started


def query_latency(home: Path, name: str, queries: list[str]) -> dict[str, float]:
    """p50 in milliseconds per strategy, in process, model loaded and warmed up."""
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.retrieval.search import Searcher, Strategy

    searcher = Searcher(IndexStore(home).open(name))
    searcher.search("warm up", Strategy.HYBRID, 10)
    return {strategy.value: search_latency(searcher, strategy, queries)[0] for strategy in Strategy}


def bench_corpus(label: str, corpus: Path, evalset: Path, queries: list[str]) -> tuple[dict, Path]:
    """The run's figures, and the fresh CTXRAG_HOME it indexed into."""
    home = Path(tempfile.mkdtemp(prefix=f"ctxrag-bench-{label}-"))
    os.environ["CTXRAG_HOME"] = str(home)
    cold, cold_seconds = ctxrag(home, "index", str(corpus), "--name", label)
    warm, warm_seconds = ctxrag(home, "index", str(corpus), "--name", label)
    assert warm["chunks_embedded"] == 0 and warm["status"] == "unchanged", warm
    metrics, eval_seconds = ctxrag(home, "evaluate", str(evalset), "--name", label)
    embed_seconds = cold["seconds"]["embed"]
    from ctxrag.storage.index_store import IndexStore

    precision = IndexStore(home).manifest(label)["config"]["embedder"].get("precision")
    return {
        "precision": precision,
        "corpus": corpus.name,
        "evalset": evalset.name,
        "chunks": cold["chunks"],
        "cold_index_seconds": round(cold_seconds, 1),
        "cold_stage_seconds": cold["seconds"],
        "warm_index_seconds": round(warm_seconds, 1),
        "embedding_chunks_per_second": round(cold["chunks_embedded"] / embed_seconds, 1) if embed_seconds else None,
        "evaluate_seconds": round(eval_seconds, 1),
        "query_p50_ms": query_latency(home, label, queries),
        "metrics": metrics,
        "home": portable_path(home),
    }, home


def bench_elasticsearch_emulator(home: Path, label: str, corpus: Path, evalset: Path, queries: list[str]) -> dict:
    """The same corpus on the Elasticsearch backend, against the noida-db EMULATOR (contexts and vectors cached)."""
    from tests.equipment.es_emulator import _stop, start_emulator

    process, url = start_emulator(Path(tempfile.mkdtemp(prefix="ctxrag-bench-es-")))
    try:
        os.environ["ELASTICSEARCH_URL"] = url
        env = {"ELASTICSEARCH_URL": url}
        report, seconds = ctxrag(
            home, "index", str(corpus), "--name", label, "--backend", "elasticsearch", extra_env=env
        )
        metrics, eval_seconds = ctxrag(home, "evaluate", str(evalset), "--name", label, extra_env=env)
        return {
            "corpus": corpus.name,
            "evalset": evalset.name,
            "chunks": report["chunks"],
            "index_seconds_contexts_and_vectors_cached": round(seconds, 1),
            "publish_seconds": report["seconds"]["publish"],
            "chunks_per_second_into_elasticsearch": round(report["chunks"] / report["seconds"]["publish"], 1),
            "evaluate_seconds": round(eval_seconds, 1),
            "query_p50_ms": query_latency(home, label, queries),
            "metrics": metrics,
        }
    finally:
        _stop(process)
        os.environ.pop("ELASTICSEARCH_URL", None)


def render(results: dict) -> str:
    from ctxrag.tasks.options import IndexOptions
    from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY

    options = IndexOptions()
    lines = [
        "# ctxrag benchmark results",
        "",
        f"Machine: {results['machine']['cpus']} cores ({results['machine']['cpu']}), Python {results['machine']['python']}, "
        f"{results['machine']['date']}. Produced by `benchmarks/run.py`: embedded defaults (the local model reads windows "
        f"of {options.embedding.window_tokens} word pieces, the context cut to {options.embedding.context_tokens}; the default strategy is "
        f"`{DEFAULT_STRATEGY}`; the local model ran in {'/'.join(sorted({str(run.get('precision')) for run in results['runs']}))}, "
        "`auto`'s choice on this machine), no API and no simulator; the last section runs the Elasticsearch backend against the "
        "noida-db emulator." + (f" {results['note']}" if results.get("note") else ""),
        "",
    ]
    for run in results["runs"]:
        metrics = run["metrics"]
        names = list(next(iter(metrics.values())))
        lines += [
            f"## {run['label']}",
            "",
            f"`{run['corpus']}` ({run['chunks']} chunks), questions `{run['evalset']}`.",
            "",
        ]
        lines += ["| strategy | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
        for strategy, values in metrics.items():
            shown = f"**{strategy}** (default)" if strategy == DEFAULT_STRATEGY else strategy
            lines.append(f"| ctxrag {shown} | " + " | ".join(_fmt(name, values[name]) for name in names) + " |")
        published = PUBLISHED_CODEBASE if "pass@10" in names else PUBLISHED_DOCS
        for row, values in published.items():
            lines.append(
                f"| cookbook {row} (published) | "
                + " | ".join(str(value) for value in values)
                + " |"
                + " |" * (len(names) - len(values))
            )
        lines += [
            "",
            f"- cold index (empty CTXRAG_HOME, model load and Prefect start-up included): {run['cold_index_seconds']} s "
            f"(stages: {', '.join(f'{k} {v:.1f} s' for k, v in run['cold_stage_seconds'].items())})",
            f"- warm index (nothing changed, no model loaded): {run['warm_index_seconds']} s",
            f"- embedding: {run['embedding_chunks_per_second']} chunks/s",
            f"- evaluate (all strategies, subprocess): {run['evaluate_seconds']} s",
            "- query p50 in process (ms): " + ", ".join(f"{k} {v}" for k, v in run["query_p50_ms"].items()),
            "",
        ]
    emulator = results.get("elasticsearch_emulator")
    if emulator:
        lines += [
            "## codebase on the Elasticsearch backend (noida-db EMULATOR, not a real cluster)",
            "",
            "Same corpus, contexts and vectors (from the embedded run's cache); Elasticsearch analysis and kNN as the",
            "emulator implements them (int8 HNSW). Pass@k beside the embedded backend's:",
            "",
            "| strategy | pass@5 | pass@10 | pass@20 | embedded pass@10 | difference (points) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        embedded = results["runs"][0]["metrics"]
        for strategy, values in emulator["metrics"].items():
            delta = 100 * (values["pass@10"] - embedded[strategy]["pass@10"])
            lines.append(
                f"| {strategy} | {values['pass@5'] * 100:.2f} | {values['pass@10'] * 100:.2f} | {values['pass@20'] * 100:.2f} | "
                f"{embedded[strategy]['pass@10'] * 100:.2f} | {delta:+.2f} |"
            )
        lines += [
            "",
            f"- index into the emulator (contexts and vectors cached): {emulator['index_seconds_contexts_and_vectors_cached']} s; "
            f"bulk + refresh + alias switch {emulator['publish_seconds']:.1f} s = {emulator['chunks_per_second_into_elasticsearch']} chunks/s",
            f"- evaluate (all strategies, subprocess): {emulator['evaluate_seconds']} s",
            "- query p50 in process against the emulator (ms): "
            + ", ".join(f"{k} {v}" for k, v in emulator["query_p50_ms"].items()),
            "",
        ]
    return "\n".join(lines)


def _fmt(name: str, value: float) -> str:
    return f"{value * 100:.2f}" if name.startswith("pass@") else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    data = args.shared_data
    started_load = os.getloadavg()[0]
    codebase_queries = [
        json.loads(line)["query"]
        for line in (data / "codebase" / "evaluation_set.jsonl").read_text().splitlines()
        if line.strip()
    ]
    docs_queries = [
        item["question"] for item in json.loads((data / "anthropic_docs" / "docs_evaluation_sample.json").read_text())
    ]
    runs, homes = [], []
    docs = data / "anthropic_docs"
    runs_of = [
        (
            "codebase",
            data / "codebase" / "codebase_chunks.json",
            data / "codebase" / "evaluation_set.jsonl",
            codebase_queries,
        ),
        (
            "docs-summaries",
            docs / "anthropic_summary_indexed_docs.json",
            docs / "docs_evaluation_sample.json",
            docs_queries,
        ),
        ("docs-plain", docs / "anthropic_docs.json", docs / "docs_evaluation_sample.json", docs_queries),
    ]
    for label, corpus, evalset, queries in runs_of:
        print(f"benchmarking {label} ...", file=sys.stderr, flush=True)
        record, home = bench_corpus(label, corpus, evalset, queries)
        runs.append({"label": label, **record})
        homes.append(home)
    print("benchmarking codebase on the Elasticsearch backend (noida-db emulator) ...", file=sys.stderr, flush=True)
    emulator = bench_elasticsearch_emulator(homes[0], "codebase-es", *runs_of[0][1:])
    for home in homes:  # each fresh CTXRAG_HOME (with its own PREFECT_HOME) started a local Prefect server: stop it
        stop_server(private_env(home))
    load = f"{started_load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    results = {
        "machine": machine_meta(),
        "runs": runs,
        "elasticsearch_emulator": emulator,
        "note": f"Load average (1 min) {load}: timings on a busy machine are slower than on an idle one.",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    write_report(args.out / "results.md", render(results))


if __name__ == "__main__":
    main()
