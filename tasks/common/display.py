"""What people read: figures rounded to what a reader uses. Machine outputs (``--json``, stored results) keep full
precision: they do not come through here."""

from __future__ import annotations

from typing import Any, Iterable


def figure(value: object, name: str = "") -> str:
    """``value`` as people read it; ``name`` (a metric, column or report key) says what it measures. Seconds (a
    name with "seconds"): one decimal, whole from 100 s. Dollars (a name with "usd" or "cost"): four decimals (a
    call costs fractions of a cent). Any other float (metrics, shares): three decimals. Anything else: ``str``."""
    if not isinstance(value, float):
        return str(value)
    lowered = name.lower()
    if "seconds" in lowered:
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"
    if "usd" in lowered or "cost" in lowered:
        return f"{value:.4f}"
    return f"{value:.3f}"


def readable_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Table rows (a Prefect table artifact's, the CLI's) with every value through ``figure``, named by its column,
    or by the row's ``item`` for (item, value) rows."""
    return [
        {column: figure(value, str(row.get("item", column)) if column == "value" else column) for column, value in row.items()}
        for row in rows
    ]
