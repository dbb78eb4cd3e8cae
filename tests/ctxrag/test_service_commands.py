"""``ctxrag mcp`` with the real client: Claude Code's own CLI from npm (``@anthropic-ai/claude-code``, the version
pinned below) registers the server with docs/cli.md's exact lines, and ``claude mcp list`` (which starts each server
and asks it to initialize) shows it connected. So does the ``.mcp.json`` block ``ctxrag mcp --print-config`` prints,
and the ``claude mcp add`` line it prints.

The CLI is installed into a folder of the test session (npm's cache there too) and removed after; the test skips,
saying why, where npm or the package is missing. Claude Code runs with HOME and TMPDIR in a temporary folder (never
the user's), no API key, its updater and other traffic off, and a PATH without this virtualenv: only the absolute
paths in the configuration can start the server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.test_readme import Block, readme_blocks

pytestmark = pytest.mark.slow
CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.328"  # the version issue 51 was found with
CLI_PAGE = REPO / "docs" / "cli.md"


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Claude Code's ``claude``, installed from npm into a folder of this session (removed after)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: Claude Code's CLI comes from npm (@anthropic-ai/claude-code)")
    folder = tmp_path_factory.mktemp("claude-code")
    try:
        try:
            installed = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--no-update-notifier", "--prefix", str(folder)]
                + ["--cache", str(folder / "cache")]
                + [CLAUDE_CODE],
                capture_output=True,
                text=True,
                timeout=300,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm did not install {CLAUDE_CODE} in 300 s")
        binary = folder / "node_modules" / ".bin" / "claude"
        if installed.returncode != 0 or not binary.exists():
            said = (installed.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"npm could not install {CLAUDE_CODE}: {said}")
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
        if version.returncode != 0:
            pytest.skip(f"{CLAUDE_CODE} does not run here: {version.stderr.strip()[-300:]}")
        yield binary
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _environment(claude: Path, home: Path) -> dict[str, str]:
    """Claude Code's environment: a HOME and a temp folder of its own, nothing of this virtualenv on PATH, no traffic
    but to the server."""
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),  # Claude Code keeps a folder per project in its temp folder ($TMPDIR/claude-UID)
        "PATH": f"{claude.parent}:/usr/local/bin:/usr/bin:/bin",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "LANG": "C.UTF-8",
    }


def _checkout(folder: Path) -> Path:
    """A folder standing for the README's checkout after its install: ``.venv`` is this test's virtualenv."""
    folder.mkdir()
    (folder / ".venv").symlink_to(Path(sys.prefix))
    return folder


def _block(needle: str) -> Block:
    (found,) = [
        block
        for block in readme_blocks(CLI_PAGE.read_text(encoding="utf-8"), "docs/cli.md")
        if block.language == "bash" and needle in block.code
    ]
    return found


def _bash(code: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-c", code], cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def _listed(folder: Path, env: dict[str, str], claude: Path) -> str:
    listed = subprocess.run([claude, "mcp", "list"], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    return listed.stdout


def test_the_docs_claude_code_lines_register_a_server_claude_code_connects_to(claude: Path, tmp_path: Path) -> None:
    folder = _checkout(tmp_path / "ctxrag")
    env = _environment(claude, tmp_path / "user")
    block = _block("claude mcp add")
    ran = _bash(block.code, folder, env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    line = f"ctxrag: {folder}/.venv/bin/ctxrag mcp --name sample - ✔ Connected"
    assert line in ran.stdout.splitlines(), ran.stdout
    registered = json.loads((tmp_path / "user" / ".claude.json").read_text())["projects"][str(folder)]
    assert registered["mcpServers"]["ctxrag"]["env"] == {"CTXRAG_HOME": f"{folder}/.ctxrag"}
    # the issue's line, the name after --env, is what Claude Code refuses
    issue = 'claude mcp add --scope project --env CTXRAG_HOME="$PWD/.ctxrag" ctxrag -- "$PWD/.venv/bin/ctxrag" mcp'
    wrong = _bash(issue, folder, env)
    assert wrong.returncode != 0 and "Invalid environment variable format: ctxrag" in wrong.stdout + wrong.stderr
    _no_server_left(folder)


def test_print_config_gives_a_block_and_a_line_claude_code_connects_to(claude: Path, tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "ctxrag")
    printed = _bash(_block("--print-config").code, checkout, {**os.environ, "CTXRAG_HOME": ""})
    assert printed.returncode == 0, printed.stderr
    block = json.loads(printed.stdout)
    entry = block["mcpServers"]["ctxrag"]
    assert entry == {
        "command": str(Path(sys.prefix, "bin", "ctxrag")),
        "args": ["mcp", "--name", "sample"],
        "env": {"CTXRAG_HOME": str((checkout / ".ctxrag").resolve())},
    }
    (documented,) = [json.loads(found) for found in re.findall(r"```json\n(.*?)```", CLI_PAGE.read_text(), re.S)]
    assert documented["mcpServers"]["ctxrag"].keys() == entry.keys()
    assert documented["mcpServers"]["ctxrag"]["args"] == entry["args"]

    # the block as a project's .mcp.json, beside the old docs' bare "ctxrag" (not on a client's PATH); both approved,
    # as Claude Code records a user's approval
    project = tmp_path / "project"
    project.mkdir()
    servers = {**block["mcpServers"], "bare": {**entry, "command": "ctxrag"}}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    env = _environment(claude, tmp_path / "user")
    (tmp_path / "user" / ".claude").mkdir()
    (tmp_path / "user" / ".claude" / "settings.json").write_text(
        json.dumps({"enabledMcpjsonServers": ["ctxrag", "bare"]})
    )
    listed = _listed(project, env, claude).splitlines()
    assert f"ctxrag: {entry['command']} mcp --name sample - ✔ Connected" in listed, listed
    bare = "bare: ctxrag mcp --name sample - ✘ Failed to connect — ENOENT: Executable not found in $PATH"
    assert any(line.startswith(bare) for line in listed), listed  # the old docs' block: the issue's FileNotFoundError

    # the line it printed, run in another project
    other = tmp_path / "other"
    other.mkdir()
    added = _bash(printed.stderr, other, env)
    assert added.returncode == 0, added.stdout + added.stderr
    assert f"ctxrag: {entry['command']} mcp --name sample - ✔ Connected" in _listed(other, env, claude).splitlines()
    _no_server_left(tmp_path)


def _no_server_left(folder: Path) -> None:
    """No ``ctxrag mcp`` that Claude Code started for ``folder`` still runs (2 s grace)."""
    deadline = time.monotonic() + 2
    while True:
        left = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    continue
                if " mcp --name " in command and str(folder).encode() in environ:
                    left.append(command)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, left
