"""``ctxrag index --plan``: the plan (``ctxrag.tasks.cost_plan``) printed as tables, or as one JSON object with ``--json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ctxrag.storage.environment import ctxrag_home
from ctxrag.tasks.options import IndexOptions

SHOWN_DOCUMENTS = 5  # --json lists them all


def show_plan(out: Console, err: Console, source: str, name: str, options: IndexOptions, as_json: bool) -> None:
    """Plan the run (no Prefect, no paid call) and print it."""
    from ctxrag.tasks.cost_plan import plan_costs

    files = options.files
    plan = plan_costs(
        source,
        name,
        Path(ctxrag_home()),
        options.contextualizer,
        options.claude,
        options.embedding.spec(),
        files.include,
        files.exclude,
        files.max_file_bytes,
    )
    if as_json:
        print(json.dumps(plan))
        return
    for warning in plan["warnings"]:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    changes = plan["documents_against_live_index"]
    out.print(
        f"plan for index {name!r}: {plan['documents']} documents, {plan['chunks']} chunks "
        f"(against the live index: {changes['new']} new, {changes['changed']} changed, {changes['unchanged']} unchanged, "
        f"{changes['removed']} removed). Nothing is called or changed.",
        highlight=False,
    )
    if "modes" in plan:
        _claude(out, plan)
    _embedding(out, plan["embedding"])


def _claude(out: Console, plan: dict[str, Any]) -> None:
    prices = plan["prices"]
    table = Table(
        title=f"Claude contextualization, {plan['model']} (${prices['input_per_mtok']:g} in / ${prices['output_per_mtok']:g} out "
        f"per Mtok, prices of {prices['as_of']} in {prices['file']})"
    )
    modes = plan["modes"]
    table.add_column("")
    for mode in modes:
        marks = ("*" if mode == plan["chosen_mode"] else "") + (
            "$" if mode == plan["cheapest_mode"] and modes[mode]["chunks"] else ""
        )
        table.add_column((mode if len(mode) <= 12 else mode.replace("-batch", "-\nbatch")) + marks, justify="right")
    table.add_row("chunks", *(f"{row['chunks']:,}" for row in modes.values()))
    table.add_row("documents", *(f"{row['documents']:,}" for row in modes.values()))
    table.add_row("requests", *(f"{row['requests']:,}" for row in modes.values()))
    for label, name in (
        ("uncached in", "input_tokens"),
        ("cache write", "cache_write_tokens"),
        ("cache read", "cache_read_tokens"),
        ("output", "output_tokens"),
    ):
        table.add_row(label, *(f"{row[name]:,}" for row in modes.values()))
    table.add_row("cost $", *(f"{row['cost_usd']:.4f}" for row in modes.values()))
    table.add_row(
        "wall time",
        *(
            "batch API" if row["wall_time_s"] is None else f"{_duration(row['wall_time_s'])} ({row['wall_time_bound']})"
            for row in modes.values()
        ),
    )
    out.print(table)
    limits, assumed = plan["limits"], plan["assumptions"]
    worst = ", ".join(
        f"{mode} ${row['worst_case_cost_usd']:.4f}" for mode, row in plan["modes"].items() if row["wall_time_s"] is None
    )
    out.print(
        f"* chosen (--claude-mode); $ cheapest. Tokens {plan['token_counts']}; output assumed {assumed['output_tokens_per_context']} tokens a "
        f"context; latency assumed {assumed['latency_per_request']}; limits: --concurrency {limits['concurrency']}, "
        f"--rpm {limits['rpm'] or 'none'}, --tpm {limits['tpm'] or 'none'}. Batch modes: half price, cache reads as call "
        f"by call (best effort on the API; if none hit: {worst}); wall time {assumed['batch_wall_time']}.",
        highlight=False,
    )
    for mode, row in plan["modes"].items():
        if row["chunks_already_contextualized"]:
            out.print(
                f"already stored, not paid again: {row['chunks_already_contextualized']:,} contexts of {mode} "
                f"({row['prompt_version']})",
                highlight=False,
            )
    if plan["nothing_pending"]:
        out.print(
            "nothing to contextualize: every chunk has a stored context for every mode's prompt; cost $0",
            highlight=False,
        )
    below = plan["documents_below_cache_minimum"]
    if below:
        out.print(
            f"{len(below)} documents are below {plan['model']}'s cache minimum ({plan['cache_minimum_tokens']:,} tokens): caching "
            f"does nothing for them: "
            + ", ".join(below[:SHOWN_DOCUMENTS])
            + (", ..." if len(below) > SHOWN_DOCUMENTS else ""),
            highlight=False,
        )


def _embedding(out: Console, part: dict[str, Any]) -> None:
    line = (
        f"embedding ({part['provider']} {part['model']}): {part['texts_to_embed']:,} texts to embed, "
        f"{part['texts_already_embedded']:,} already embedded (not paid again)"
    )
    if "tokens" in part:
        line += (
            f"; {part['tokens']:,} tokens ({part['token_counts']}; {part['texts_with_assumed_context']:,} with an assumed "
            f"context), {part['requests']:,} requests, ${part['cost_usd']:.4f} at ${part['price_per_mtok']:g} per Mtok"
        )
    out.print(line, highlight=False)


def _duration(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 120
        else f"{seconds / 60:.1f} min"
        if seconds < 7200
        else f"{seconds / 3600:.1f} h"
    )
