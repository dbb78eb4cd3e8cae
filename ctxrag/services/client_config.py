"""What a coding agent needs to start ``ctxrag mcp`` for this install and home (``ctxrag mcp --print-config``): the
``mcpServers`` block of a ``.mcp.json`` (Claude Code) or ``claude_desktop_config.json`` (Claude Desktop), and the
``claude mcp add`` line that registers the same server. A client starts the server with neither the user's shell
``PATH`` nor a virtualenv, so both name this install's ``ctxrag`` and the home by absolute paths."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from ctxrag.storage.errors import UserError

SERVER_NAME = "ctxrag"


def ctxrag_command() -> Path:
    """The ``ctxrag`` script of the Python running now (its install's scripts folder: a virtualenv's ``bin``), else the
    one on PATH; absolute."""
    script = "ctxrag.exe" if os.name == "nt" else "ctxrag"
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / script
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.absolute()
    found = shutil.which("ctxrag")
    if found is None:
        raise UserError(
            f"no ctxrag command beside {sys.executable} nor on PATH: install ctxrag into this Python (pip install -e .)"
        )
    return Path(found).absolute()


def server_entry(name: str, home: Path) -> dict[str, Any]:
    """One ``mcpServers`` entry: this install's ``ctxrag mcp --name NAME`` with ``CTXRAG_HOME`` = ``home``."""
    return {"command": str(ctxrag_command()), "args": ["mcp", "--name", name], "env": {"CTXRAG_HOME": str(home)}}


def mcp_json(name: str, home: Path) -> dict[str, Any]:
    """A whole ``.mcp.json`` (or ``claude_desktop_config.json``) holding the ``ctxrag`` server."""
    return {"mcpServers": {SERVER_NAME: server_entry(name, home)}}


def claude_mcp_add(name: str, home: Path) -> str:
    """The ``claude mcp add`` line for the same server, quoted for a POSIX shell. The server's name comes before
    ``--env``, which takes every following word up to the next option (after it, the name is read as a variable)."""
    entry = server_entry(name, home)
    environment = [word for key, value in entry["env"].items() for word in ("--env", f"{key}={value}")]
    return shlex.join(["claude", "mcp", "add", SERVER_NAME, *environment, "--", entry["command"], *entry["args"]])
