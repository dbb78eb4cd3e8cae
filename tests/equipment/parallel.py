"""How pytest-xdist shares the tests out (``-n 3`` in pyproject.toml's addopts; tests/conftest.py installs both).

A unit of work is one test file, so a file's module fixtures (an index built once, the README's checkout) run once,
on one worker; tests marked ``xdist_group("NAME")`` are one unit across their files (``--dist loadgroup`` adds the
name to their node ids). No group is needed for the tests that start a local Prefect server: tests/conftest.py sets
``PREFECT_SERVER_API_PORT=0``, so each takes a free port instead of racing for Prefect's 4200.

The units are handed out heaviest first (by their number of ``slow`` tests, each counted by its marker's ``weight``),
then the many quick files, so a worker that finishes early takes the small ones and all end together. Every worker sorts
the same collection the same way, as xdist requires.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling


def unit_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
    return item.nodeid.split("::", 1)[0]


def slow_weight(item: pytest.Item) -> int:
    """What a test counts for when units are ordered: 0 if not slow, else its ``slow`` marker's ``weight`` (default 1;
    a unit of a few very long tests, such as an install from nothing, says so to start first)."""
    marker = item.get_closest_marker("slow")
    return 0 if marker is None else int(marker.kwargs.get("weight", 1))


def heaviest_units_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items grouped by unit, units by their number of slow tests (most first), otherwise in collection order."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(unit_of(item), []).append(item)
    weight = {unit: sum(slow_weight(item) for item in members) for unit, members in units.items()}
    order = sorted(units, key=lambda unit: -weight[unit])  # stable: ties keep collection order
    return [item for unit in order for item in units[unit]]


class FileScheduling(LoadScopeScheduling):
    """xdist's loadscope with a file (or an ``xdist_group``) as the scope, in the order the workers collected."""

    def __init__(self, config: pytest.Config, log=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, log)
        config.option.loadscopereorder = False  # keep heaviest_units_first's order, not xdist's count of tests

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # "@group", added by --dist loadgroup (a parameter may hold "@")
            return nodeid.rsplit("@", 1)[-1]
        return nodeid.split("::", 1)[0]
