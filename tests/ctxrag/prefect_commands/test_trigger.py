"""``ctxrag trigger --watch``: the finished run's table artifacts, printed as people read them."""

from __future__ import annotations

from ctxrag.prefect_commands.trigger import table_lines


def test_watched_tables_show_metrics_to_3_decimals_and_seconds_to_one() -> None:
    metrics = [{"strategy": "hybrid", "pass@5": 0.8571428571428571, "ndcg@10": 1.0}]
    assert table_lines("ctxrag-metrics-docs", metrics) == [
        "ctxrag-metrics-docs:",
        "  strategy=hybrid  pass@5=0.857  ndcg@10=1.000",
    ]
    summary = [
        {"item": "seconds.embed", "value": 12.3456},
        {"item": "chunks", "value": 737},
        {"item": "version", "value": "v2"},
    ]
    assert table_lines("ctxrag-index-docs", summary)[1:] == [
        "  item=seconds.embed  value=12.3",
        "  item=chunks  value=737",
        "  item=version  value=v2",
    ]
