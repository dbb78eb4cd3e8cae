"""Process defaults: telemetry off and offline before Prefect is imported; the user's own settings win."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a new process that imports Prefect, per test

SNAPSHOT = (
    "import json, os, sys; import ctxrag.flows; import prefect; "
    "print(json.dumps({k: os.environ.get(k) for k in ['DO_NOT_TRACK', 'PREFECT_SERVER_ANALYTICS_ENABLED', "
    "'HF_HUB_OFFLINE', 'PREFECT_HOME']}))"
)


def environment_after_import(tmp_path: Path, **overrides: str) -> dict[str, str | None]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PREFECT_", "CTXRAG_", "HF_", "DO_NOT"))}
    env.update({"HOME": str(tmp_path), "CTXRAG_HOME": str(tmp_path / "work"), **overrides})
    result = subprocess.run([sys.executable, "-c", SNAPSHOT], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_defaults_are_offline_and_prefect_keeps_its_own_home(tmp_path: Path) -> None:
    seen = environment_after_import(tmp_path)
    assert seen["DO_NOT_TRACK"] == "1"
    assert seen["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert seen["HF_HUB_OFFLINE"] == "1"
    assert seen["PREFECT_HOME"] is None  # Prefect's ~/.prefect: one local server per user, not one per project folder
    assert not (tmp_path / "work").exists()  # importing ctxrag creates nothing in CTXRAG_HOME


def test_the_users_own_settings_win(tmp_path: Path) -> None:
    seen = environment_after_import(tmp_path, DO_NOT_TRACK="0", PREFECT_HOME=str(tmp_path / "mine"))
    assert seen["DO_NOT_TRACK"] == "0"
    assert seen["PREFECT_HOME"] == str(tmp_path / "mine")


