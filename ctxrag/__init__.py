"""ctxrag: Contextual Retrieval as a Prefect workflow."""

from pathlib import Path as _Path

from ctxrag.checkout import find_layers_in_checkout as _find_layers_in_checkout

__version__ = "0.1.0"

_find_layers_in_checkout(_Path(__file__).resolve().parent)
