"""Which server a run uses when none is configured: the caller's choice, then CTXRAG_PREFECT_SERVER, then the caller's
default, then the command's; Prefect's temporary server gets its settings without the environment changing."""

from __future__ import annotations

import os

import pytest

from ctxrag.prefect_commands.server_mode import MODE_VARIABLE, server_mode, temporary_server_settings
from ctxrag.storage.errors import UserError


@pytest.mark.parametrize(
    ("chosen", "variable", "default", "ci", "expected"),
    [
        (None, None, None, None, "background"),  # the command's
        (None, None, None, "true", "temporary"),
        (None, None, "temporary", None, "temporary"),  # the Python API's
        (None, "background", "temporary", None, "background"),
        ("temporary", "background", None, None, "temporary"),
        ("Background", None, "temporary", None, "background"),
    ],
)
def test_the_choice_comes_first_then_the_variable_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
    chosen: str | None,
    variable: str | None,
    default: str | None,
    ci: str | None,
    expected: str,
) -> None:
    for name, value in ((MODE_VARIABLE, variable), ("CI", ci)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert server_mode(chosen, default) == expected  # type: ignore[arg-type]


def test_an_unknown_choice_names_where_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "forever")
    with pytest.raises(UserError, match="server='always': expected one of background, temporary"):
        server_mode("always")
    with pytest.raises(UserError, match="CTXRAG_PREFECT_SERVER='forever'"):
        server_mode(None, "temporary")


def test_the_temporary_server_s_settings_change_no_variable_and_the_user_s_own_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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
