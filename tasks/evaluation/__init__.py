"""Evaluation: evaluation sets, metrics, significance, reports, per-query results, end-to-end answers."""
