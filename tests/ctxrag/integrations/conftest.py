"""The sample corpus indexed once for the framework retrievers' tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import index_as_sample


@pytest.fixture(scope="package")
def sample_home(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> Path:  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("integrations") / "home"
    index_as_sample(home)
    return home


@pytest.fixture
def home(sample_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CTXRAG_HOME", str(sample_home))
    return sample_home
