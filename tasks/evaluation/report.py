"""Evaluation outputs: the run folder (frozen config, metrics and per-query Parquet), a PNG chart, Prefect artifacts."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa

from ctxrag.storage.artifacts import write_parquet_atomic


def metrics_rows(metrics: dict[str, dict[str, float]]) -> list[dict[str, object]]:
    """One row per strategy: ``{"strategy": ..., "pass@5": ...}``."""
    return [{"strategy": strategy, **values} for strategy, values in metrics.items()]


def write_chart(metrics: dict[str, dict[str, float]], path: Path, title: str) -> Path:
    """Grouped bars: one group per metric, one bar per strategy. Drawn on a Figure of its own with the Agg canvas, not
    through pyplot: no global backend or figure registry of the host process is touched, and pyplot's import (half a
    second of an evaluate command) is skipped."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    strategies = list(metrics)
    names = list(dict.fromkeys(name for values in metrics.values() for name in values))
    figure = Figure(figsize=(max(7, 1.6 * len(names) + 3.5), 4))
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    width = 0.8 / max(1, len(strategies))
    for offset, strategy in enumerate(strategies):
        positions = [index + offset * width for index in range(len(names))]
        axes.bar(positions, [metrics[strategy].get(name, 0.0) for name in names], width, label=strategy)
    axes.set_xticks([index + width * (len(strategies) - 1) / 2 for index in range(len(names))], names)
    axes.set_ylim(0, 1)
    axes.set_title(title)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path


def write_run(run_dir: Path, config: dict[str, object], metrics: dict[str, dict[str, float]], per_query: pa.Table) -> None:
    """Save the evaluation's frozen config beside its results, so every figure can be reproduced.

    ``per_query.parquet`` holds one row per (strategy, query) with its golden and ranked chunk references and its
    metrics; ``ctxrag.tasks.evaluation.results.load_run`` reads it back as a pandas DataFrame.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    write_parquet_atomic(pa.Table.from_pylist(metrics_rows(metrics)), run_dir / "metrics.parquet")
    write_parquet_atomic(per_query, run_dir / "per_query.parquet")


def chart_markdown(chart: Path, title: str, run_dir: Path) -> str:
    """Markdown for the Prefect UI: the chart inline (a data URI, so no file server is needed) and where results are."""
    encoded = base64.b64encode(chart.read_bytes()).decode("ascii")
    return f"### {title}\n\n![metrics chart](data:image/png;base64,{encoded})\n\nPer-query results and config: `{run_dir}`"
