"""The evaluate command's metrics table: whole where it fits, one table per metric family where it does not."""

from __future__ import annotations

import io

from rich.console import Console

from ctxrag.tables import metrics_table

METRICS = {
    name: {f"{family}@{k}": 0.5 for family in ("pass", "hit", "ndcg") for k in (5, 10, 20)}
    for name in ("hybrid", "hybrid-doc")
}
NAMES = list(METRICS["hybrid"])


def printed(
    width: int, unavailable: dict[str, str] | None = None, metrics: dict[str, dict[str, float]] = METRICS
) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(metrics_table(console, "2 queries on index 't'", metrics, NAMES, unavailable or {}))
    return console.export_text()


def test_a_wide_terminal_gets_one_table() -> None:
    text = printed(200)
    assert text.count("queries on index") == 1 and "ndcg@20" in text and "…" not in text


def test_a_narrow_terminal_gets_a_table_per_metric_family_and_no_cut_cells() -> None:
    text = printed(64, {"hybrid+rerank-cohere": "needs CO_API_KEY"})
    assert [line.strip() for line in text.splitlines() if "queries on index" in line] == [
        "2 queries on index 't': pass",
        "2 queries on index 't': hit",
        "2 queries on index 't': ndcg",
    ]
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 64
    assert text.count("0.500") == 18 and text.count("needs CO_API_KEY") == 3


def test_metrics_show_three_decimals() -> None:
    """Full precision stays in --json and the saved run; people read three decimals."""
    text = printed(200, metrics={name: {**values, "pass@5": 0.87654321} for name, values in METRICS.items()})
    assert text.count("0.877") == 2 and "0.8765" not in text and "0.5000" not in text
