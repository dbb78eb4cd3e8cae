"""How the command's own flow runs are made (ctxrag.runs): Prefect's flow-run heartbeats only when the user set them."""

from __future__ import annotations

import pytest
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings

from ctxrag.runs import heartbeats_as_configured


def test_a_run_in_the_command_s_process_sends_no_heartbeats_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    monkeypatch.delenv("PREFECT_RUNNER_HEARTBEAT_FREQUENCY", raising=False)
    assert PREFECT_FLOWS_HEARTBEAT_FREQUENCY.value() == 180  # Prefect's default: the flow engine would start its thread
    with heartbeats_as_configured():
        assert get_current_settings().flows.heartbeat_frequency is None
    assert PREFECT_FLOWS_HEARTBEAT_FREQUENCY.value() == 180


@pytest.mark.parametrize("variable", ["PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY"])
def test_heartbeats_the_user_set_are_kept(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "60")
    with heartbeats_as_configured():
        assert get_current_settings().flows.heartbeat_frequency is not None  # left as Prefect reads it
