"""Offline-first process defaults, applied before Prefect or Hugging Face libraries are imported.

Import this module first (``flows`` and the CLI do). A value the user has already set always wins.
"""

from __future__ import annotations

import os
from pathlib import Path

OFFLINE_DEFAULTS: dict[str, str] = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def ctxrag_home() -> Path:
    """Where indexes and artifacts live: ``$CTXRAG_HOME``, default ``./.ctxrag``."""
    return Path(os.environ.get("CTXRAG_HOME") or ".ctxrag").resolve()


def cache_dir() -> Path:
    """Files ctxrag derives once per machine and shares between every CTXRAG_HOME: ``$CTXRAG_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ctxrag``, else ``~/.cache/ctxrag``. Anything in it can be deleted: it is made again."""
    if os.environ.get("CTXRAG_CACHE_DIR"):
        return Path(os.environ["CTXRAG_CACHE_DIR"]).expanduser().resolve()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ctxrag"


def models_dir() -> Path:
    """Where derived model files (the ONNX export for queries) are kept: ``$CTXRAG_MODELS_DIR``, else
    ``cache_dir()/models``."""
    if os.environ.get("CTXRAG_MODELS_DIR"):
        return Path(os.environ["CTXRAG_MODELS_DIR"]).expanduser().resolve()
    return cache_dir() / "models"


def apply_offline_defaults() -> None:
    """Set telemetry-off / offline variables; a value the user set wins. PREFECT_HOME is Prefect's own (``~/.prefect``
    unless set), so every ctxrag home of a user shares one local Prefect server and its run history."""
    for name, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(name, value)


apply_offline_defaults()
