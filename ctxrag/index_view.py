"""What ``ctxrag index`` prints: a run's report as a table (and its paid calls), or one JSON object with ``--json``;
with ``--watch``, each later run as one line (``--json``: one JSON line), and what failed as one ``error:`` line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ctxrag.tasks.common.display import figure

SHOWN_FILES = 3  # a watched change's line names this many changed files (--json: all)


def show_report(out: Console, err: Console, report: dict[str, Any], name: str, as_json: bool) -> None:
    """An index run's report: its warnings on ``err``, then its table and paid calls; or one JSON object."""
    if as_json:
        print(json.dumps(report), flush=True)
        return
    for warning in report["warnings"]:
        warn(err, warning)
    table = Table(title=f"index {name!r}: {report['status']} (version {report['version']})")
    table.add_column("item")
    table.add_column("value", justify="right")
    for key, value in report.items():
        if key not in {"index", "version", "status"} and not isinstance(value, (dict, list, type(None))):
            table.add_row(key.replace("_", " "), figure(value, key))
    table.add_row("warnings", str(len(report["warnings"])))
    table.add_row(
        "seconds", ", ".join(f"{stage} {figure(value, 'seconds')}" for stage, value in report["seconds"].items())
    )
    out.print(table)
    costs = report["contextualizer_calls"]
    if costs["calls"]:
        out.print(
            f"Claude: {costs['calls']} calls ({costs['failed_calls']} failed), {costs['cache_read_share']:.1%} of input "
            f"tokens read from cache, ${figure(costs['cost_usd'], 'cost_usd')} "
            f"(without caching ${figure(costs['cost_without_cache_usd'], 'cost_usd')})",
            highlight=False,
        )
    if report["embedding_calls"]["calls"]:
        spent = report["embedding_calls"]
        out.print(
            f"Voyage: {spent['calls']} requests, {spent['input_tokens']:,} tokens, ${figure(spent['cost_usd'], 'cost_usd')}",
            highlight=False,
        )
    if costs["calls"]:
        if costs["documents_without_caching"]:
            out.print(
                f"caching could not apply (below the model's minimum length) to {len(costs['documents_without_caching'])} documents: "
                + ", ".join(costs["documents_without_caching"][:10]),
                highlight=False,
            )


def warn(err: Console, message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)


class Watching:
    """``ctxrag index --watch``'s output: the first run as ``show_report``, then a line per run."""

    def __init__(self, out: Console, err: Console, source: str, name: str, as_json: bool) -> None:
        self.out, self.err, self.name, self.as_json = out, err, name, as_json
        self.source = Path(source)
        self.runs = 0

    def report(self, report: dict[str, Any]) -> None:
        self.runs += 1
        if self.runs == 1:
            show_report(self.out, self.err, report, self.name, self.as_json)
        elif self.as_json:
            print(json.dumps(report), flush=True)
        else:
            self.change(report)

    def change(self, report: dict[str, Any]) -> None:
        """One line: the time, the changed files, the new version, what was done and paid, the seconds it took (the
        run's warnings about those files first)."""
        changed: list[str] = report["watch"]["files"]
        paths = tuple(f"{self.source / file}:" for file in changed)
        for warning in report["warnings"]:
            if warning.startswith(paths):
                self.err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
        counts = ", ".join(
            f"{report[f'documents_{kind}']} {kind}"
            for kind in ("new", "changed", "removed")
            if report[f"documents_{kind}"]
        )
        files = ", ".join(changed[:SHOWN_FILES]) + (
            f" and {len(changed) - SHOWN_FILES} more" if len(changed) > SHOWN_FILES else ""
        )
        paid = report["contextualizer_calls"]
        cost = f"; Claude: {paid['calls']} calls, ${figure(paid['cost_usd'], 'cost_usd')}" if paid["calls"] else ""
        self.out.print(
            f"{time.strftime('%H:%M:%S')} {files or 'files picked'}: index {report['index']!r} {report['status']}, "
            f"version {report['version']} ({counts or 'no document changed'}; {report['chunks_contextualized']} "
            f"contexts, {report['chunks_embedded']} embedded{cost}) in {report['watch']['seconds']:.1f} s",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )

    def note(self, message: str) -> None:
        self.err.print(message, highlight=False, markup=False, soft_wrap=True)

    def failed(self, message: str) -> None:
        self.err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
