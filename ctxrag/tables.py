"""The metrics table ``ctxrag evaluate`` prints: one table, or one per metric family where it would not fit."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table

from ctxrag.tasks.common.display import figure


def metrics_table(
    console: Console, title: str, metrics: dict[str, dict[str, float]], names: list[str], unavailable: dict[str, str]
) -> RenderableType:
    """One row per strategy and a column per metric in ``names``; if that is wider than ``console`` (``COLUMNS``
    when set), one such table per metric family (``pass``, ``hit``, ...), so no cell is cut to ``0.9…``."""
    table = _table(title, metrics, names, unavailable)
    if Measurement.get(console, console.options.update(width=10_000), table).maximum <= console.width:
        return table
    families = dict.fromkeys(metric.split("@")[0] for metric in names)
    return Group(
        *(
            _table(
                f"{title}: {family}",
                metrics,
                [metric for metric in names if metric.split("@")[0] == family],
                unavailable,
            )
            for family in families
        )
    )


def _table(title: str, metrics: dict[str, dict[str, float]], names: list[str], unavailable: dict[str, str]) -> Table:
    """Rows that could not run (``unavailable``: row or metric -> why) say why."""
    table = Table(title=title)
    table.add_column("strategy", no_wrap=True)
    for metric in names:
        table.add_column(metric, justify="right")
    for strategy_name, values in metrics.items():
        table.add_row(
            strategy_name,
            *(figure(values[metric], metric) if metric in values else unavailable.get(metric, "-") for metric in names),
        )
    for row_name, reason in unavailable.items():
        if row_name != "accuracy":
            table.add_row(row_name, *([reason] + [""] * (len(names) - 1)))
    return table
