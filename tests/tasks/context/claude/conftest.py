"""Claude tests run the real ``anthropic`` client against the local simulator (test equipment, not the API)."""

from __future__ import annotations

import pytest


@pytest.fixture
def simulator(anthropic_simulator):  # type: ignore[no-untyped-def]
    return anthropic_simulator
