"""The services' tests: a copy of the session's sample index (read-only for the tests that share it), and a copy of it
indexed in a home of its own for a test that publishes a new version while a service runs."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers import SAMPLE_CORPUS, copy_home, index_as_sample

CTXRAG = [sys.executable, "-c", "from ctxrag.cli import main; main()"]  # the command, run from this checkout


@pytest.fixture(scope="package")
def sample_home(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Path:
    """A copy of the session's sample index, for the package's tests on this worker."""
    return copy_home(sample_index, tmp_path_factory.mktemp("services") / "home")


@pytest.fixture
def changing_home(tmp_path: Path, prefect_harness) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """(home, corpus): a copy of the sample corpus indexed as "sample" in a home of its own, for a test to change."""
    corpus, home = tmp_path / "corpus", tmp_path / "home"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    publish(corpus, home)
    return home, corpus


def publish(corpus: Path, home: Path) -> str:
    """Index ``corpus`` as "sample" in ``home`` (in this process); the version made live."""
    return index_as_sample(home, corpus, contextualizer="none")


def service_env(home: Path) -> dict[str, str]:
    """This process's environment with CTXRAG_HOME = ``home``: what a service subprocess runs with."""
    return {**os.environ, "CTXRAG_HOME": str(home)}
