"""ctxrag: Contextual Retrieval as a Prefect workflow.

The Python API (``ctxrag.api``), the ``ctxrag`` command's work as functions::

    import ctxrag

    ctxrag.index("data/sample/corpus", name="sample")     # runs the index flow, as `ctxrag index`: an IndexReport
    hits = ctxrag.search("retry backoff", name="sample")   # a SearchAnswer: its hits, [Hit(rank, source, location, ...)]
    sample = ctxrag.open("sample")                         # an Index: loaded once, for many sample.search(...)
    result = ctxrag.evaluate("data/sample/questions.jsonl", name="sample")  # result.metrics, result.run_dir, ...
    ctxrag.tune("sample", "my-questions.jsonl")            # your questions choose the index's strategy

Everything else (``ctxrag.flows``, ``ctxrag.tasks``, ``ctxrag.storage``, ``ctxrag.cli``) is internal.
"""

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ctxrag.api import (
        EvaluateResult,
        Hit,
        Index,
        IndexReport,
        Location,
        SearchAnswer,
        SearchRequest,
        TuneResult,
        UserError,
        evaluate,
        index,
        open,
        search,
        tune,
    )

_API = (
    "EvaluateResult",
    "Hit",
    "Index",
    "IndexReport",
    "Location",
    "SearchAnswer",
    "SearchRequest",
    "TuneResult",
    "UserError",
    "evaluate",
    "index",
    "open",
    "search",
    "tune",
)
__all__ = [name for name in _API if name != "open"]  # a star import must not shadow the builtin open


def __getattr__(name: str) -> object:
    """The API's names, imported on first use: ``import ctxrag`` stays cheap for the command and for workers."""
    if name in _API:
        from ctxrag import api

        return getattr(api, name)
    raise AttributeError(f"module 'ctxrag' has no attribute {name!r}")
