"""Freed memory goes back to the operating system (ctxrag.tasks.common.memory)."""

from __future__ import annotations

import platform

import pytest

from ctxrag.tasks.common.memory import _malloc_trim, release_freed_memory


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@pytest.mark.skipif(platform.system() != "Linux" or _malloc_trim() is None, reason="needs glibc's malloc_trim (Linux)")
def test_memory_freed_below_a_live_block_is_returned_to_the_os() -> None:
    blocks = [bytearray(60_000) for _ in range(4_000)]  # ~240 MB of heap (below malloc's mmap threshold)
    for block in blocks:
        block[::4096] = b"x" * len(block[::4096])  # touch every page
    keeper = bytearray(60_000)  # still alive above them: malloc cannot simply shrink the heap's top
    del blocks
    before = _rss_bytes()
    release_freed_memory()
    after = _rss_bytes()
    assert before - after > 150 * 2**20, (before, after)
    del keeper
