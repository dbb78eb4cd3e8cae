"""The README as a newcomer runs it: every fenced code block, as written, in a fresh CTXRAG_HOME; then the examples of
docs/python-api.md the same way, in the same home (each indexes what it searches; ```text blocks, the signatures, are
not code).

Shell blocks (```bash, ```sh, ```shell; in ```console only the ``$ `` lines) run through bash, one script per block,
from a folder that stands for the checkout: the repository's top-level entries linked in, and ``.venv`` linked to
this test's virtualenv, with the folder first on PYTHONPATH (the checkout's code runs, as an editable install of it
would). ```python blocks run with ``.venv/bin/python`` there. The environment is a new user's
(``tests/equipment/local_server.py``: no PREFECT_API_URL, a private PREFECT_HOME, no API keys, no ``ctxrag`` on
PATH until a block activates the virtualenv), so ``ctxrag index`` starts the local Prefect server as it would for
them; it is stopped when the module ends.

What is not run, by one rule (``NOT_RUN``): a step that creates the virtualenv (``python3 -m venv``), installs
(``pip install``) or runs this test suite (``python -m pytest``). A step is one command of a line's ``&&`` chain, so
``python3 -m venv .venv && ... && .venv/bin/ctxrag index data/sample/corpus`` still indexes. The steps the rule
skips are listed in ``EXPECTED_NOT_RUN``: a new command the rule would skip fails a test until someone looks. A
block that needs an API key is marked ``<!-- needs: VARIABLE -->`` on the line before its fence and is skipped with
that reason (the README has none: paid providers are in docs/paid-providers.md). Every other block must be one of
the languages above.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.equipment.local_server import stopped_afterwards, user_env
from tests.helpers import REPO

README = REPO / "README.md"
PYTHON_API = REPO / "docs" / "python-api.md"
MAX_LINES = 150
SHELL = {"bash", "sh", "shell", "console"}
RUNNABLE = SHELL | {"python"}
NOT_CODE = {"text"}  # python-api.md's signatures
FENCE = re.compile(r"^```(\S*)\s*$")
NEEDS = re.compile(r"^<!--\s*needs:\s*(.+?)\s*-->$")
NOT_RUN = re.compile(r"^(python3 -m venv\s|\S*pip install\s|\S*python -m pytest(\s|$))")
EXPECTED_NOT_RUN = [
    "python3 -m venv .venv",
    ".venv/bin/pip install -e .",
    ".venv/bin/pip install -e '.[test]'",
    ".venv/bin/python -m pytest -q",
]
PAID_VARIABLES = ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY", "CO_API_KEY", "COHERE_API_KEY", "ELASTICSEARCH_URL")


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int  # of the opening fence, 1-based
    needs: str | None  # from <!-- needs: ... --> on the line before the fence

    page: str = "README.md"

    @property
    def id(self) -> str:
        return f"{self.language}-line{self.line}"


def readme_blocks(text: str, page: str = "README.md") -> list[Block]:
    blocks, lines = [], text.splitlines()
    start, language = None, ""
    for number, line in enumerate(lines, start=1):
        fence = FENCE.match(line)
        if not fence:
            continue
        if start is None:
            start, language = number, fence.group(1)
            continue
        before = next((lines[i].strip() for i in range(start - 2, -1, -1) if lines[i].strip()), "")
        needs = NEEDS.match(before)
        blocks.append(
            Block(language, "\n".join(lines[start : number - 1]), start, needs.group(1) if needs else None, page)
        )
        start = None
    assert start is None, f"{page}: the code block at line {start} is not closed"
    return blocks


def command_lines(block: Block) -> list[str]:
    """The block's commands: continuation lines joined; in a console block only the ``$ `` lines."""
    joined = re.sub(r"\\\n\s*", "", block.code)
    if block.language == "console":
        return [line[2:] for line in joined.splitlines() if line.startswith("$ ")]
    return joined.splitlines()


def steps(line: str) -> list[str]:
    return [step.strip() for step in line.split(" && ")]


def runnable_lines(block: Block) -> tuple[list[str], list[str]]:
    """(the block's lines with the NOT_RUN steps taken out, the steps taken out)."""
    kept, skipped = [], []
    for line in command_lines(block):
        parts = steps(line)
        skipped += [step for step in parts if NOT_RUN.match(step)]
        left = [step for step in parts if not NOT_RUN.match(step)]
        kept.append(" && ".join(left))
    return kept, skipped


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
API_BLOCKS = readme_blocks(PYTHON_API.read_text(encoding="utf-8"), "docs/python-api.md")


def test_the_readme_is_short_and_every_block_is_run_or_marked() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; at most {MAX_LINES}"
    for block in BLOCKS:
        assert block.language in RUNNABLE or block.needs, (
            f"README.md line {block.line}: a ```{block.language} block is neither run by this test "
            f"({', '.join(sorted(RUNNABLE))}) nor marked <!-- needs: ... -->"
        )


def test_the_python_api_page_s_blocks_are_python_or_text() -> None:
    assert [block for block in API_BLOCKS if block.language == "python"]
    for block in API_BLOCKS:
        assert block.language in {"python"} | NOT_CODE or block.needs, (
            f"docs/python-api.md line {block.line}: a ```{block.language} block is neither run (python) nor ```text"
        )


def test_only_installs_and_the_test_suite_are_not_run() -> None:
    skipped = [step for block in BLOCKS if block.language in SHELL for step in runnable_lines(block)[1]]
    assert skipped == EXPECTED_NOT_RUN, "the README's skipped steps changed: check NOT_RUN and EXPECTED_NOT_RUN"


def test_the_readme_names_the_default_strategy_once() -> None:
    """The default strategy is described in one place (docs/cli.md has its own one place)."""
    from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY

    assert README.read_text(encoding="utf-8").count(f"`{DEFAULT_STRATEGY}`") == 1


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A folder standing for the checkout (``.venv`` = this virtualenv), a new user's environment, and the local
    Prefect server the README's commands start, stopped at the end."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "ctxrag").exists():
        pytest.skip(f"the README runs the virtualenv's ctxrag; {venv / 'bin'} has none")
    base = tmp_path_factory.mktemp("readme")
    folder = base / "checkout"
    folder.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {".venv", ".git", ".ctxrag"}:
            (folder / entry.name).symlink_to(entry)
    (folder / ".venv").symlink_to(venv)
    env = user_env(base / "home", base / "prefect")
    for variable in PAID_VARIABLES:
        env.pop(variable, None)
    env.pop("VIRTUAL_ENV", None)
    env["PYTHONPATH"] = str(
        folder
    )  # this checkout's ctxrag, whichever checkout the virtualenv's editable install names
    path = [
        entry for entry in env.get("PATH", os.defpath).split(os.pathsep) if entry and not Path(entry, "ctxrag").exists()
    ]
    env["PATH"] = os.pathsep.join(path)
    assert shutil.which("ctxrag", path=env["PATH"]) is None
    with stopped_afterwards(base / "prefect"):
        yield folder, env


@pytest.mark.server  # the README's commands start ctxrag's local Prefect server
@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_readme_block_runs_as_written(block: Block, checkout: tuple[Path, dict[str, str]]) -> None:
    run_as_written(block, checkout)


@pytest.mark.server  # index and evaluate run flows on a Prefect server (a temporary one, or the local one if asked)
@pytest.mark.parametrize(
    "block",
    [block for block in API_BLOCKS if block.language not in NOT_CODE],
    ids=[block.id for block in API_BLOCKS if block.language not in NOT_CODE],
)
def test_python_api_block_runs_as_written(block: Block, checkout: tuple[Path, dict[str, str]]) -> None:
    run_as_written(block, checkout)


def run_as_written(block: Block, checkout: tuple[Path, dict[str, str]]) -> None:
    folder, env = checkout
    if block.needs:
        pytest.skip(f"{block.page} line {block.line} needs {block.needs}")
    script = folder.parent / f"{Path(block.page).stem}-{block.id}.{'py' if block.language == 'python' else 'sh'}"
    if block.language == "python":
        script.write_text(block.code + "\n")
        command = [".venv/bin/python", str(script)]
    else:
        script.write_text("set -eo pipefail -x\n" + "\n".join(runnable_lines(block)[0]) + "\n")
        command = ["bash", str(script)]
    result = subprocess.run(
        command, cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, (
        f"{block.page} line {block.line} failed (exit {result.returncode}):\n{result.stderr[-4000:]}\n{result.stdout[-2000:]}"
    )
