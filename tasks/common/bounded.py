"""Bounded in-memory caches: a dict that keeps its latest entries (a long-lived service's memory stays bounded)."""

from __future__ import annotations

from typing import Any


def keep(kept: dict[Any, Any], key: Any, value: Any, most: int) -> None:
    """Add ``key``: ``value`` to ``kept``, dropping its oldest entries past ``most`` (a dict keeps insertion order)."""
    kept[key] = value
    while len(kept) > most:
        del kept[next(iter(kept))]
