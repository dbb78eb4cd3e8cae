"""Process defaults: the ``ctxrag`` command sets telemetry-off / offline variables for itself; importing ctxrag, its
flows or Prefect sets none; the user's own settings win."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxrag.storage.environment import OFFLINE_DEFAULTS, apply_offline_defaults
from tests.helpers import REPO

SNAPSHOT = (
    "import json, os; before = dict(os.environ); import ctxrag.flows, ctxrag.runs, ctxrag.api; import prefect; "
    "print(json.dumps({k: v for k, v in os.environ.items() if before.get(k) != v}))"
)


@pytest.mark.slow  # a new process that imports Prefect
def test_importing_ctxrag_and_its_flows_sets_no_variable_and_creates_nothing(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PREFECT_", "CTXRAG_", "HF_", "DO_NOT", "TOKENIZERS"))
    }
    env.update({"HOME": str(tmp_path), "CTXRAG_HOME": str(tmp_path / "work"), "PYTHONPATH": str(REPO)})
    result = subprocess.run(
        [sys.executable, "-c", SNAPSHOT], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {}
    assert not (tmp_path / "work").exists()  # importing ctxrag creates nothing in CTXRAG_HOME


def test_the_command_sets_its_defaults_and_the_users_own_win(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*OFFLINE_DEFAULTS, "PREFECT_HOME"):
        monkeypatch.setenv(name, "")  # recorded, so the variables the command sets are removed again afterwards
        monkeypatch.delenv(name)
    monkeypatch.setenv("DO_NOT_TRACK", "0")
    import ctxrag.cli as cli

    seen: dict[str, str | None] = {}
    monkeypatch.setattr(
        cli, "app", lambda: seen.update({name: os.environ.get(name) for name in (*OFFLINE_DEFAULTS, "PREFECT_HOME")})
    )
    cli.main()
    assert seen["DO_NOT_TRACK"] == "0"  # the user's
    assert seen["HF_HUB_OFFLINE"] == "1" and seen["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert seen["PREFECT_HOME"] is None  # Prefect's ~/.prefect: one local server per user, not one per project folder
    apply_offline_defaults()
    assert os.environ["DO_NOT_TRACK"] == "0"


def test_private_dirs_and_journals_are_their_users_only_from_creation(tmp_path: Path) -> None:
    import os
    import stat

    from ctxrag.storage.artifacts import RowCache
    from ctxrag.storage.environment import private_dirs

    old = os.umask(0o022)  # a user's usual umask: the modes are ctxrag's own
    try:
        home = private_dirs(tmp_path / "a" / "home")
        RowCache(home, "ledger").append_rows([{"key": "k", "cost": 1.0}])
    finally:
        os.umask(old)
    mode = lambda path: stat.S_IMODE(os.stat(path).st_mode)  # noqa: E731
    assert (
        mode(tmp_path / "a") == mode(home) == mode(home / "artifacts") == mode(home / "artifacts" / "ledger") == 0o700
    )
    assert mode(home / "artifacts" / "ledger" / "journal.jsonl") == 0o600
