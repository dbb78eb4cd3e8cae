"""Claude tests run the real ``anthropic`` client against the local simulator (test equipment, not the API)."""

from __future__ import annotations

import pytest

from tests.simulators.anthropic_simulator import AnthropicSimulator

TEST_KEY = "sk-ant-test-DO-NOT-LEAK-0123456789"


@pytest.fixture
def simulator(monkeypatch: pytest.MonkeyPatch):
    with AnthropicSimulator() as sim:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", sim.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
        yield sim
