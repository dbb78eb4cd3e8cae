"""Fixtures of the flow tests only: one real Prefect server (test equipment) per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.equipment.prefect_server import PrefectServer, ServerDidNotStart, running_prefect_server


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[PrefectServer]:
    """One real Prefect server (UI on) for the session; skipped, with the reason, if it cannot start in 90 s."""
    try:
        with running_prefect_server(ui=True) as server:
            yield server
    except ServerDidNotStart as error:
        pytest.skip(f"no Prefect server for this test: {error}")
