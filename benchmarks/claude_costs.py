"""SIMULATED token and cost table of the Claude contextualization modes over the cookbook's 737-chunk corpus.

    .venv/bin/python benchmarks/claude_costs.py [--model claude-haiku-4-5]

Runs the real ctxrag Claude code (the official ``anthropic`` SDK) against the local Anthropic *simulator*
(tests/equipment/anthropic_simulator.py), never the API: no key exists here. Token counts are the simulator's
(ceil(UTF-8 bytes / 4) per text block + 3 per message), not Claude's tokenizer, so the dollars are illustrative;
what the table shows for real is the shape: calls per mode, how much of the input is read from cache, and which
documents fall below the model's minimum cacheable length.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from common import RESULTS, SHARED_DATA, write_report  # benchmarks/common.py
from ctxrag.storage.ledger import LedgerRow, summarize  # noqa: E402
from ctxrag.tasks.context.claude.batches import BatchState, run_batches  # noqa: E402
from ctxrag.tasks.context.claude.contextualizer import ClaudeContextualizer, ClaudeSettings  # noqa: E402
from ctxrag.tasks.load import load_source  # noqa: E402
from tests.equipment.anthropic_simulator import AnthropicSimulator  # noqa: E402

COOKBOOK = "737 chunks, Claude 3 Haiku, per-chunk with caching: about $2.85, 61.83% of input tokens read from cache"


def run_mode(mode: str, model: str, corpus) -> dict:  # type: ignore[no-untyped-def]
    rows: list[LedgerRow] = []
    worker = ClaudeContextualizer(ClaudeSettings(model=model, mode=mode, concurrency=4), run_id=mode)
    by_doc: dict[str, list] = {}
    for chunk in corpus.chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    pending = [(document, by_doc[document.doc_id]) for document in corpus.documents]
    if mode == "batch":
        home = Path(tempfile.mkdtemp())
        run_batches(worker, pending, lambda saved: None, rows.extend, BatchState(home), poll_seconds=0.01)
    else:
        for document, chunks in pending:
            worker.run(document, chunks, lambda saved: None, rows.extend)
    return summarize([asdict(row) for row in rows])


def render(model: str, results: dict[str, dict]) -> str:
    lines = [
        f"## {model}: tokens and cost per mode (SIMULATED)",
        "",
        f"Model priced: `{model}` (prices in `tasks/context/claude/pricing.py`). Corpus: the cookbook's codebase set, 90 documents,",
        "737 chunks. **Every number below comes from the local Anthropic simulator, not the API**: token counts use the",
        "simulator's rule (ceil(UTF-8 bytes / 4) per text block + 3 per message), not Claude's tokenizer. Produced by",
        "`benchmarks/claude_costs.py`.",
        "",
        "| mode | calls | input | cache write | cache read | output | cache-read share | cost $ | cost without caching $ | docs below cache minimum |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, s in results.items():
        lines.append(
            f"| {mode} | {s['calls']} | {s['input_tokens']:,} | {s['cache_write_tokens']:,} | {s['cache_read_tokens']:,} | "
            f"{s['output_tokens']:,} | {s['cache_read_share']:.1%} | {s['cost_usd']:.3f} | {s['cost_without_cache_usd']:.3f} | "
            f"{len(s['documents_without_caching'])} |"
        )
    lines += ["", f"Cookbook (published, real API): {COOKBOOK}. Per-document mode answers up to 20 chunks a call.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["claude-haiku-4-5", "claude-3-haiku-20240307"])
    parser.add_argument("--corpus", type=Path, default=SHARED_DATA / "codebase" / "codebase_chunks.json")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    corpus = load_source(args.corpus)
    results: dict[str, dict[str, dict]] = {}
    with AnthropicSimulator() as simulator:
        os.environ["ANTHROPIC_BASE_URL"] = simulator.url
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-simulator-only"
        for model in args.models:
            for mode in ("per-chunk", "per-document", "batch"):
                print(f"{model} {mode} ...", file=sys.stderr, flush=True)
                simulator.reset()
                results.setdefault(model, {})[mode] = run_mode(mode, model, corpus)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "claude_costs_simulated.json").write_text(json.dumps({"simulated": True, "models": results}, indent=2))
    write_report(args.out / "claude_costs_simulated.md", "\n".join(render(model, modes) for model, modes in results.items()))


if __name__ == "__main__":
    main()
