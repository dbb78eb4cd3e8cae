"""ctxrag: Contextual Retrieval as a Prefect workflow."""

__version__ = "0.1.0"
