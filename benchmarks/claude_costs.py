"""SIMULATED plan-vs-run table of the Claude contextualization modes over the cookbook's 737-chunk corpus.

    .venv/bin/python benchmarks/claude_costs.py [--models claude-haiku-4-5 ...]

For every mode (per-chunk, per-document, batch, per-document-batch) it prints what ``ctxrag index --plan`` predicts
(prompt tokens counted by the simulator's count_tokens endpoint, output at the plan's stated assumption) beside
what the real ctxrag Claude code (the official ``anthropic`` SDK) then spends against the local Anthropic
*simulator* (tests/equipment/anthropic_simulator.py), never the API: no key exists here. Token counts are the
simulator's (ceil(UTF-8 bytes / 4) per text block + 3 per message), not Claude's tokenizer, so the dollars are
illustrative; what the table shows for real is the shape: calls per mode, how much of the input is read from cache,
which documents fall below the model's minimum cacheable length, and how close the plan comes. It also times the
offline ``ctxrag index --plan`` on the corpus (no key: estimated tokens; a fresh CTXRAG_HOME and PREFECT_HOME).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from common import REPO, RESULTS, SHARED_DATA  # benchmarks/common.py
from ctxrag.storage.ledger import LedgerRow, summarize  # noqa: E402
from ctxrag.tasks.context.claude.batches import BatchState, run_batches  # noqa: E402
from ctxrag.tasks.context.claude.contextualizer import MODES, ClaudeContextualizer, ClaudeSettings  # noqa: E402
from ctxrag.tasks.context.claude.plan import ASSUMED_CONTEXT_TOKENS  # noqa: E402
from ctxrag.tasks.load import load_source  # noqa: E402
from ctxrag.tasks.plan import plan_index_run  # noqa: E402
from ctxrag.tasks.context.claude.pricing import facts_for  # noqa: E402
from tests.equipment.anthropic_simulator import AnthropicSimulator, simulated_token_count  # noqa: E402

COOKBOOK = "737 chunks, Claude 3 Haiku, per-chunk with caching: about $2.85, 61.83% of input tokens read from cache"
COMPARED = ("requests", "input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens", "cost_usd")


def run_mode(mode: str, model: str, corpus) -> dict:  # type: ignore[no-untyped-def]
    rows: list[LedgerRow] = []
    worker = ClaudeContextualizer(ClaudeSettings(model=model, mode=mode, concurrency=4), run_id=mode)
    by_doc: dict[str, list] = {}
    for chunk in corpus.chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    pending = [(document, by_doc[document.doc_id]) for document in corpus.documents]
    if worker.settings.batched:
        home = Path(tempfile.mkdtemp())
        run_batches(worker, pending, lambda saved: None, rows.extend, BatchState(home), poll_seconds=0.01)
    else:
        for document, chunks in pending:
            worker.run(document, chunks, lambda saved: None, rows.extend)
    summary = summarize([asdict(row) for row in rows])
    summary["requests"] = summary["calls"]
    return summary


def time_offline_plan(corpus: Path) -> float:
    """Seconds of ``ctxrag index CORPUS --contextualizer claude --embedder voyage --plan --json``, no key, fresh homes."""
    scratch = Path(tempfile.mkdtemp())
    env = {**os.environ, "CTXRAG_HOME": str(scratch / "home"), "PREFECT_HOME": str(scratch / "prefect")}
    for variable in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "VOYAGE_API_KEY", "PREFECT_API_URL"):
        env.pop(variable, None)
    command = [sys.executable, "-c", "from ctxrag.cli import main; main()", "index", str(corpus), "--contextualizer", "claude",
               "--embedder", "voyage", "--plan", "--json"]
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO, check=True)
    seconds = time.perf_counter() - started
    json.loads(result.stdout)
    if (scratch / "prefect").exists():
        raise RuntimeError("the plan made a Prefect home")
    return seconds


def render(model: str, result: dict) -> str:
    plans, runs = result["plan"], result["run"]
    lines = [
        f"## {model}: plan vs simulated run per mode (SIMULATED)",
        "",
        f"Model priced: `{model}` (prices in `tasks/context/claude/pricing.py`). Corpus: the cookbook's codebase set, 90 documents,",
        "737 chunks. **Every number below comes from the local Anthropic simulator, not the API**: token counts use the",
        "simulator's rule (ceil(UTF-8 bytes / 4) per text block + 3 per message), not Claude's tokenizer. The plan's prompt",
        f"tokens were counted by the simulator's count_tokens endpoint; its output is the stated assumption ({ASSUMED_CONTEXT_TOKENS}",
        "tokens a context). Produced by `benchmarks/claude_costs.py`.",
        "",
        "| mode | | requests | uncached in | cache write | cache read | output | cost $ | cost without caching $ | docs below cache minimum |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        for label, s, below in (("plan", plans[mode], "documents_below_cache_minimum"), ("run", runs[mode], "documents_without_caching")):
            lines.append(
                f"| {mode} | {label} | {s['requests']} | {s['input_tokens']:,} | {s['cache_write_tokens']:,} | {s['cache_read_tokens']:,} | "
                f"{s['output_tokens']:,} | {s['cost_usd']:.3f} | {s['cost_without_cache_usd']:.3f} | {len(s[below])} |"
            )
        gaps = ", ".join(f"{name.replace('_tokens', '').replace('_usd', '')} {result['gap'][mode][name]:+.1%}" for name in COMPARED)
        lines.append(f"| {mode} | plan - run | {gaps} | | | | | | | |")
    per_chunk = runs["per-chunk"]["cost_usd"]
    floor = result["floor_usd"]
    lines += [
        "",
        "Run cost relative to per-chunk (the cookbook's mode) on the simulator: "
        + ", ".join(f"{mode} {runs[mode]['cost_usd'] / per_chunk:.3f}" for mode in MODES) + ".",
        f"Floor of any batched mode that reads each document once and writes the same contexts (the documents' "
        f"{result['document_tokens']:,} tokens as input plus per-chunk's output, at half price): ${floor:.3f}, "
        f"{floor / per_chunk:.3f} of per-chunk.",
        "",
        f"Cookbook (published, real API): {COOKBOOK}. Per-document modes answer up to 20 chunks a request.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["claude-haiku-4-5", "claude-3-haiku-20240307"])
    parser.add_argument("--corpus", type=Path, default=SHARED_DATA / "codebase" / "codebase_chunks.json")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    plan_seconds = [round(time_offline_plan(args.corpus), 2) for _ in range(3)]
    corpus = load_source(args.corpus)
    results: dict[str, dict] = {}
    with AnthropicSimulator() as simulator:
        os.environ["ANTHROPIC_BASE_URL"] = simulator.url
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-simulator-only"
        for model in args.models:
            simulator.reset()
            plan = plan_index_run(str(args.corpus), "bench", Path(tempfile.mkdtemp()), claude=ClaudeSettings(model=model, concurrency=4))
            result = results.setdefault(model, {"plan": plan["modes"], "run": {}, "gap": {}, "token_counts": plan["token_counts"]})
            result["document_tokens"] = sum(simulated_token_count(document.content) for document in corpus.documents)
            for mode in MODES:
                print(f"{model} {mode} ...", file=sys.stderr, flush=True)
                simulator.reset()  # an empty prompt cache per mode, as a first run
                result["run"][mode] = run_mode(mode, model, corpus)
                result["gap"][mode] = {name: plan["modes"][mode][name] / result["run"][mode][name] - 1 for name in COMPARED}
            facts = facts_for(model)
            output = result["run"]["per-chunk"]["output_tokens"]
            result["floor_usd"] = (result["document_tokens"] * facts.input_per_mtok + output * facts.output_per_mtok) / 2e6
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"simulated": True, "offline_plan_seconds": plan_seconds, "assumed_context_tokens": ASSUMED_CONTEXT_TOKENS}
    (args.out / "claude_costs_simulated.json").write_text(json.dumps({**meta, "models": results}, indent=2))
    text = "\n".join(render(model, result) for model, result in results.items())
    text += (f"\n`ctxrag index codebase_chunks.json --contextualizer claude --embedder voyage --plan --json`, offline (no key: "
             f"estimated tokens), fresh homes, 3 runs: {', '.join(f'{s:.2f}' for s in plan_seconds)} s (CLI start included; "
             f"no Prefect home was made).\n")
    (args.out / "claude_costs_simulated.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
