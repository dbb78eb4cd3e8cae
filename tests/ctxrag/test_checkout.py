"""A source checkout runs installed or not: ``ctxrag.flows``, ``ctxrag.tasks`` and ``ctxrag.storage`` come from the
folders beside the ``ctxrag`` that was imported, never from another checkout an editable install points to."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ctxrag.checkout import LAYERS, checkout_root
from tests.helpers import REPO

WHERE = (
    "import json, ctxrag.flows, ctxrag.tasks.retrieval.search as search, ctxrag.storage.index_store as store; "
    "print(json.dumps([ctxrag.__file__, ctxrag.flows.__file__, search.__file__, store.__file__]))"
)


def where(cwd: Path, *flags: str, **env: str) -> list[str]:
    result = subprocess.run([sys.executable, *flags, "-c", WHERE], capture_output=True, text=True, cwd=cwd, env={**os.environ, **env}, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def copy_checkout(target: Path) -> Path:
    target.mkdir()
    shutil.copy2(REPO / "pyproject.toml", target / "pyproject.toml")
    for folder in ("ctxrag", *LAYERS):
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.mark.slow  # new processes that import ctxrag's layers
def test_an_uninstalled_checkout_imports_its_own_layers() -> None:
    # -S: no site-packages .pth files (no editable install); the dependencies come from site-packages by PYTHONPATH
    found = where(REPO, "-S", PYTHONPATH=sysconfig.get_paths()["purelib"])
    assert found == [str(REPO / "ctxrag" / "__init__.py"), str(REPO / "flows" / "__init__.py"),
                     str(REPO / "tasks" / "retrieval" / "search.py"), str(REPO / "storage" / "index_store.py")]


@pytest.mark.slow  # new processes that import ctxrag's layers
def test_another_checkout_never_mixes_in_this_one_s_layers(tmp_path: Path) -> None:
    other = copy_checkout(tmp_path / "other")  # this environment's editable install still points to REPO
    assert all(path.startswith(str(other) + os.sep) for path in where(other))


def test_an_installed_package_is_left_alone(tmp_path: Path) -> None:
    installed = tmp_path / "site-packages" / "ctxrag"
    for layer in LAYERS:
        (installed / layer).mkdir(parents=True)
    (tmp_path / "site-packages" / "pyproject.toml").write_text("")  # even beside a stray pyproject.toml
    assert checkout_root(installed) is None
    assert checkout_root(REPO / "ctxrag") == REPO
    assert checkout_root(copy_checkout(tmp_path / "bare") / "ctxrag") == tmp_path / "bare"
    (tmp_path / "bare" / "pyproject.toml").unlink()
    assert checkout_root(tmp_path / "bare" / "ctxrag") is None
