"""Work packed into tasks: whole items (documents) grouped by their size, the one packer every stage uses."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def packed(items: Iterable[T], size: Callable[[T], int], per_batch: int) -> list[list[T]]:
    """Consecutive items in batches of about ``per_batch`` (each item's ``size``); an item larger than that alone."""
    batches: list[list[T]] = []
    total = 0
    for item in items:
        if not batches or (total and total + size(item) > per_batch):
            batches.append([])
            total = 0
        batches[-1].append(item)
        total += size(item)
    return batches
