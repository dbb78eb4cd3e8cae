"""``ctxrag config``: every setting's effective value and where it came from, secrets hidden; and the check every
command runs first, so a bad CTXRAG_* value is one line naming it (exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ctxrag.cli as cli
from ctxrag.storage.settings import variables
from tests.ctxrag.test_cli_errors import ctxrag, one_error_line


def test_config_shows_each_setting_its_value_and_source_and_hides_the_token(tmp_path: Path) -> None:
    result = ctxrag(
        tmp_path / "home" / ".." / "home",
        "config",
        "--json",
        CTXRAG_SEARCH_TOKEN="a-secret-token-of-24-chars",
        CTXRAG_TASK_WORKERS="2",
        CTXRAG_HOEM="/typo",
    )
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert list(shown["settings"]) == [each.metadata["variable"] for each in variables()]
    rows = shown["settings"]
    assert rows["CTXRAG_HOME"] == {"value": str((tmp_path / "home").resolve()), "source": "environment"}
    assert rows["CTXRAG_TASK_WORKERS"] == {"value": "2", "source": "environment"}
    assert rows["CTXRAG_SEARCH_TOKEN"] == {"value": "(hidden)", "source": "environment"}
    assert rows["CTXRAG_EMBED_PRECISION"] == {"value": "auto", "source": "default"}
    assert rows["CTXRAG_PREFECT_SERVER"]["value"] in ("background", "temporary")  # the command's, as it would choose
    assert "CTXRAG_HOEM" in shown["unknown"] and not set(shown["unknown"]) & set(rows)
    assert "a-secret-token" not in result.stdout + result.stderr


def test_config_as_a_table_names_the_unknown_on_stderr(tmp_path: Path) -> None:
    result = ctxrag(tmp_path, "config", CTXRAG_HOEM="/typo", COLUMNS="200")
    assert result.exit_code == 0, result.stderr
    assert "CTXRAG_HOME" in result.stdout and str(tmp_path.resolve()) in result.stdout
    assert "(not set)" in result.stdout  # e.g. CTXRAG_RERANK
    note = result.stderr.strip()
    assert note.startswith("note: not ctxrag settings (misspelt?): ") and "CTXRAG_HOEM" in note and "\n" not in note


@pytest.mark.parametrize("command", [["config"], ["list"], ["search", "retry"], ["server", "status"]])
def test_a_bad_setting_stops_every_command_with_one_line_naming_it(tmp_path: Path, command: list[str]) -> None:
    line = one_error_line(ctxrag(tmp_path, *command, CTXRAG_TASK_WORKERS="four", CTXRAG_SEARCH_IDLE_MINUTES="-1"))
    assert line.startswith("error: CTXRAG_TASK_WORKERS='four': not a whole number; CTXRAG_SEARCH_IDLE_MINUTES='-1'")


def test_help_needs_no_settings(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["--help"], env={"CTXRAG_TASK_WORKERS": "four"})
    assert result.exit_code == 0 and "config" in result.stdout
