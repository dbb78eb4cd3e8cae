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
    """Set telemetry-off / offline variables, and a PREFECT_HOME under CTXRAG_HOME unless the user has a Prefect setup of their own."""
    for name, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(name, value)
    user_profile = Path.home() / ".prefect" / "profiles.toml"
    if not (os.environ.get("PREFECT_HOME") or os.environ.get("PREFECT_API_URL") or user_profile.exists()):
        prefect_home = ctxrag_home() / "prefect"
        prefect_home.mkdir(parents=True, exist_ok=True)
        os.environ["PREFECT_HOME"] = str(prefect_home)


apply_offline_defaults()
