"""The set-up ``ctxrag mcp --print-config`` prints: this install's ``ctxrag`` and the home by absolute paths, and a
``claude mcp add`` line whose words a shell reads back as written (the name before ``--env``)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ctxrag.services.client_config import claude_mcp_add, ctxrag_command, mcp_json


def test_the_block_names_this_installs_ctxrag_and_the_home_by_absolute_paths(tmp_path: Path) -> None:
    home = tmp_path / "a home" / ".ctxrag"
    block = mcp_json("my-project", home)
    assert block == {
        "mcpServers": {
            "ctxrag": {
                "command": str(ctxrag_command()),
                "args": ["mcp", "--name", "my-project"],
                "env": {"CTXRAG_HOME": str(home)},
            }
        }
    }
    command = ctxrag_command()
    assert command.is_absolute() and command == Path(sys.prefix, "bin", "ctxrag")  # the tests' virtualenv's own


def test_the_claude_line_puts_the_name_before_env_and_quotes_what_a_shell_would_split(tmp_path: Path) -> None:
    home = tmp_path / "a home" / ".ctxrag"
    words = shlex.split(claude_mcp_add("my-project", home))
    assert words == [
        "claude",
        "mcp",
        "add",
        "ctxrag",
        "--env",
        f"CTXRAG_HOME={home}",
        "--",
        str(ctxrag_command()),
        "mcp",
        "--name",
        "my-project",
    ]
