"""The one packer of work into tasks (ctxrag.tasks.common.batching)."""

from __future__ import annotations

from ctxrag.tasks.common.batching import packed


def test_items_are_packed_in_order_up_to_the_size_and_a_large_one_goes_alone() -> None:
    sizes = {"a": 2, "b": 2, "c": 9, "d": 1, "e": 3}
    assert packed(sizes, sizes.__getitem__, 4) == [["a", "b"], ["c"], ["d", "e"]]
    assert packed(["big"], lambda item: 100, 4) == [["big"]]
    assert packed(sizes, sizes.__getitem__, 100) == [list(sizes)]


def test_nothing_to_pack_is_no_batch() -> None:
    assert packed([], len, 4) == []
