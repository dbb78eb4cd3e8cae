"""Claude tests run the real ``anthropic`` client against the local simulator (test equipment, not the API)."""

from __future__ import annotations

import pytest

from tests.conftest import ANTHROPIC_TEST_KEY as TEST_KEY  # noqa: F401  (used by the tests here)


@pytest.fixture
def simulator(anthropic_simulator):  # type: ignore[no-untyped-def]
    return anthropic_simulator
