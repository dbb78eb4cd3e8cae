"""A bounded cache keeps its latest entries."""

from __future__ import annotations

from ctxrag.tasks.common.bounded import keep


def test_the_oldest_entries_go_past_the_bound_and_a_kept_key_is_replaced_in_place() -> None:
    kept: dict[str, int] = {}
    for number in range(5):
        keep(kept, f"k{number}", number, 3)
    assert kept == {"k2": 2, "k3": 3, "k4": 4}
    keep(kept, "k3", 30, 3)  # an existing key: its value changes, nothing is dropped
    assert list(kept.items()) == [("k2", 2), ("k3", 30), ("k4", 4)]
