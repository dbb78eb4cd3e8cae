"""``ctxrag.flows``, ``ctxrag.tasks`` and ``ctxrag.storage`` in a source checkout, installed or not.

The repository keeps the layers ``flows/``, ``tasks/`` and ``storage/`` at its top level, beside ``ctxrag/``; a
wheel installs them inside the package (pyproject.toml's ``package-dir``). In a checkout, a finder answers for
those three names from the folders beside the ``ctxrag`` that was imported, so the checkout runs with no install
(``python -c "from ctxrag.cli import main; main()"`` from the repository) and never mixes in the layers of another
checkout an environment's editable install points to. An installed package has its layers inside: nothing is added.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Sequence

PACKAGE = "ctxrag"
LAYERS = ("flows", "tasks", "storage")


class CheckoutLayers(importlib.abc.MetaPathFinder):
    """Finds ``ctxrag.<layer>`` in ``root/<layer>``; its modules are then found through the layer's ``__path__``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> ModuleSpec | None:
        package, _, layer = fullname.partition(".")
        if package != PACKAGE or layer not in LAYERS:
            return None
        folder = self.root / layer
        return importlib.util.spec_from_file_location(fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


def checkout_root(package_dir: Path) -> Path | None:
    """The checkout ``package_dir`` (the ``ctxrag`` folder) lies in, or None for an installed package."""
    root = package_dir.parent
    if any((package_dir / layer).is_dir() for layer in LAYERS) or not (root / "pyproject.toml").is_file():
        return None
    return root if all((root / layer / "__init__.py").is_file() for layer in LAYERS) else None


def find_layers_in_checkout(package_dir: Path) -> None:
    """Put a ``CheckoutLayers`` finder first on ``sys.meta_path`` when ``package_dir`` is in a checkout (once)."""
    root = checkout_root(package_dir)
    if root is not None and not any(isinstance(finder, CheckoutLayers) and finder.root == root for finder in sys.meta_path):
        sys.meta_path.insert(0, CheckoutLayers(root))
