"""API keys: resolved from the environment or a Prefect Secret block, and kept out of every log, file and error."""

from __future__ import annotations

import os
import re
import threading

from ctxrag.storage.errors import UserError

_KNOWN: set[str] = set()
_lock = threading.Lock()
_KEY_SHAPES = re.compile(r"(sk-ant-[A-Za-z0-9_\-]{6,}|pa-[A-Za-z0-9_\-]{20,}|Bearer\s+[A-Za-z0-9_\-\.]{8,})")


class MissingKey(UserError, RuntimeError):
    """A paid provider was asked for but no key is configured."""


def resolve_key(env_var: str, secret_block: str) -> str:
    """The key from ``env_var``, else from the Prefect Secret block ``secret_block``; registered for redaction."""
    value = os.environ.get(env_var, "").strip()
    if not value:
        value = _from_secret_block(secret_block)
    if not value:
        raise MissingKey(f"set {env_var} or create the Prefect Secret block {secret_block!r}")
    remember(value)
    return value


def remember(secret: str) -> None:
    if secret:
        with _lock:
            _KNOWN.add(secret)


def redact(text: str) -> str:
    """``text`` with every known secret, and anything shaped like an API key, replaced by ``***``."""
    with _lock:
        secrets = sorted(_KNOWN, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, "***")
    return _KEY_SHAPES.sub("***", text)


def _from_secret_block(name: str) -> str:
    """Only where a Prefect API is already at hand (a server URL, or inside a run): never start one just to look."""
    try:
        from prefect.context import FlowRunContext, TaskRunContext

        if not (os.environ.get("PREFECT_API_URL") or FlowRunContext.get() or TaskRunContext.get()):
            return ""
        from prefect.blocks.system import Secret

        return str(Secret.load(name, _sync=True).get()).strip()  # type: ignore[call-arg, union-attr]  # sync_compatible's own switch
    except Exception:
        return ""
