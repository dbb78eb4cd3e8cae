"""Prefect's temporary server gets its settings without the environment changing."""

from __future__ import annotations

import os

import pytest

from ctxrag.prefect_commands.server_mode import temporary_server_settings


def test_the_temporary_server_s_settings_change_no_variable_and_the_user_s_own_win(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import get_current_settings

    monkeypatch.delenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", raising=False)
    monkeypatch.delenv("PREFECT_SERVER_ANALYTICS_ENABLED", raising=False)
    before = dict(os.environ)
    with temporary_server_settings():
        settings = get_current_settings().server
        assert settings.ephemeral.startup_timeout_seconds == 90 and settings.analytics_enabled is False
        assert dict(os.environ) == before
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "30")  # the user's own
    with temporary_server_settings():
        assert get_current_settings().server.ephemeral.startup_timeout_seconds == 30
