"""Optional features and the extra that installs each (pyproject.toml's optional dependencies).

``require`` imports a feature's module and, where its extra is not installed, raises ``MissingExtra``: one line naming
the feature and the command that installs it (the CLI prints it, exit code 2).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ctxrag.storage.errors import InvalidInput


class MissingExtra(InvalidInput, ImportError):
    """A feature whose extra is not installed; the message names the command that installs it."""


def install_command(extra: str) -> str:
    """The command that installs ``extra`` into the environment ctxrag runs in."""
    return f"pip install 'ctxrag[{extra}]'"


def require(module: str, extra: str, feature: str) -> ModuleType:
    """``module``, imported; ``MissingExtra`` naming ``feature`` and ``extra``'s install command if it is not installed."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:  # the module, or a library it needs, is not installed
        missing = (error.name or module).split(".")[0]
        raise MissingExtra(f"{feature} needs {missing}: {install_command(extra)}") from None
