"""A copy of the session's sample index for the framework retrievers' tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import copy_home


@pytest.fixture(scope="package")
def sample_home(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Path:
    return copy_home(sample_index, tmp_path_factory.mktemp("integrations") / "home")


@pytest.fixture
def home(sample_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CTXRAG_HOME", str(sample_home))
    return sample_home
