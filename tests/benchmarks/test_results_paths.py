"""No committed benchmark result carries a path of the machine it ran on (benchmarks/common.py names them)."""

from __future__ import annotations

import re

import pytest

from tests.helpers import BENCHMARKS

# An absolute path of a machine: a well-known root folder, or any /-rooted path down to installed packages.
MACHINE_PATH = re.compile(
    r"(?<![\w.~$/-])/(?:work|tmp|root|home|Users|var|private|opt|usr|mnt|srv)/"
    r"|(?<![\w.~$/-])/[^\s\"'`]*?/(?:site|dist)-packages\b"
)
RESULTS = sorted(path for path in (BENCHMARKS / "results").rglob("*") if path.is_file())


@pytest.mark.parametrize("path", RESULTS, ids=lambda path: path.name)
def test_result_file_has_no_machine_path(path) -> None:  # type: ignore[no-untyped-def]
    found = [
        f"line {number}: {match.group()}"
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        for match in MACHINE_PATH.finditer(line)
    ]
    assert found == []


def test_the_check_sees_what_it_checks() -> None:
    assert len(RESULTS) > 10 and any(path.name == "scale.json" for path in RESULTS)
    for bad in (
        "/work/main/data/sample/corpus",
        '"/tmp/ctxrag-head"',
        "`/root/x`",
        "in /home/u/y",
        "/srv/app/.venv/lib/python3.11/site-packages/torch",
    ):
        assert MACHINE_PATH.search(bad), bad
    for fine in (
        "data/sample/corpus",
        "../shared/data/codebase",
        "site-packages/torch/_inductor",
        "$TMPDIR/ctxrag-head",
        "generated: synthetic-2000.json",
        "--app-dir site-packages",
        "5 MB/s",
        ".venv/lib/python3.11/site-packages/x",
    ):
        assert not MACHINE_PATH.search(fine), fine
