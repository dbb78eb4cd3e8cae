"""Prefect flows of ctxrag: ``index_corpus`` and ``evaluate_index``."""

import ctxrag.storage.environment  # noqa: F401  (offline, telemetry-off defaults before Prefect is imported)
