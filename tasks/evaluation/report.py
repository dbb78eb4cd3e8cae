"""Evaluation outputs: the run folder (frozen config, metrics and per-query Parquet), an SVG chart, Prefect artifacts."""

from __future__ import annotations

import base64
import json
from html import escape
from pathlib import Path

import pyarrow as pa

from ctxrag.storage.artifacts import write_parquet_atomic
from ctxrag.storage.environment import private_dirs


def metrics_rows(metrics: dict[str, dict[str, float]]) -> list[dict[str, object]]:
    """One row per strategy: ``{"strategy": ..., "pass@5": ...}``."""
    return [{"strategy": strategy, **values} for strategy, values in metrics.items()]


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def write_chart(metrics: dict[str, dict[str, float]], path: Path, title: str) -> Path:
    """Grouped bars as SVG: one group per metric, one bar per strategy (0 to 1), a legend on the right. Plain SVG
    text: no plotting library (matplotlib's import and draw were a second of every evaluate command)."""
    strategies = list(metrics)
    names = list(dict.fromkeys(name for values in metrics.values() for name in values))
    group, bar, top, plot_h, left = 28 + 14 * len(strategies), 14, 40, 240, 40
    width = left + group * len(names) + 200
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + plot_h + 40}" font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="22" font-size="14">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + group * len(names)}" y2="{top + plot_h}" stroke="#333"/>',
    ]
    for tick in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - tick)
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}</text>')
    for column, name in enumerate(names):
        x0 = left + column * group + 14
        for row, strategy in enumerate(strategies):
            value = min(max(metrics[strategy].get(name, 0.0), 0.0), 1.0)
            parts.append(
                f'<rect x="{x0 + row * bar}" y="{top + plot_h * (1 - value):.1f}" width="{bar - 2}" '
                f'height="{plot_h * value:.1f}" fill="{PALETTE[row % len(PALETTE)]}"><title>{escape(strategy)} '
                f"{escape(name)}: {value:.3f}</title></rect>"
            )
        parts.append(
            f'<text x="{x0 + bar * len(strategies) / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{escape(name)}</text>'
        )
    for row, strategy in enumerate(strategies):
        x, y = left + group * len(names) + 16, top + row * 18
        parts.append(
            f'<rect x="{x}" y="{y}" width="10" height="10" fill="{PALETTE[row % len(PALETTE)]}"/>'
            f'<text x="{x + 16}" y="{y + 10}">{escape(strategy)}</text>'
        )
    private_dirs(path.parent)
    path.write_text("\n".join(parts + ["</svg>"]) + "\n")
    return path


def write_run(
    run_dir: Path, config: dict[str, object], metrics: dict[str, dict[str, float]], per_query: pa.Table
) -> None:
    """Save the evaluation's frozen config beside its results, so every figure can be reproduced.

    ``per_query.parquet`` holds one row per (strategy, query) with its golden and ranked chunk references and its
    metrics; ``ctxrag.tasks.evaluation.results.load_run`` reads it back as a pandas DataFrame.
    """
    private_dirs(run_dir)
    (run_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    write_parquet_atomic(pa.Table.from_pylist(metrics_rows(metrics)), run_dir / "metrics.parquet")
    write_parquet_atomic(per_query, run_dir / "per_query.parquet")


def chart_markdown(chart: Path, title: str, run_dir: Path) -> str:
    """Markdown for the Prefect UI: the chart inline (a data URI, so no file server is needed) and where results are."""
    encoded = base64.b64encode(chart.read_bytes()).decode("ascii")
    return f"### {title}\n\n![metrics chart](data:image/svg+xml;base64,{encoded})\n\nPer-query results and config: `{run_dir}`"
