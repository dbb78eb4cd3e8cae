"""Where ctxrag keeps its files, and the ``ctxrag`` command's process defaults.

Importing this module changes nothing. The defaults (telemetry off, Hugging Face offline, tokenizers single-threaded)
are set by the command's entry point only (``ctxrag.cli.main``), for its own process: a program that imports ctxrag
keeps its environment. Offline loading does not depend on them: every model is loaded from an explicit path with
``local_files_only=True``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxrag.storage.settings import settings

PRIVATE_UMASK = 0o077  # the ``ctxrag`` command's: what it creates (homes, stores, the ledger, the server's files) is its user's only
PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600

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
    """Where indexes and artifacts live: ``$CTXRAG_HOME``, default ``./.ctxrag`` (``ctxrag.storage.settings``)."""
    return settings().home


def cache_dir() -> Path:
    """Files ctxrag derives once per machine and shares between every CTXRAG_HOME: ``$CTXRAG_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ctxrag``, else ``~/.cache/ctxrag``. Anything in it can be deleted: it is made again."""
    return settings().cache_dir


def models_dir() -> Path:
    """Where derived model files (the ONNX export for queries) are kept: ``$CTXRAG_MODELS_DIR``, else
    ``cache_dir()/models``."""
    return settings().models_dir


def private_dirs(path: Path) -> Path:
    """Make ``path`` and any missing folder above it, each created with mode 0700 (an existing folder is left as it
    is): a home or store made here is its user's only from the start, whatever the process's umask."""
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR)
        except FileExistsError:  # made meanwhile by another process
            continue
    return path


def apply_private_umask() -> None:
    """The ``ctxrag`` command's umask (077): every file and folder it, its local Prefect server and its served runs
    create is readable by its user only. Called by the command's entry point, never on import."""
    os.umask(PRIVATE_UMASK)


def apply_offline_defaults() -> None:
    """Set the command's telemetry-off / offline variables in this process; a value the user set wins. Called by the
    ``ctxrag`` command's entry point, never on import. PREFECT_HOME is Prefect's own (``~/.prefect`` unless set), so
    every ctxrag home of a user shares one local Prefect server and its run history."""
    for name, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(name, value)
