"""What ctxrag installs: one top-level package, ``ctxrag``, holding its layers (``ctxrag.flows``, ``ctxrag.tasks``,
``ctxrag.storage``), so a user's own ``tasks.py``, ``storage/`` or ``flows/`` first on ``sys.path`` breaks nothing:
the built wheel, the installed layout (as Prefect loads a flow file by path), the command and the Python API run from
such a folder. ``ctxrag deploy`` from such a folder: tests/flows/test_prefect_server.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO, SHADOWING_MODULES, shadowing_folder

pytestmark = pytest.mark.slow  # the wheel build, installs, new processes

FOLDERS = {
    "ctxrag": "ctxrag",
    "flows": "ctxrag/flows",
    "tasks": "ctxrag/tasks",
    "storage": "ctxrag/storage",
}  # repo -> wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from a copy of the sources (the checkout gets no build/ or egg-info)."""
    pytest.importorskip("setuptools", reason="--no-build-isolation builds with this environment's setuptools")
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, source / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-q",
        "-w",
        str(tmp / "dist"),
        str(source),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = (tmp / "dist").glob("ctxrag-*.whl")
    return built


def test_the_wheel_holds_only_ctxrag_at_its_top(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "ctxrag/py.typed" in names  # PEP 561: type checkers read the API's annotations
    dist_info = next(name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA"))
    assert {name.split("/")[0] for name in names} == {"ctxrag", dist_info}
    top_level = f"{dist_info}/top_level.txt"
    if top_level in names:
        assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["ctxrag"]


def test_the_wheel_holds_every_module_under_ctxrag(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"{inside}/{path.relative_to(REPO / folder).as_posix()}"
        for folder, inside in FOLDERS.items()
        for path in (REPO / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert len(expected) > 90 and sorted(expected - names) == []  # a layer the build does not follow shows here


def test_the_layers_are_links_inside_the_package_and_no_import_finder_is_ours() -> None:
    """One packaging mechanism: ``ctxrag/flows`` -> ``../flows`` (and tasks, storage) make ``ctxrag`` an ordinary
    package for setuptools, editable installs, editors and mypy; nothing of ours hooks the import system."""
    for layer in ("flows", "tasks", "storage"):
        assert (REPO / "ctxrag" / layer).is_symlink() and os.readlink(REPO / "ctxrag" / layer) == f"../{layer}"
    ours = [path for folder in FOLDERS for path in (REPO / folder).rglob("*.py") if "__pycache__" not in path.parts]
    assert not [
        path for path in ours if "MetaPathFinder" in path.read_text() or "sys.meta_path.insert" in path.read_text()
    ]


def test_installed_ctxrag_imports_its_layers_from_inside_and_prefect_loads_its_flow_files(
    wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    shadowing_folder(tmp_path / "user")
    code = (
        "import json, sys; from prefect.flows import load_flow_from_entrypoint; import ctxrag.tasks.retrieval.search as search; "
        f"flow = load_flow_from_entrypoint({str(site / 'ctxrag' / 'flows' / 'index.py')!r} + ':index_corpus'); "
        "print(json.dumps({'search': search.__file__, 'flow': flow.name, 'finders': [type(f).__name__ for f in sys.meta_path]}))"
    )
    # -S: no site-packages .pth files, so neither this checkout's editable finder nor any other path is added; the
    # dependencies come from this environment's site-packages, the user's folder comes first
    paths = os.pathsep.join([str(tmp_path / "user"), str(site), sysconfig.get_paths()["purelib"]])
    env = {**os.environ, "PYTHONPATH": paths}
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path / "user", timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["search"] == str(site / "ctxrag" / "tasks" / "retrieval" / "search.py")
    assert seen["flow"] == "ctxrag-index" and "CheckoutLayers" not in seen["finders"]


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> tuple[Path, dict[str, str]]:  # type: ignore[no-untyped-def]
    """A user's folder with its own tasks.py, storage/ and flows/, first on sys.path of every process started there."""
    from prefect.settings import PREFECT_API_URL

    folder = shadowing_folder(tmp_path_factory.mktemp("user-project"))
    # The user's folder first; then this checkout, whose ctxrag is the one tested (the virtualenv's editable install may
    # name another checkout of the project).
    python_path = os.pathsep.join([str(folder), str(REPO)])
    env = {
        **os.environ,
        "PYTHONPATH": python_path,
        "CTXRAG_HOME": str(folder / ".ctxrag-home"),
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
    }
    for variable in ("CO_API_KEY", "COHERE_API_KEY", "ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        env.pop(variable, None)
    return folder, env


def python(user_folder: tuple[Path, dict[str, str]], code: str, *args: str) -> subprocess.CompletedProcess[str]:
    folder, env = user_folder
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=folder, timeout=300
    )


def test_the_user_folder_does_shadow_generic_names(user_folder: tuple[Path, dict[str, str]]) -> None:
    for name in SHADOWING_MODULES:
        module = name.removesuffix("/__init__.py").removesuffix(".py")
        result = python(user_folder, f"import {module}")
        assert result.returncode == 1 and f"the user's own {name} was imported" in result.stderr


def test_the_command_indexes_and_searches_from_the_user_folder(user_folder: tuple[Path, dict[str, str]]) -> None:
    command = "from ctxrag.cli import main; main()"
    indexed = python(user_folder, command, "index", "data/sample/corpus", "--name", "shadow")
    assert indexed.returncode == 0, indexed.stderr[-3000:]
    assert "published" in indexed.stdout
    found = python(user_folder, command, "search", "retry backoff delay", "--name", "shadow", "-k", "3", "--json")
    assert found.returncode == 0, found.stderr[-3000:]
    assert [hit["rank"] for hit in json.loads(found.stdout)["hits"]] == [1, 2, 3]


def test_the_python_api_works_from_the_user_folder(user_folder: tuple[Path, dict[str, str]]) -> None:
    code = (
        "import json, ctxrag; report = ctxrag.index('data/sample/corpus', name='api'); "
        "hits = ctxrag.search('retry backoff delay', name='api', k=3); "
        "result = ctxrag.evaluate('data/sample/questions.jsonl', name='api', k=5, strategy='bm25'); "
        "print(json.dumps({'status': report.status, 'hits': [hit.chunk_id for hit in hits], 'metrics': result.metrics}))"
    )
    result = python(user_folder, code)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["status"] == "published" and len(seen["hits"]) == 3 and set(seen["metrics"]) == {"bm25"}
